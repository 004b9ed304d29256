import assert from "node:assert/strict";
import { ThreadEnd, ThreadGroup } from "./thread_group.ts";
import type { SharedSocket } from "../../http/mod.ts";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";

/** A member that records when it is closed, and whether the socket file existed then. */
function member(path: string, log: string[], clean = true) {
  return (shared: SharedSocket, i: number) =>
    Promise.resolve({
      slot: shared.slot,
      close: () => {
        log.push(`close ${i}: socket file ${exists(path) ? "present" : "gone"}`);
        return Promise.resolve(clean);
      },
    });
}

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

class TestError extends Error {}

Deno.test("worker group: a stop removes the socket file before any member closes, then closes the socket", async () => {
  const path = `${moduleTempDir("svcd-group-")}/g.sock`;
  const log: string[] = [];
  const group = await ThreadGroup.start(path, 2, member(path, log), TestError);
  assert.deepEqual(group.members.map((m) => m.slot), [0, 1]);
  assert.ok(exists(path));
  assert.equal(await group.close(100), true);
  assert.deepEqual(log, ["close 0: socket file gone", "close 1: socket file gone"]);
  assert.equal(await group.close(100), true, "a second close is the same close");
  assert.equal(log.length, 2);
});

Deno.test("worker group: one member that did not close clean makes the close false", async () => {
  const path = `${moduleTempDir("svcd-group-")}/g.sock`;
  const group = await ThreadGroup.start(path, 1, member(path, [], false), TestError);
  assert.equal(await group.close(100), false);
});

Deno.test("worker group: a member failing to start closes the started ones and removes the socket", async () => {
  const path = `${moduleTempDir("svcd-group-")}/g.sock`;
  const log: string[] = [];
  const start = member(path, log);
  await assert.rejects(
    ThreadGroup.start(
      path,
      3,
      (shared, i) => i === 1 ? Promise.reject(new TestError("no key")) : start(shared, i),
      TestError,
    ),
    /no key/,
  );
  assert.equal(log.length, 2, "the two that started were closed");
  assert.equal(exists(path), false);
});

Deno.test("worker group: a path that is not a socket is refused with the given error, nothing started", async () => {
  const path = `${moduleTempDir("svcd-group-")}/g.sock`;
  Deno.writeTextFileSync(path, "x");
  let started = 0;
  await assert.rejects(
    ThreadGroup.start(path, 2, (shared) => (started++, member(path, [])(shared, 0)), TestError),
    (e) => e instanceof TestError && e.message.includes(path),
  );
  assert.equal(started, 0);
});

/** A `Later` whose timers fire only when the test says so. */
function handTimers() {
  const timers: Array<{ ms: number; fire: () => void; cancelled: boolean }> = [];
  const later = (fire: () => void, ms: number) => {
    const timer = { ms, fire, cancelled: false };
    timers.push(timer);
    return () => (timer.cancelled = true);
  };
  return { timers, later };
}

Deno.test("worker end: a Worker that already ended closes at once; one that never answers, after twice the grace", async () => {
  const source = `data:application/javascript,${encodeURIComponent("self.onmessage = () => {};")}`;
  const silent = new Worker(source, { type: "module" });
  const ends: boolean[] = [];
  const { timers, later } = handTimers();
  const end = new ThreadEnd(silent, (clean) => ends.push(clean), later);
  let askedSilent = 0;
  let settled = false;
  const closing = end.close(1000, () => (askedSilent++, silent.postMessage("close")))
    .finally(() => (settled = true));
  assert.equal(askedSilent, 1, "the Worker was asked to close");
  assert.equal(timers.length, 1);
  assert.ok(
    timers[0].ms >= 2 * 1000,
    `gives up after ${timers[0].ms} ms: less than twice the grace`,
  );
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(settled, false, "resolved with neither an answer nor its time passed");
  assert.deepEqual(ends, []);
  timers[0].fire();
  assert.equal(await closing, false);
  assert.deepEqual(ends, [false], "no answer in time is an end: the owner lets go once");
  end.ended(true);
  assert.deepEqual(ends, [false], "later ends are ignored");

  const answering = new Worker(source, { type: "module" });
  const answered = new ThreadEnd(answering, undefined, later);
  assert.equal(await answered.close(1000, () => answered.ended(true)), true);
  assert.equal(timers.length, 2);
  assert.ok(timers[1].cancelled, "an answer in time stops the wait");

  const gone = new Worker(source, { type: "module" });
  const ended = new ThreadEnd(gone);
  ended.ended(true);
  ended.ended(false); // the first end counts
  let asked = false;
  assert.equal(await ended.close(3_600_000, () => (asked = true)), true);
  assert.equal(asked, false, "an ended Worker is not asked");
});
