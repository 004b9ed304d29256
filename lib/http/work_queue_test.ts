import assert from "node:assert/strict";
import { WorkQueue } from "./_work_queue.ts";

Deno.test("work queue: FIFO, at most `workers` taken until one finishes", () => {
  const work = new WorkQueue<number>(2);
  for (let i = 0; i < 5; i++) work.push(i);
  const taken: number[] = [];
  for (let item = work.next(); item !== undefined; item = work.next()) {
    work.started();
    taken.push(item);
  }
  assert.deepEqual(taken, [0, 1]);
  assert.equal(work.queued, 3);
  work.finished();
  assert.equal(work.next(), 2);
  assert.equal(work.active, 1);
});

Deno.test("work queue: stays in order across its compaction", () => {
  const work = new WorkQueue<number>(1);
  let expected = 0;
  for (let i = 0; i < 5000; i++) {
    work.push(i);
    if (i % 3 === 0) continue; // let a backlog build up
    const item = work.next();
    assert.equal(item, expected++);
  }
  while (work.queued > 0) assert.equal(work.next(), expected++);
  assert.equal(expected, 5000);
});
