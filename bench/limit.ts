/**
 * svcd beside the limit of its protocol on this machine: bench/limit/svcd-limit, a C server that
 * does per request what svcd does for POST /sign and nothing more (bench/limit/limit.c), each with
 * the audit log on and off, loaded alike by bench/httpload.c (C, one epoll thread) at c=16 with 16
 * identities (`--concurrency`), one connection per request. The four run `--rounds` times,
 * interleaved, and the medians are compared, since other work on a shared machine moves every rate:
 *
 * - req/s, p50 and p99;
 * - CPU µs per request of the server (all its threads, from /proc) and of each thread by name;
 * - how busy the cores were (/proc/stat, whatever process kept them busy), and the server's own
 *   share of them (its CPU ÷ wall time × cores);
 * - svcd ÷ limit with the audit on and off, svcd's CPU per /sign ÷ the limit's, and svcd's audit
 *   on ÷ off against the limit's own.
 *
 * The load average is printed before and after: on a loaded machine every figure is lower and the
 * ratios carry the noise of both.
 *
 * Needs gcc, make and libssl-dev (Makefile APT_PACKAGES) to build svcd-limit and httpload.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/limit.ts
 * node_modules/.bin/deno run -A bench/limit.ts --seconds 5 --rounds 3 --svcd-threads 0
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption, wholeNumber } from "./_args.ts";
import { buildHttpload, runSignLoad } from "./_httpload.ts";
import { startLimit } from "./_limit.ts";
import { coresBusy, coreTicks, cpuSeconds, threadCpu } from "./_proc_cpu.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { makeTestToken, type TestToken } from "../tests/support/token.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "svcd /sign beside svcd-limit (bench/limit: a C server doing per request what svcd " +
    "does and nothing more), audit on and off, c=16 with 16 identities (bench/httpload.c): " +
    "req/s, " +
    "CPU µs per request in all and per thread, how busy the cores were, and the ratios; medians " +
    "of interleaved rounds.",
  options: {
    seconds: valueOption(positiveNumber, "4", "seconds per figure"),
    rounds: valueOption(count, "3", "rounds, interleaved"),
    concurrency: valueOption(count, "16", "connections at a time, one identity each"),
    threads: valueOption(count, "4", "svcd-limit's worker threads (accept, parse, sign)"),
    "svcd-threads": valueOption(
      wholeNumber,
      "0",
      "svcd serve --threads (0: the main thread serves the socket)",
    ),
  },
  examples: [
    "node_modules/.bin/deno run -A bench/limit.ts",
    "node_modules/.bin/deno run -A bench/limit.ts --seconds 5 --rounds 3 --svcd-threads 0",
    "node_modules/.bin/deno run -A bench/limit.ts --concurrency 1",
  ],
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const KEY = "k-ec";
const CLIENTS = Number(values.concurrency);
/** Both servers' --workers: a per-identity cap of 15, never met by one connection each. */
const WORKERS = 16;
const SERVE = new URL("./serve.ts", import.meta.url).pathname;

/** One server's figures over one measured load. */
interface Figures {
  perSecond: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  cpuUs: number;
  /** µs per request by thread name (the main thread is `main`). */
  threadUs: Map<string, number>;
  /** Each core's busy share over the load, 0–1, all processes. */
  busy: number[];
  /** The server's CPU ÷ (wall × cores), 0–1. */
  share: number;
  /** svcd-limit with the audit on: request lines per group commit and fdatasync's wall µs. */
  groups?: { lines: number; syncUs: number };
}

/** The C load generator and the message it sends. */
interface SignLoad {
  httpload: string;
  bodyFile: string;
}

/** A server under test: started, measured, stopped. */
interface Server {
  pid: number;
  socket: string;
  stop(): Promise<number>;
  stderr(): string;
}

/** What svcd-limit said of its group commits when it stopped (warm-up included). */
function groupCommits(log: string): Figures["groups"] {
  const m = /audit: (\d+) request lines in (\d+) groups, fdatasync (\d+) µs each/.exec(log);
  if (!m || Number(m[2]) === 0) return undefined;
  return { lines: Number(m[1]) / Number(m[2]), syncUs: Number(m[3]) };
}

