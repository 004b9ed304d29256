/**
 * Cost of one synchronous call from a request Worker to the main isolate (lib/server/threads/protocol.ts:
 * the Worker posts the call and blocks on Atomics.wait; the main isolate's onmessage answers in the
 * shared slot and wakes it): µs per round trip seen by the Worker, and the main thread's CPU µs per
 * call from /proc. This is what `--threads` pays per request for the refusal-budget check and the
 * concurrency-cap check (one "peek" call, as for `100 Continue`), besides the audit line's message and its answer.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/thread-call.ts [--calls 20000] [--rounds 3]
 * ```
 */
import { benchArgs, count, valueOption } from "./_args.ts";
import { answerCall, type CallMessage, callSlot } from "../lib/server/threads/protocol.ts";
import { cpuSeconds } from "./_proc_cpu.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Cost of one synchronous call from a request Worker to the main isolate (what " +
    "--threads pays per request for the budget and cap checks): µs per round trip seen by the " +
    "Worker and the main thread's CPU µs per call; medians of the rounds.",
  options: {
    calls: valueOption(count, "20000", "calls per round"),
    rounds: valueOption(count, "3", "rounds"),
  },
  examples: ["node_modules/.bin/deno run -A bench/thread-call.ts --calls 20000 --rounds 3"],
});
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const WORKER = new URL("./_thread-call-worker.ts", import.meta.url);

/** One round: `calls` peek calls from a Worker, answered here as the daemon's main isolate does. */
async function round(): Promise<{ roundTripUs: number; mainUs: number }> {
  const slot = callSlot();
  const worker = new Worker(WORKER, { type: "module" });
  const mainStat = `/proc/${Deno.pid}/task/${Deno.pid}/stat`;
  const before = await cpuSeconds(mainStat);
  const roundTripUs = await new Promise<number>((resolve) => {
    worker.onmessage = (e: MessageEvent<CallMessage | { kind: "done"; us: number }>) => {
      if (e.data.kind === "call") answerCall(slot, "peek", { kind: "admitted" });
      else resolve(e.data.us);
    };
    worker.postMessage({ slot, calls });
  });
  const mainUs = (await cpuSeconds(mainStat) - before) * 1e6 / calls;
  worker.terminate();
  return { roundTripUs, mainUs };
}

if (import.meta.main) {
  const results = [];
  for (let r = 0; r < rounds; r++) results.push(await round());
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
  console.log(
    `synchronous Worker → main call, ${calls} calls × ${rounds} rounds (medians): ` +
      `${median(results.map((x) => x.roundTripUs)).toFixed(1)} µs per round trip, ` +
      `${median(results.map((x) => x.mainUs)).toFixed(1)} µs of main-thread CPU per call`,
  );
}
