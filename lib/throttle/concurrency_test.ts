import assert from "node:assert/strict";
import { ConcurrencyCap } from "./concurrency.ts";

Deno.test("a client sending one request at a time is never capped, even at limit 1", () => {
  const cap = new ConcurrencyCap(1);
  for (let i = 0; i < 1000; i++) {
    const release = cap.tryAcquire("CN=alice");
    assert.ok(release, `request ${i} capped`);
    release();
  }
  assert.equal(cap.identities, 0);
});

Deno.test("the request past the limit is refused; others are unaffected; a release frees a slot", () => {
  const cap = new ConcurrencyCap(3);
  const held = [1, 2, 3].map(() => cap.tryAcquire("CN=alice"));
  assert.ok(held.every(Boolean));
  assert.equal(cap.tryAcquire("CN=alice"), undefined);
  const bob = cap.tryAcquire("CN=bob");
  assert.ok(bob);
  held[0]!();
  assert.ok(cap.tryAcquire("CN=alice"));
  assert.equal(cap.inFlight("CN=alice"), 3);
});

Deno.test("releasing twice frees one slot, not two", () => {
  const cap = new ConcurrencyCap(2);
  const a = cap.tryAcquire("CN=alice")!;
  cap.tryAcquire("CN=alice");
  a();
  a();
  assert.equal(cap.inFlight("CN=alice"), 1);
  assert.ok(cap.tryAcquire("CN=alice"));
  assert.equal(cap.tryAcquire("CN=alice"), undefined);
});

Deno.test("idle identities are not kept", () => {
  const cap = new ConcurrencyCap(2);
  const releases = Array.from({ length: 1000 }, (_, i) => cap.tryAcquire(`CN=c${i}`)!);
  assert.equal(cap.identities, 1000);
  releases.forEach((r) => r());
  assert.equal(cap.identities, 0);
});

Deno.test("forWorkers gives max(1, workers - 1); a limit below 1 is refused", () => {
  assert.deepEqual([1, 2, 4, 16].map((w) => ConcurrencyCap.forWorkers(w).limit), [1, 1, 3, 15]);
  assert.throws(() => new ConcurrencyCap(0), RangeError);
  assert.throws(() => new ConcurrencyCap(1.5), RangeError);
});
