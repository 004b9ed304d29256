/**
 * A Worker that counts up a shared number inside the copy lock (lib/token's CopyLock), `rounds`
 * times, then answers "done". The count is read, then written back one higher after a spin, so
 * two threads that were in at once lose a count: the test sums the rounds and compares. Every
 * Worker of a test starts counting once all of them are ready, so that they count at once.
 *
 * Message in: {@link CountOrder}. Answer: "done".
 */
import { CopyLock } from "../../lib/token/mod.ts";

/** What the Worker is told to do. */
export interface CountOrder {
  /** The copy lock's buffer. */
  lock: SharedArrayBuffer;
  /** One Int32: the count. */
  counter: SharedArrayBuffer;
  rounds: number;
  /** One Int32: the Workers ready so far; each starts once it is `workers`. */
  ready: SharedArrayBuffer;
  workers: number;
}

/** Reads the count, spins, writes it back one higher: a lost update if anyone else was in. */
function countSlowly(counter: Int32Array): void {
  const seen = counter[0];
  let spin = 0;
  for (let i = 0; i < 200; i++) spin += i;
  counter[0] = seen + 1 + (spin < 0 ? 1 : 0);
}

// deno-lint-ignore no-explicit-any
const scope = self as any;

/** Waits until every Worker of the test is ready (at most 30 s: a Worker that never came fails). */
function startTogether(ready: Int32Array, workers: number): void {
  Atomics.add(ready, 0, 1);
  Atomics.notify(ready, 0);
  const deadline = Date.now() + 30_000;
  for (let now = Atomics.load(ready, 0); now < workers; now = Atomics.load(ready, 0)) {
    if (Date.now() > deadline) throw new Error(`only ${now} of ${workers} Workers started`);
    Atomics.wait(ready, 0, now, 1_000);
  }
}

scope.onmessage = (e: MessageEvent<CountOrder>) => {
  const lock = new CopyLock(e.data.lock);
  const counter = new Int32Array(e.data.counter);
  startTogether(new Int32Array(e.data.ready), e.data.workers);
  for (let i = 0; i < e.data.rounds; i++) lock.hold(() => countSlowly(counter));
  scope.postMessage("done");
};
