import assert from "node:assert/strict";
import { bytesEqual, concat, latin1, latin1Bytes } from "./mod.ts";

Deno.test("latin1Bytes is the inverse of latin1 for every byte value", () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  assert.deepEqual(latin1Bytes(latin1(all)), all);
  assert.equal(latin1(latin1Bytes("cl\u00c3\u00a9")), "cl\u00c3\u00a9");
});

Deno.test("bytesEqual compares length and every byte", () => {
  assert.ok(bytesEqual(Uint8Array.of(), Uint8Array.of()));
  assert.ok(bytesEqual(Uint8Array.of(1, 2, 3), Uint8Array.of(1, 2, 3)));
  assert.ok(!bytesEqual(Uint8Array.of(1, 2, 3), Uint8Array.of(1, 2, 4)));
  assert.ok(!bytesEqual(Uint8Array.of(0, 2, 3), Uint8Array.of(1, 2, 3)));
  assert.ok(!bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2, 0)));
});

Deno.test("concat joins the parts in order, into the buffer alloc gives", () => {
  const parts = [Uint8Array.of(1, 2), new Uint8Array(0), Uint8Array.of(3)];
  assert.deepEqual(concat(parts), Uint8Array.of(1, 2, 3));
  assert.deepEqual(concat([]), new Uint8Array(0));
  const arena = new Uint8Array(8);
  const out = concat(parts, (n) => arena.subarray(2, 2 + n));
  assert.equal(out.buffer, arena.buffer);
  assert.deepEqual(arena, Uint8Array.of(0, 0, 1, 2, 3, 0, 0, 0));
});

Deno.test("concat of one part returns that part, not a copy", () => {
  const only = Uint8Array.of(7, 8);
  assert.equal(concat([only]), only);
});

Deno.test("latin1 keeps more than one chunk of bytes, one char each", () => {
  const bytes = Uint8Array.from({ length: 20_000 }, (_, i) => i % 256);
  const s = latin1(bytes);
  assert.equal(s.length, bytes.length);
  for (let i = 0; i < bytes.length; i += 997) assert.equal(s.charCodeAt(i), bytes[i]);
});

Deno.test("latin1 maps every byte to the same code point, small inputs and large (native path)", () => {
  for (const length of [256, 4095, 4096, 70_000]) {
    const bytes = Uint8Array.from({ length }, (_, i) => (i * 7) % 256);
    const offset = new Uint8Array(length + 3);
    offset.set(bytes, 3);
    for (const view of [bytes, offset.subarray(3)]) {
      const s = latin1(view);
      assert.equal(s.length, length);
      for (let i = 0; i < length; i++) {
        if (s.charCodeAt(i) !== view[i]) assert.fail(`length ${length}: byte ${i}`);
      }
    }
  }
});
