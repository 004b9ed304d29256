import assert from "node:assert/strict";
import { SignPlacement, SLOW_TO_MOVE, WINDOW } from "./sign_placement.ts";

const QUICK = 0.06; // ms: a software token's ECDSA signature
const SLOW = 5; // ms: an RSA signature, a network HSM

Deno.test("sign placement: a quick key stays on the calling thread", () => {
  const p = new SignPlacement(200);
  for (let i = 0; i < 1000; i++) assert.equal(p.record(QUICK), false);
  assert.equal(p.inline, true);
});

Deno.test("sign placement: a slow key moves to the pool at its SLOW_TO_MOVE-th signature, once", () => {
  const p = new SignPlacement(200);
  for (let i = 1; i < SLOW_TO_MOVE; i++) {
    assert.equal(p.record(SLOW), false, `signature ${i}`);
    assert.equal(p.inline, true);
  }
  assert.equal(p.record(SLOW), true, "the move is told once");
  assert.equal(p.inline, false);
  assert.equal(p.record(QUICK), false, "nothing brings it back but a new resolution");
  assert.equal(p.inline, false);
});

Deno.test("sign placement: a slow first call and the odd preemption do not move a quick key", () => {
  const p = new SignPlacement(200);
  p.record(SLOW); // cold caches
  for (let i = 0; i < 100; i++) p.record(i % WINDOW === 0 ? SLOW : QUICK);
  assert.equal(p.inline, true);
});

Deno.test("sign placement: SLOW_TO_MOVE slow ones among the last WINDOW move it, older ones do not count", () => {
  const p = new SignPlacement(200);
  for (let i = 0; i < SLOW_TO_MOVE - 1; i++) p.record(SLOW);
  for (let i = 0; i < WINDOW; i++) p.record(QUICK); // those slow ones leave the window
  for (let i = 0; i < SLOW_TO_MOVE - 1; i++) p.record(SLOW);
  assert.equal(p.inline, true);
  p.record(QUICK);
  p.record(QUICK);
  p.record(SLOW); // 5 of the last 7
  assert.equal(p.inline, false);
});

Deno.test("sign placement: the limit compares µs to ms; 0 is always the pool, Infinity never", () => {
  const p = new SignPlacement(200);
  for (let i = 0; i < WINDOW; i++) p.record(0.199);
  assert.equal(p.inline, true, "199 µs is under a 200 µs limit");
  for (let i = 0; i < WINDOW; i++) p.record(0.201);
  assert.equal(p.inline, false, "201 µs is over it");
  assert.equal(new SignPlacement(0).inline, false);
  const always = new SignPlacement(Infinity);
  for (let i = 0; i < WINDOW; i++) always.record(60_000);
  assert.equal(always.inline, true);
  assert.throws(() => new SignPlacement(-1), RangeError);
  assert.throws(() => new SignPlacement(NaN), RangeError);
});
