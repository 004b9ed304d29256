import assert from "node:assert/strict";
import { DeadlineQueue } from "./_connections.ts";

Deno.test("deadline queue: only entries due are dropped, oldest first, and the head says when", () => {
  const q = new DeadlineQueue<{ since: number; name: string }>(100);
  assert.equal(q.dueAt(), undefined);
  q.set(1, { since: 0, name: "a" });
  q.set(2, { since: 50, name: "b" });
  q.set(3, { since: 120, name: "c" });
  assert.equal(q.dueAt(), 100);
  const dropped: string[] = [];
  const n = q.expire(160, (e) => {
    dropped.push(e.name);
    q.delete(e.name === "a" ? 1 : 2);
  });
  assert.equal(n, 2);
  assert.deepEqual(dropped, ["a", "b"]);
  assert.equal(q.size, 1);
  assert.equal(q.dueAt(), 220);
  assert.ok(q.has(3) && !q.has(1));
});

Deno.test("deadline queue: an entry is due exactly `ms` after its `since`, not a millisecond before", () => {
  const q = new DeadlineQueue<{ since: number }>(2000);
  q.set(5, { since: 1000 });
  const drop = () => q.delete(5);
  assert.equal(q.expire(2999, drop), 0);
  assert.ok(q.has(5));
  assert.equal(q.expire(3000, drop), 1);
  assert.equal(q.size, 0);
});
