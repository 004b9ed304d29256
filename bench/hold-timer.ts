/**
 * The hold timer (lib/token/sign_placement.ts) under preemption: a child pinned to one core beside
 * a spinning process pinned there too runs ~0.1 ms computations again and again. The scheduler
 * preempts them (their wall-clock time shows it); the hold timer should count only the time they
 * held the thread. Prints both maxima; asserts nothing (the decision logic is unit-tested with
 * scripted clocks in lib/token/sign_placement_test.ts).
 *
 * @example
 * ```sh
 * deno run -A bench/hold-timer.ts              # 1000 calls
 * deno run -A bench/hold-timer.ts --calls 5000
 * ```
 */
import { benchArgs, count, valueOption } from "./_args.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "The hold timer under preemption: N ~0.1 ms computations on a core shared with a " +
    "spinning process; prints the longest wall-clock time and the longest time the hold timer " +
    "counted.",
  options: {
    calls: valueOption(count, "1000", "computations to time"),
  },
  examples: ["deno run -A bench/hold-timer.ts --calls 5000"],
});
const calls = Number(values.calls);

/** The first CPU this process may run on (Cpus_allowed_list, e.g. "0-1" or "2,4-7"). */
function firstAllowedCpu(): string {
  const list = Deno.readTextFileSync("/proc/self/status").match(/^Cpus_allowed_list:\s*(\d+)/m);
  if (!list) throw new Error("no Cpus_allowed_list in /proc/self/status");
  return list[1];
}

const cpu = firstAllowedCpu();
const hog = new Deno.Command("taskset", {
  args: ["-c", cpu, "sh", "-c", "while :; do :; done"],
  stdout: "null",
  stderr: "null",
}).spawn();
try {
  const module = new URL("../lib/token/sign_placement.ts", import.meta.url).href;
  const script = `
    import { HoldTimer } from "${module}";
    const timer = new HoldTimer(0.3);
    // Small-integer arithmetic: nothing allocated, so no garbage collection inside a timed call.
    const work = (n) => { let x = 0; for (let i = 0; i < n; i++) x = (x * 31 + i) | 0; return x; };
    for (let i = 0; i < 300; i++) work(100_000); // compiled before the timing starts
    let wall = 0, held = 0;
    for (let i = 0; i < ${calls}; i++) {
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
  if (out.code !== 0) throw new Error(`the timed child exited ${out.code}`);
  const { wall, held } = JSON.parse(new TextDecoder().decode(out.stdout));
  console.log(`${calls} calls of ~0.1 ms on CPU ${cpu} beside a spinning process:`);
  console.log(`  longest wall-clock time  ${wall.toFixed(3)} ms (preempted when well over 0.1)`);
  console.log(`  longest time held        ${held.toFixed(3)} ms (the hold timer's count)`);
} finally {
  hog.kill("SIGKILL");
  await hog.status;
}
