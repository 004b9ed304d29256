import assert from "node:assert/strict";
import { decay, delayForCount, isForgotten } from "./curve.ts";

const T = { threshold: 10, baseDelaySeconds: 5, maxDelaySeconds: 300 };
const entry = (count: number, anchorMs: number) => ({
  count,
  anchorMs,
  limitedUntilMs: 0,
  touchedMs: anchorMs,
});

Deno.test("the delay doubles per count past the threshold and stops at the ceiling", () => {
  const delays = [10, 11, 12, 13, 14, 15, 16, 17, 100, 10_000].map((c) => delayForCount(c, T));
  assert.deepEqual(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300, 300]);
});

Deno.test("decay forgets one per whole interval and keeps the remainder", () => {
  assert.equal(decay(entry(5, 0), 59_999, 60_000).count, 5);
  const d = decay(entry(5, 0), 150_000, 60_000);
  assert.deepEqual([d.count, d.anchorMs], [3, 120_000]);
  assert.equal(decay(entry(2, 0), 10 * 60_000, 60_000).count, 0);
  assert.equal(decay(entry(2, 1000), 0, 60_000).count, 2, "a clock going back decays nothing");
});

Deno.test("an entry is forgotten once decayed to zero and not limited", () => {
  assert.equal(isForgotten(entry(2, 0), 119_999, 60_000), false);
  assert.equal(isForgotten(entry(2, 0), 120_000, 60_000), true);
  assert.equal(isForgotten({ ...entry(2, 0), limitedUntilMs: 200_000 }, 120_000, 60_000), false);
});
