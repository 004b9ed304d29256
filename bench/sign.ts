/**
 * /sign throughput and latency over the daemon's UNIX socket at concurrency 1, 16 and 64, beside
 * the raw C_Sign rate of the same key measured in the same run, with the daemon as shipped and
 * with its audit log or refusal budget switched off (bench/serve.ts) to show what each costs.
 * One connection per request, as behind nginx without upstream keepalive. This process is the load
 * generator; the daemon is a child process, so both share the machine's cores as in production.
 * `server µs/req` is the daemon's CPU per request over all its threads (from /proc); `main µs` is
 * its main thread's share, which caps the rate at 1 s ÷ main µs whatever the number of cores.
 * `instr/req` (with perf) is the daemon's instructions per request: the figure to compare changes
 * by when other work on the machine makes µs swing.
 *
 * @example
 * ```sh
 * deno run -A bench/sign.ts --seconds 3
 * deno run -A bench/sign.ts --keys ec-p256 --variants full,no-audit
 * ```
 */
import { benchArgs, count, listOf, oneOf, positiveNumber, valueOption } from "./_args.ts";
import { measureRawSign } from "./raw-sign.ts";
import { runLoad } from "./load.ts";
import { daemonCpu } from "./_proc_cpu.ts";
import { KEY_TYPES } from "../lib/token/mod.ts";
import { makeTestToken, openTestToken, testTokenPin } from "../tests/support/token.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { request } from "../tests/support/http_client.ts";

const SERVE = new URL("./serve.ts", import.meta.url).pathname;

/** Daemon variants: extra arguments of bench/serve.ts. */
const VARIANTS: Record<string, string[]> = {
  "full": [],
  "no-audit": ["--without", "audit"],
  "no-budget": ["--without", "budget"],
};

const { values } = benchArgs({
  url: import.meta.url,
  measures: "/sign throughput and latency over the daemon's UNIX socket at each concurrency, " +
    "beside the raw C_Sign rate of the same key in the same run, with the daemon as shipped and " +
    "with its audit log or refusal budget switched off; the daemon's CPU (all threads, main " +
    "thread) and, with perf, instructions per request.",
  options: {
    seconds: valueOption(positiveNumber, "3", "seconds per figure"),
    keys: {
      type: "string",
      default: "ec-p256,ed25519",
      check: listOf(oneOf(Object.keys(KEY_TYPES))),
      help: "key types to sign with",
    },
    concurrency: {
      type: "string",
      default: "1,16,64",
      check: listOf(count),
      help: "concurrency levels",
    },
    variants: {
      type: "string",
      default: "full,no-audit,no-budget",
      check: listOf(oneOf(Object.keys(VARIANTS))),
      help: "daemon variants",
    },
  },
  examples: [
    "deno run -A bench/sign.ts --seconds 3",
    "deno run -A bench/sign.ts --keys ec-p256 --variants full,no-audit",
  ],
});
const seconds = Number(values.seconds);
const keyTypes = values.keys.split(",");
const levels = values.concurrency.split(",").map(Number);
const variants = values.variants.split(",");

const token = await makeTestToken({ keys: Object.fromEntries(keyTypes.map((t) => [`k-${t}`, t])) });
const policy = Array.from(
  { length: 64 },
  (_, i) => keyTypes.map((t) => `CN=bench${i},O=Bench\tk-${t}`).join("\n"),
).join("\n") + "\n";

console.log(
  `svcd /sign bench — ${token.module.name}, ${seconds}s per figure, one connection per request`,
);
const raw = new Map<string, number>();
{
  const t = openTestToken(token);
  await t.login(testTokenPin(token));
  for (const type of keyTypes) {
    const key = await t.key(`k-${type}`);
    if (!key) throw new Error(`key k-${type} missing`);
    const f = await measureRawSign(t, token.modulePath, key, { durationMs: seconds * 1000 });
    const best = Math.max(f.syncLoopPerSec, f.binding16PerSec);
    raw.set(type, best);
    console.log(
      `raw ${type}: sync loop ${f.syncLoopPerSec.toFixed(0)}/s, binding c=1 ${
        f.binding1PerSec.toFixed(0)
      }/s, ` +
        `binding c=16 ${f.binding16PerSec.toFixed(0)}/s → raw C_Sign = ${best.toFixed(0)}/s`,
    );
  }
  t.close();
}

