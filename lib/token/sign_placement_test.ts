import assert from "node:assert/strict";
import {
  HoldTimer,
  SignPlacement,
  SLOW_TO_MOVE,
  THIS_THREAD,
  type ThreadClocks,
  type ThreadReading,
  WINDOW,
} from "./sign_placement.ts";

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
  p.record(SLOW); // SLOW_TO_MOVE of the last SLOW_TO_MOVE + 2
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

/**
 * Clocks a test scripts: each call advances the wall clock and this thread's CPU clock by what the
 * script says, and may count a voluntary context switch (the module slept).
 */
class ScriptedClocks implements ThreadClocks {
  wall = 1000;
  cpu = 50;
  switches = 7;
  readable = true;

  wallMs(): number {
    return this.wall;
  }

  reading(): ThreadReading {
    let cpu = 0, switches = 0, ok = false;
    return {
      take: () => {
        cpu = this.cpu;
        switches = this.switches;
        ok = this.readable;
      },
      get ok() {
        return ok;
      },
      cpuMs: () => cpu,
      sleeps: () => switches,
    };
  }

  /** One call: `wallMs` passed, `cpuMs` of it on this thread, `slept` if it gave up the CPU. */
  call(timer: HoldTimer, wallMs: number, cpuMs: number, slept = false): number {
    timer.start();
    this.wall += wallMs;
    this.cpu += cpuMs;
    if (slept) this.switches++;
    return timer.heldMs();
  }
}

Deno.test("hold timer: a call that computes holds the thread for its CPU time, not its preempted wall time", () => {
  const clocks = new ScriptedClocks();
  const timer = new HoldTimer(0.25, clocks);
  assert.equal(clocks.call(timer, 3, 3), 3, "never preempted: its whole time");
  assert.equal(clocks.call(timer, 40, 0.125), 0.125, "preempted by other threads: its CPU time");
});

Deno.test("hold timer: a call that sleeps holds the thread for its wall-clock time", () => {
  const clocks = new ScriptedClocks();
  const timer = new HoldTimer(0.2, clocks);
  assert.equal(clocks.call(timer, 5, 0.0625, true), 5);
});

Deno.test("hold timer: with sleptAboveMs, a call that slept briefly counts its CPU time, a long sleep its wall time", () => {
  // Scripted clocks: the "2 ms" and "8 ms" are values the script hands the timer; no time passes.
  const clocks = new ScriptedClocks();
  const timer = new HoldTimer(0.3, clocks, 5);
  assert.equal(clocks.call(timer, 2, 0.0625, true), 0.0625, "a 2 ms wait on a lock");
  assert.equal(clocks.call(timer, 8, 0.0625, true), 8, "an 8 ms wait on the module");
  assert.equal(clocks.call(timer, 4, 1, false), 1, "no sleep: CPU time as ever");
});

Deno.test("hold timer: within the exact limit, or with a clock it cannot read, it answers the wall time", () => {
  const clocks = new ScriptedClocks();
  assert.equal(clocks.call(new HoldTimer(0.25, clocks), 0.125, 0.0625), 0.125);
  clocks.readable = false;
  assert.equal(clocks.call(new HoldTimer(0.25, clocks), 8, 0.125), 8);
  clocks.readable = true;
  assert.equal(clocks.call(new HoldTimer(Infinity, clocks), 8, 0.125), 8, "no limit: wall time");
});

Deno.test("hold timer: this thread's kernel clocks count computing as CPU time and a blocking wait as a switch", () => {
  const reading = THIS_THREAD.reading();
  reading.take();
  const cpuBefore = reading.cpuMs(), switchesBefore = reading.sleeps();
  assert.ok(reading.ok);
  let x = 0;
  for (let i = 0; i < 5_000_000; i++) x = (x * 31 + i) | 0;
  reading.take();
  assert.ok(reading.cpuMs() > cpuBefore, `the CPU clock did not advance (${x})`);
  const afterWork = reading.sleeps();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5); // a module waiting for its device
  reading.take();
  assert.ok(reading.sleeps() > afterWork, "a blocking wait is a voluntary context switch");
  assert.ok(afterWork >= switchesBefore);
});
