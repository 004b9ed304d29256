import assert from "node:assert/strict";
import { base64Bytes, generatePin, isWellFormedPin } from "./pin.ts";

Deno.test("base64Bytes matches the platform's base64 for every tail length", () => {
  for (let len = 0; len < 40; len++) {
    const bytes = crypto.getRandomValues(new Uint8Array(len));
    assert.equal(new TextDecoder().decode(base64Bytes(bytes)), bytes.toBase64());
  }
});

Deno.test("generatePin gives 44 base64 characters of 32 random bytes, different each time", () => {
  const a = generatePin();
  const b = generatePin();
  assert.equal(a.length, 44);
  assert.equal(Uint8Array.fromBase64(new TextDecoder().decode(a)).length, 32);
  assert.notDeepEqual(a, b);
});

Deno.test("isWellFormedPin: a generated PIN is; a short, long, padded-wrong or non-base64 one is not", () => {
  const pin = generatePin();
  assert.equal(isWellFormedPin(pin), true);
  assert.equal(isWellFormedPin(pin.subarray(0, 43)), false);
  assert.equal(isWellFormedPin(new Uint8Array([...pin, 0x0a])), false);
  const bad = pin.slice();
  bad[3] = 0x2d; // "-"
  assert.equal(isWellFormedPin(bad), false);
  const unpadded = pin.slice();
  unpadded[43] = 0x41;
  assert.equal(isWellFormedPin(unpadded), false);
});
