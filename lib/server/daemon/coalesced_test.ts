/**
 * coalesced(): a burst of calls runs the task at most twice, each call ends only after a run that
 * started at or after it, and a failed run fails only the calls it served.
 */
import assert from "node:assert/strict";
import { coalesced } from "./coalesced.ts";

/** A task whose runs are counted and ended by the test, one at a time. */
function controlledTask() {
  const runs: Array<{ started: number; end: (err?: Error) => void }> = [];
  let clock = 0;
  const task = () =>
    new Promise<void>((resolve, reject) => {
      runs.push({ started: clock, end: (err) => (err ? reject(err) : resolve()) });
    });
  return { runs, task, tick: () => ++clock };
}

/** Lets every pending promise callback run (the task's runs start in them). */
const settle = () => new Promise((r) => setTimeout(r, 0));

Deno.test("coalesced: calls while a run is on share one more run, which starts after them", async () => {
  const { runs, task, tick } = controlledTask();
  const call = coalesced(task);
  const first = call();
  tick();
  const during = [call(), call(), call()];
  assert.equal(during[0], during[1], "the calls meanwhile share one promise");
  assert.equal(during[1], during[2]);
  await settle();
  assert.equal(runs.length, 1, "no second run while the first is on");
  runs[0].end();
  await first;
  await settle();
  assert.equal(runs.length, 2, "one more run for all the calls meanwhile");
  assert.equal(runs[1].started, 1, "it started after the calls");
  let ended = false;
  during[0].then(() => (ended = true));
  await settle();
  assert.equal(ended, false, "the calls end with their run, not with the first");
  runs[1].end();
  await Promise.all(during);
  const later = call();
  await settle();
  assert.equal(runs.length, 3, "once idle, a call runs at once");
  runs[2].end();
  await later;
});

Deno.test("coalesced: a failed run fails the calls it served, not the run queued after it", async () => {
  const { runs, task } = controlledTask();
  const call = coalesced(task);
  const first = call();
  const second = call();
  runs[0].end(new Error("file unreadable"));
  await assert.rejects(first, /file unreadable/);
  await settle();
  assert.equal(runs.length, 2);
  runs[1].end();
  await second;
});
