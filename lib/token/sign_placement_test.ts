import assert from "node:assert/strict";
import { HoldTimer, SignPlacement, SLOW_TO_MOVE, WINDOW } from "./sign_placement.ts";
import { CLOCK_THREAD_CPUTIME_ID, libc } from "../../ffi/libc.ts";

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

/** Spins the CPU for about `ms` without allocating (no garbage collection inside the timing). */
function spin(ms: number): number {
  const until = performance.now() + ms;
  let n = 0;
  while (performance.now() < until) n++;
  return n;
}

/** This thread's CPU time in ms, read independently of HoldTimer. */
function threadCpuMs(): number {
  const ts = new BigInt64Array(2);
  assert.equal(libc().clock_gettime(CLOCK_THREAD_CPUTIME_ID, new Uint8Array(ts.buffer)), 0);
  return Number(ts[0]) * 1e3 + Number(ts[1]) / 1e6;
}

Deno.test("hold timer: a call that computes holds the thread for its CPU time", () => {
  const timer = new HoldTimer(0.2);
  timer.start();
  const until = threadCpuMs() + 3; // 3 ms of this thread's CPU, however often it is preempted
  while (threadCpuMs() < until) spin(0.05);
  const held = timer.heldMs();
  assert.ok(held >= 3 && held < 50, `held ${held} ms for 3 ms of computing`);
});

Deno.test("hold timer: a call that sleeps holds the thread for its wall-clock time", () => {
  const timer = new HoldTimer(0.2);
  const cell = new Int32Array(new SharedArrayBuffer(4));
  timer.start();
  Atomics.wait(cell, 0, 0, 5); // a module waiting 5 ms for its device
  const held = timer.heldMs();
  assert.ok(held >= 5, `held ${held} ms for a 5 ms sleep`);
});

Deno.test({
  name: "hold timer: time preempted by another thread on the same core is not the call's",
  // A child pinned to one core beside a spinning process pinned there too: the scheduler preempts
  // its ~0.1 ms calls again and again (their wall-clock time shows it); none is counted > 0.6 ms.
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    const cpu = firstAllowedCpu();
    const hog = new Deno.Command("taskset", {
      args: ["-c", cpu, "sh", "-c", "while :; do :; done"],
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      const module = new URL("./sign_placement.ts", import.meta.url).href;
      const script = `
        import { HoldTimer } from "${module}";
        const timer = new HoldTimer(0.3);
        // ~0.1 ms of small-integer arithmetic: nothing allocated, so no garbage collection (the
        // thread would wait for V8's helpers: a sleep) inside a timed call.
        const work = (n) => { let x = 0; for (let i = 0; i < n; i++) x = (x * 31 + i) | 0; return x; };
        for (let i = 0; i < 300; i++) work(100_000); // compiled before the timing starts
        let wall = 0, held = 0;
        for (let i = 0; i < 1000; i++) {
          const t = performance.now();
          timer.start();
          work(100_000);
          held = Math.max(held, timer.heldMs());
          wall = Math.max(wall, performance.now() - t);
        }
        console.log(JSON.stringify({ wall, held }));`;
      const out = await new Deno.Command("taskset", {
        args: ["-c", cpu, Deno.execPath(), "eval", script],
        stderr: "inherit",
      }).output();
      assert.equal(out.code, 0);
      const { wall, held } = JSON.parse(new TextDecoder().decode(out.stdout));
      assert.ok(wall > 1, `no call was preempted (longest ${wall} ms): the test shows nothing`);
      assert.ok(held < 0.6, `a ~0.1 ms call was counted as holding the thread ${held} ms`);
    } finally {
      hog.kill("SIGKILL");
      await hog.status;
    }
  },
});

/** The first CPU this process may run on (Cpus_allowed_list, e.g. "0-1" or "2,4-7"). */
function firstAllowedCpu(): string {
  const status = Deno.readTextFileSync("/proc/self/status");
  const list = status.match(/^Cpus_allowed_list:\s*(\d+)/m);
  assert.ok(list, "no Cpus_allowed_list in /proc/self/status");
  return list[1];
}
