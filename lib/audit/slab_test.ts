import assert from "node:assert/strict";
import { slabBytes } from "./slab.ts";

Deno.test("slab: views are zero-filled, of the size asked, and never share a byte", () => {
  const views = Array.from({ length: 2000 }, (_, i) => slabBytes(1 + (i * 37) % 700));
  views.forEach((v, i) => {
    assert.equal(v.length, 1 + (i * 37) % 700);
    assert.ok(v.every((b) => b === 0));
    v.fill(0xff);
  });
  const ranges = views
    .map((v) => ({ buffer: v.buffer, start: v.byteOffset, end: v.byteOffset + v.length }))
    .sort((a, b) => a.start - b.start);
  for (let i = 1; i < ranges.length; i++) {
    for (let j = 0; j < i; j++) {
      if (ranges[i].buffer !== ranges[j].buffer) continue;
      assert.ok(ranges[j].end <= ranges[i].start || ranges[i].end <= ranges[j].start);
    }
  }
  assert.ok(new Set(views.map((v) => v.buffer)).size > 1, "a full slab is replaced");
});

Deno.test("slab: a request larger than a quarter slab gets a buffer of its own", () => {
  const big = slabBytes(20_000);
  assert.equal(big.byteOffset, 0);
  assert.equal(big.buffer.byteLength, 20_000);
});