/** Half a second of load, then `seconds` measured: the server's CPU, its threads', the cores'. */
async function measure(server: Server, load: SignLoad): Promise<Figures> {
  const signLoad = (secs: number) =>
    runSignLoad(load.httpload, {
      unix: server.socket,
      bodyFile: load.bodyFile,
      key: KEY,
      clients: CLIENTS,
      seconds: secs,
    });
  await signLoad(0.5);
  const cpuBefore = await cpuSeconds(`/proc/${server.pid}/stat`);
  const threadsBefore = await threadCpu(server.pid);
  const ticksBefore = await coreTicks();
  const r = await signLoad(seconds);
  const ticksAfter = await coreTicks();
  const cpu = await cpuSeconds(`/proc/${server.pid}/stat`) - cpuBefore;
  const threadsAfter = await threadCpu(server.pid);
  const n = Math.max(1, r.requests);
  return {
    perSecond: r.perSecond,
    p50ms: r.p50ms,
    p99ms: r.p99ms,
    errors: r.errors,
    cpuUs: cpu * 1e6 / n,
    threadUs: new Map(
      [...threadsAfter].map(([name, s]) => [name, (s - (threadsBefore.get(name) ?? 0)) * 1e6 / n]),
    ),
    busy: coresBusy(ticksBefore, ticksAfter),
    share: cpu / (r.seconds * ticksAfter.total.length),
  };
}

/** The four variants, in the order each round runs them. */
const VARIANTS = ["svcd audit on", "limit audit on", "svcd audit off", "limit audit off"] as const;
type Variant = typeof VARIANTS[number];

