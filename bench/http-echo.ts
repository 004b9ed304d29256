/**
 * Requests/s and latency of the connection layer alone: a Listener whose handler echoes the body,
 * driven over its UNIX socket at concurrency 1, 16 and 64, one connection per request. The load
 * generator (bench/load.ts) runs as a separate Deno process, as the proxy would; both share
 * this machine's cores. Each level runs `--runs` times and the run with the median req/s is shown
 * with the range, because on a shared 2-core machine single runs vary by up to 2×.
 *
 * @example
 * ```sh
 * deno run -A bench/http-echo.ts            # c = 1, 16, 64; 3 runs of 3 s each, median shown
 * deno run -A bench/http-echo.ts --c 16 --seconds 5 --workers 4
 * ```
 */
import { cpuUsage } from "node:process";
import { benchArgs, count, positiveNumber, valueOption } from "./_args.ts";
import { Listener } from "../lib/http/mod.ts";
import type { LoadResult } from "./load.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Requests/s and latency of the connection layer alone: a Listener whose handler " +
    "echoes the body, driven over its UNIX socket by bench/load.ts (its own process), one " +
    "connection per request; each level runs --runs times and the run with the median req/s is " +
    "shown with the range.",
  options: {
    c: {
      type: "string",
      multiple: true,
      default: ["1", "16", "64"],
      check: count,
      help: "a concurrency level; repeat it for more",
    },
    seconds: valueOption(positiveNumber, "3", "seconds per run"),
    workers: valueOption(count, "16", "the Listener's workers"),
    runs: valueOption(count, "3", "runs per level"),
  },
  examples: [
    "deno run -A bench/http-echo.ts",
    "deno run -A bench/http-echo.ts --c 16 --seconds 5 --workers 4",
  ],
});
const levels = values.c.map(Number);
const dir = Deno.makeTempDirSync({ prefix: "svcd-bench-" });
const path = `${dir}/echo.sock`;

const listener = Listener.open({
  path,
  proxyUid: Deno.uid(),
  workers: Number(values.workers),
  handler: (req) =>
    Promise.resolve({
      status: 200,
      headers: [["Content-Type", "application/octet-stream"]],
      body: req.body,
    }),
});
const serving = listener.serve();
const deno = Deno.execPath();
const loadScript = new URL("./load.ts", import.meta.url).pathname;

console.log(
  `http-echo: Deno ${Deno.version.deno}, ${navigator.hardwareConcurrency} cores, workers=${values.workers}`,
);
console.log("load generator: separate Deno process, Deno.connect per request, 32-byte POST");
console.log("server µs/req = this process's CPU time (user+sys) over the level / requests served");
console.log("    c   req/s   p50 ms   p99 ms  errors   server µs/req   req/s range over runs");

async function runLoad(c: number): Promise<LoadResult> {
  const out = await new Deno.Command(deno, {
    args: [
      ...["run", "-A", loadScript, "--socket", path, "--path", "/echo"],
      ...["--concurrency", String(c), "--seconds", values.seconds, "--warmup", "0.5"],
    ],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(`load generator failed at c=${c}`);
  return JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").pop()!);
}

const rps = (r: LoadResult) => Math.round(r.perSecond).toString();

try {
  for (const c of levels) {
    const runs: LoadResult[] = [];
    const cpu0 = cpuUsage();
    const served0 = listener.stats().served;
    for (let i = 0; i < Number(values.runs); i++) runs.push(await runLoad(c));
    const cpu = cpuUsage(cpu0);
    const perRequest = (cpu.user + cpu.system) / (listener.stats().served - served0);
    runs.sort((a, b) => a.perSecond - b.perSecond);
    const r = runs[runs.length >> 1];
    const errors = runs.reduce((n, x) => n + x.errors, 0);
    console.log(
      `${String(c).padStart(5)} ${rps(r).padStart(7)} ${r.p50ms.toFixed(3).padStart(8)} ` +
        `${r.p99ms.toFixed(3).padStart(8)} ${String(errors).padStart(7)} ` +
        `${perRequest.toFixed(1).padStart(15)}   ` +
        `${rps(runs[0])}–${rps(runs[runs.length - 1])}`,
    );
  }
  console.log(`listener stats: ${JSON.stringify(listener.stats())}`);
} finally {
  await listener.close();
  await serving;
  Deno.removeSync(dir, { recursive: true });
}
