/**
 * The copy lock itself: threads of one process that share its buffer are inside it one at a time,
 * and a lock that stays held fails the wait after its time instead of hanging the thread.
 */
import assert from "node:assert/strict";
import { CopyLock, CopyLockTimeout } from "./_key_cache.ts";
import type { CountOrder } from "../../tests/support/copy_lock_worker.ts";

const WORKER = new URL("../../tests/support/copy_lock_worker.ts", import.meta.url);
const ROUNDS = 5_000;

function countInWorker(order: CountOrder): Promise<void> {
  const worker = new Worker(WORKER, { type: "module" });
  return new Promise<void>((resolve, reject) => {
    worker.onmessage = () => resolve();
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(e.message));
    };
    worker.postMessage(order);
  }).finally(() => worker.terminate());
}

Deno.test("copy lock: three Workers sharing its buffer never are inside it at once (no count lost)", async () => {
  const lock = new CopyLock();
  const counter = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  const ready = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
  const order = { lock: lock.buffer, counter, rounds: ROUNDS, ready, workers: 3 };
  await Promise.all(Array.from({ length: 3 }, () => countInWorker(order)));
  assert.equal(new Int32Array(counter)[0], 3 * ROUNDS);
});

Deno.test("copy lock: held and never released, a wait fails after its time; released, it is taken", () => {
  const holder = new CopyLock();
  const waiter = new CopyLock(holder.buffer, 50);
  holder.hold(() => {
    // Held by this thread for the whole of the other's wait: as by a thread that ended inside it.
    assert.throws(() => waiter.hold(() => "never"), CopyLockTimeout);
  });
  assert.equal(waiter.hold(() => "taken"), "taken");
  assert.throws(() =>
    waiter.hold(() => {
      throw new Error("inside");
    }), /inside/);
  assert.equal(holder.hold(() => "released after a throw"), "released after a throw");
});