async function startVariant(
  variant: Variant,
  token: TestToken,
  policy: string,
  dir: string,
): Promise<Server> {
  const audit = variant.endsWith("on");
  if (variant.startsWith("limit")) {
    return await startLimit({
      token,
      policy,
      dir,
      audit,
      threads: Number(values.threads),
      workers: WORKERS,
    });
  }
  return await startDaemon({
    token,
    policy,
    entry: [SERVE, ...(audit ? [] : ["--without", "audit"])],
    args: ["--workers", String(WORKERS), "--threads", values["svcd-threads"]],
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const f0 = (x: number) => x.toFixed(0);
const f2 = (x: number) => x.toFixed(2);
const pct = (x: number) => `${(x * 100).toFixed(0)} %`;

async function loadAverage(): Promise<string> {
  return (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
}

/** One round's line for a variant. */
function roundLine(name: Variant, f: Figures): string {
  const threads = [...f.threadUs].filter(([, us]) => us >= 1).map(([t, us]) => `${t} ${f0(us)}`)
    .join(", ");
  return `${name}: ${f0(f.perSecond)}/s, ${f0(f.cpuUs)} µs CPU/req (${threads}), cores busy ` +
    `${f.busy.map(pct).join(" + ")}, its share ${pct(f.share)}` +
    (f.groups
      ? `, ${f2(f.groups.lines)} lines per group, fdatasync ${f0(f.groups.syncUs)} µs`
      : "") +
    (f.errors > 0 ? `, ${f.errors} errors` : "");
}

/** The medians of every variant, the per-thread medians and the ratios. */
function summary(all: Map<Variant, Figures[]>): string[] {
  const m = (v: Variant, pick: (f: Figures) => number) => median(all.get(v)!.map(pick));
  const lines = [
    `medians, c=${CLIENTS}, ${CLIENTS} identities:`,
    `  ${"".padEnd(16)} ${"req/s".padStart(6)} ${"CPU µs/req".padStart(10)} ` +
    `${"p50 ms".padStart(7)} ${"p99 ms".padStart(7)}  ${"cores busy".padEnd(13)} server's share`,
  ];
  for (const v of VARIANTS) {
    const cores = all.get(v)![0].busy.map((_, i) => pct(m(v, (f) => f.busy[i]))).join(" + ");
    lines.push(
      `  ${v.padEnd(16)} ${f0(m(v, (f) => f.perSecond)).padStart(6)} ` +
        `${f0(m(v, (f) => f.cpuUs)).padStart(10)} ${f2(m(v, (f) => f.p50ms)).padStart(7)} ` +
        `${f2(m(v, (f) => f.p99ms)).padStart(7)}  ${cores.padEnd(13)} ${pct(m(v, (f) => f.share))}`,
    );
  }
  const on = all.get("limit audit on")!.filter((f) => f.groups);
  if (on.length > 0) {
    lines.push(
      `  (svcd-limit audit on: ${f2(median(on.map((f) => f.groups!.lines)))} lines per group ` +
        `commit, fdatasync ${f0(median(on.map((f) => f.groups!.syncUs)))} µs of wall time each)`,
    );
  }
  lines.push("per thread, CPU µs per request (medians; threads under 1 µs left out):");
  for (const v of VARIANTS) {
    const names = new Set(all.get(v)!.flatMap((f) => [...f.threadUs.keys()]));
    const parts = [...names]
      .map((n) => [n, m(v, (f) => f.threadUs.get(n) ?? 0)] as const)
      .filter(([, us]) => us >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([n, us]) => `${n} ${f0(us)}`);
    lines.push(`  ${v.padEnd(16)} ${parts.join(", ")}`);
  }
  const rate = (v: Variant) => m(v, (f) => f.perSecond);
  const svcdOnOff = rate("svcd audit on") / rate("svcd audit off");
  const limitOnOff = rate("limit audit on") / rate("limit audit off");
  const ratios: [string, number, string][] = [
    ["svcd ÷ limit, audit on (req/s)", rate("svcd audit on") / rate("limit audit on"), "≥ 0.6"],
    ["svcd ÷ limit, audit off (req/s)", rate("svcd audit off") / rate("limit audit off"), "≥ 0.7"],
    [
      "svcd ÷ limit, CPU per /sign, audit on",
      m("svcd audit on", (f) => f.cpuUs) / m("limit audit on", (f) => f.cpuUs),
      "≤ 1.6",
    ],
    ["svcd audit on ÷ off", svcdOnOff, ""],
    ["limit audit on ÷ off", limitOnOff, ""],
    ["svcd's on ÷ off ÷ the limit's", svcdOnOff / limitOnOff, "≥ 0.9"],
  ];
  lines.push("ratios (issue targets beside them):");
  for (const [name, value, target] of ratios) {
    lines.push(`  ${name.padEnd(40)} ${f2(value).padStart(6)}  ${target}`);
  }
  return lines;
}

if (import.meta.main) {
  const dir = await Deno.makeTempDir({ prefix: "svcd-limit-bench-" });
  const token = await makeTestToken({ keys: { [KEY]: "ec-p256" } });
  const policy = Array.from({ length: CLIENTS }, (_, i) => `CN=bench${i},O=Bench\t${KEY}\n`)
    .join("");
  try {
    const bodyFile = `${dir}/message`;
    Deno.writeFileSync(bodyFile, crypto.getRandomValues(new Uint8Array(32)));
    const load = { httpload: await buildHttpload(dir), bodyFile };
    console.log(
      `limit — ${token.module.name}, ec-p256, c=${CLIENTS}, ${CLIENTS} identities, ${seconds} s ` +
        `per figure, ${rounds} round(s) interleaved, medians; ${navigator.hardwareConcurrency} ` +
        `cores; svcd --threads ${values["svcd-threads"]}, svcd-limit --threads ${values.threads}`,
    );
    console.log(`load average before: ${await loadAverage()}`);
    const all = new Map<Variant, Figures[]>(VARIANTS.map((v) => [v, []]));
    for (let round = 0; round < rounds; round++) {
      console.log(`  round ${round + 1}:`);
      for (const v of VARIANTS) {
        const server = await startVariant(v, token, policy, dir);
        let f: Figures;
        try {
          f = await measure(server, load);
        } finally {
          await server.stop();
        }
        f.groups = groupCommits(server.stderr());
        all.get(v)!.push(f);
        console.log(`    ${roundLine(v, f)}`);
      }
    }
    console.log("\n" + summary(all).join("\n"));
    console.log(`load average after: ${await loadAverage()}`);
  } finally {
    await token.cleanup();
    await Deno.remove(dir, { recursive: true });
  }
}
