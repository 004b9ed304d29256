/**
 * What a reload of a policy of MAX_POLICY_GRANTS (1 000 000) grants costs the requests served
 * meanwhile: one client loop signs (c=1) and another asks /health while the daemon reloads the
 * file again and again (SIGHUP); prints /sign latency p50/p99/max outside and during the reloads
 * and their p99 ratio (the goal: at most 3), the same for /health (no token, no audit: the event
 * loop alone), how long a reload takes, how long the same parse takes in one piece on the calling
 * thread (what a request would wait if the thread serving it parsed) and the shared memory the
 * grants take (bytes per grant).
 *
 * @example
 * ```sh
 * deno run -A bench/policy-reload.ts [--threads N] [RELOADS]
 * ```
 */
import { benchArgs, count, wholeNumber } from "./_args.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { request } from "../tests/support/http_client.ts";
import { MAX_POLICY_GRANTS, Policy } from "../lib/policy/mod.ts";
import { policyOfGrants } from "../tests/support/policy.ts";

const { values, positionals, exitWithUsage } = benchArgs({
  url: import.meta.url,
  measures: "What a reload of a policy of 1 000 000 grants costs the requests served meanwhile: " +
    "/sign (c=1) and /health latency p50/p99/max outside and during reloads (SIGHUP) and their " +
    "p99 ratio, how long a reload takes, the same parse in one piece on the calling thread, and " +
    "the shared memory the grants take.",
  positionals: { value: "[RELOADS]", help: "reloads to measure (default: 10)" },
  options: {
    threads: {
      type: "string",
      default: "0",
      check: wholeNumber,
      help: "the --threads of svcd serve",
    },
  },
  examples: [
    "deno run -A bench/policy-reload.ts",
    "deno run -A bench/policy-reload.ts --threads 2 5",
  ],
});
if (positionals.length > 1) exitWithUsage(`one RELOADS at most, not ${positionals.join(" ")}`);
const reloads = positionals[0] ?? "10";
if (!count.ok(reloads)) exitWithUsage(`RELOADS must be ${count.what}, not '${reloads}'`);
const THREADS = values.threads;
const RELOADS = Number(reloads);
const SUBJECT = "CN=bench0,O=Bench";

const token = await makeTestToken({ keys: { "k-ed": "ed25519" } });
const { bytes } = policyOfGrants(MAX_POLICY_GRANTS, "k-ed", [`${SUBJECT}\tk-ed`]);
const daemon = await startDaemon({ token, policy: bytes, args: ["--threads", THREADS] });
const samples: Array<{ path: string; ms: number; during: boolean }> = [];
let reloading = false;
let running = true;

async function clientLoop(path: string): Promise<void> {
  while (running) {
    const start = performance.now();
    const during = reloading;
    const res = await request(daemon.socket, {
      method: path === "/sign" ? "POST" : "GET",
      path,
      headers: [["X-SVC-Client-Subject", SUBJECT], ["X-SVC-Key", "k-ed"]],
      body: path === "/sign" ? "m" : undefined,
    });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text()}`);
    samples.push({ path, ms: performance.now() - start, during: during || reloading });
  }
}

function p99(ms: number[]): number {
  const sorted = [...ms].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.99 * sorted.length))];
}

function figures(ms: number[]): string {
  if (ms.length === 0) return "no samples";
  ms.sort((a, b) => a - b);
  const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))].toFixed(1);
  return `n=${ms.length} p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${ms.at(-1)!.toFixed(1)} ms`;
}

try {
  const loops = [clientLoop("/sign"), clientLoop("/health")];
  const reloadMs: number[] = [];
  await new Promise((r) => setTimeout(r, 1000)); // idle baseline
  for (let i = 1; i <= RELOADS; i++) {
    const seen = daemon.stderr().split("policy reloaded").length;
    reloading = true;
    const start = performance.now();
    daemon.signal("SIGHUP");
    await daemon.waitForLog((log) => log.split("policy reloaded").length > seen);
    reloadMs.push(performance.now() - start);
    reloading = false;
    await new Promise((r) => setTimeout(r, 300));
  }
  running = false;
  await Promise.all(loops);
  const oneShot: number[] = [];
  let parsed: Policy | undefined;
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    parsed = Policy.parse(bytes, "bench");
    oneShot.push(performance.now() - t);
  }
  const shared = parsed!.toData().compact.buffer.byteLength;
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  const ms = (path: string, during: boolean) =>
    samples.filter((s) => s.path === path && s.during === during).map((s) => s.ms);
  console.log(
    `policy file: ${parsed!.size} grants, ${bytes.length} bytes, --threads ${THREADS}, ` +
      `load average ${load}`,
  );
  console.log(
    `shared memory of the grants: ${shared} bytes, ${(shared / parsed!.size).toFixed(1)} per grant`,
  );
  console.log(`reload (SIGHUP → "policy reloaded" seen): ${figures(reloadMs)}`);
  console.log(`same parse in one piece (in this process): ${figures(oneShot)}`);
  console.log(`/sign outside reloads:   ${figures(ms("/sign", false))}`);
  console.log(`/sign during reloads:    ${figures(ms("/sign", true))}`);
  console.log(`/health outside reloads: ${figures(ms("/health", false))}`);
  console.log(`/health during reloads:  ${figures(ms("/health", true))}`);
  const ratio = (path: string) => (p99(ms(path, true)) / p99(ms(path, false))).toFixed(2);
  console.log(`/sign p99 during ÷ outside: ${ratio("/sign")} (goal ≤ 3)`);
  console.log(`/health p99 during ÷ outside: ${ratio("/health")}`);
} finally {
  running = false;
  await daemon.stop();
  await token.cleanup();
}
