/**
 * What a reload of the largest policy file (MAX_POLICY_BYTES) costs the requests served meanwhile:
 * one client loop signs (c=1) and another asks /health while the daemon reloads the file again and
 * again (SIGHUP); prints latency p50/p99/max outside and during the reloads, how long a reload
 * takes, and how long the same parse takes in one piece (what a request would wait without the
 * sliced parse).
 *
 * @example
 * ```sh
 * deno run -A bench/policy-reload.ts [reloads=5]
 * ```
 */
import { makeTestToken } from "../tests/support/token.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { request } from "../tests/support/http_client.ts";
import { MAX_POLICY_BYTES, Policy } from "../lib/policy/mod.ts";
import { policyOfSize } from "../tests/support/policy.ts";

const RELOADS = Number(Deno.args[0] ?? 5);
const SUBJECT = "CN=bench0,O=Bench";

const token = await makeTestToken({ keys: { "k-ed": "ed25519" } });
const policy = policyOfSize(MAX_POLICY_BYTES, [`${SUBJECT}\tk-ed`]);
const daemon = await startDaemon({ token, policy });
const samples: Array<{ at: number; ms: number; during: boolean }> = [];
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
    samples.push({ at: start, ms: performance.now() - start, during: during || reloading });
  }
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
  const bytes = new TextEncoder().encode(policy);
  const oneShot: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t = performance.now();
    Policy.parse(bytes, "bench");
    oneShot.push(performance.now() - t);
  }
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  console.log(`policy file: ${bytes.length} bytes (MAX_POLICY_BYTES), load average ${load}`);
  console.log(`reload (SIGHUP → "policy reloaded" seen): ${figures(reloadMs)}`);
  console.log(`same parse in one piece (in this process): ${figures(oneShot)}`);
  console.log(
    `/sign + /health outside reloads: ${
      figures(samples.filter((s) => !s.during).map((s) => s.ms))
    }`,
  );
  console.log(
    `/sign + /health during reloads:  ${figures(samples.filter((s) => s.during).map((s) => s.ms))}`,
  );
} finally {
  running = false;
  await daemon.stop();
  await token.cleanup();
}
