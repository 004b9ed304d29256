/**
 * fdatasync calls per /sign request in the real daemon at c=16 (or --concurrency), counted by
 * the `syscalls:sys_enter_fdatasync` tracepoint (`perf stat -p`) of `svcd serve`, beside the request rate. (bench/sign.ts
 * compares the rate with the audit log switched off.)
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/audit-sign.ts --seconds 5 --concurrency 16
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption } from "./_args.ts";
import { runLoad } from "./load.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { makeTestToken } from "../tests/support/token.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "fdatasync calls per /sign request in the real daemon, counted by the " +
    "syscalls:sys_enter_fdatasync tracepoint (perf stat -p) of svcd serve, beside the request " +
    "rate.",
  options: {
    seconds: valueOption(positiveNumber, "5", "seconds of load"),
    concurrency: valueOption(count, "16", "requests in flight"),
  },
  examples: ["node_modules/.bin/deno run -A bench/audit-sign.ts --seconds 5 --concurrency 16"],
});
const [seconds, concurrency] = [values.seconds, values.concurrency].map(Number);

/** Starts counting fdatasync calls of `pid` (perf tracepoint); the returned function stops and returns the count. */
function countSyncs(pid: number): () => Promise<number> {
  const child = new Deno.Command("perf", {
    args: ["stat", "-x", ",", "-e", "syscalls:sys_enter_fdatasync", "-p", String(pid)],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  return async () => {
    child.kill("SIGINT");
    const out = new TextDecoder().decode((await child.output()).stderr);
    const row = out.split("\n").find((l) => l.includes("sys_enter_fdatasync"));
    const count = Number(row?.split(",")[0]);
    if (!Number.isFinite(count)) throw new Error(`perf printed no fdatasync count:\n${out}`);
    return count;
  };
}

if (import.meta.main) {
  const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
  const policy = Array.from({ length: concurrency }, (_, i) => `CN=bench${i},O=Bench\tk-ec\n`).join(
    "",
  );
  const daemon = await startDaemon({ token, policy });
  try {
    await runLoad({ socket: daemon.socket, key: "k-ec", concurrency, seconds: 1 }); // warm-up
    const stop = countSyncs(daemon.pid);
    await new Promise((r) => setTimeout(r, 300)); // let perf attach to every thread
    const load = await runLoad({ socket: daemon.socket, key: "k-ec", concurrency, seconds });
    const syncs = await stop();
    const served = load.requests - load.errors;
    console.log(
      `svcd /sign ec-p256 c=${concurrency}: ${Math.round(load.perSecond)} req/s, p50 ${
        load.p50ms.toFixed(2)
      } ms, ` +
        `p99 ${
          load.p99ms.toFixed(2)
        } ms, ${load.errors} errors; fdatasync ${syncs} for ${served} requests ` +
        `= ${(syncs / served).toFixed(3)} per request`,
    );
  } finally {
    await daemon.stop();
    await token.cleanup();
  }
}