/**
 * Starts counting the instructions `pid` executes (all threads, user + kernel, `perf stat`); the
 * returned function stops and gives the count. Undefined when perf is not usable. Instructions per
 * request barely move with the machine's other load, unlike µs.
 */
async function countInstructions(
  pid: number,
): Promise<(() => Promise<number | undefined>) | undefined> {
  let perf: Deno.ChildProcess;
  try {
    perf = new Deno.Command("perf", {
      args: ["stat", "-x", ",", "-e", "instructions", "-p", String(pid)],
      stdout: "null",
      stderr: "piped",
    }).spawn();
  } catch {
    return undefined;
  }
  await new Promise((r) => setTimeout(r, 300)); // perf attaches to each thread on its own
  return async () => {
    perf.kill("SIGINT");
    const text = new TextDecoder().decode((await perf.output()).stderr);
    const count = Number(text.split("\n").find((l) => l.includes("instructions"))?.split(",")[0]);
    return Number.isFinite(count) ? count : undefined;
  };
}

/** fdatasync calls of the audit log so far, from /health (0 when the audit is switched off). */
async function auditSyncs(socket: string): Promise<number> {
  const res = await request(socket, {
    path: "/health",
    headers: [["X-SVC-Client-Subject", "CN=bench0,O=Bench"]],
  });
  return (res.json() as { audit: { syncs?: number } }).audit.syncs ?? 0;
}

console.log(
  "\nvariant     key       c    req/s   p50 ms  p99 ms  errors  syncs/req  server µs/req  main µs" +
    "  instr/req  × raw C_Sign",
);
for (const variant of variants) {
  const daemon = await startDaemon({
    token,
    policy,
    entry: [SERVE, ...VARIANTS[variant]],
    args: ["--workers", "16"],
  });
  try {
    for (const type of keyTypes) {
      for (const c of levels) {
        await runLoad({ socket: daemon.socket, key: `k-${type}`, concurrency: c, seconds: 0.3 });
        const syncsBefore = await auditSyncs(daemon.socket);
        const cpuBefore = await daemonCpu(daemon.pid);
        const load = { socket: daemon.socket, key: `k-${type}`, concurrency: c, seconds };
        const counting = await countInstructions(daemon.pid);
        const r = await runLoad(load);
        const instructions = await counting?.();
        const cpuAfter = await daemonCpu(daemon.pid);
        const perRequest = (s: number) => s * 1e6 / Math.max(1, r.requests);
        const cpu = perRequest(cpuAfter.all - cpuBefore.all);
        const mainCpu = perRequest(cpuAfter.main - cpuBefore.main);
        const syncs = (await auditSyncs(daemon.socket) - syncsBefore) / Math.max(1, r.requests);
        const ratio = r.perSecond / raw.get(type)!;
        const cells = [
          variant.padEnd(11),
          type.padEnd(9),
          String(c).padStart(2),
          r.perSecond.toFixed(0).padStart(8),
          r.p50ms.toFixed(2).padStart(8),
          r.p99ms.toFixed(2).padStart(7),
          String(r.errors).padStart(7),
          syncs.toFixed(3).padStart(9),
          cpu.toFixed(0).padStart(14),
          mainCpu.toFixed(0).padStart(8),
          (instructions === undefined ? "-" : `${(instructions / r.requests / 1000).toFixed(0)}k`)
            .padStart(10),
          ` ${ratio.toFixed(2)} ×`,
        ];
        console.log(cells.join(" "));
      }
    }
  } finally {
    await daemon.stop();
  }
}
await token.cleanup();
