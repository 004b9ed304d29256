/**
 * Before/after on a shared machine: daemons from several checkouts of this repository (e.g. git
 * worktrees at two commits, each with node_modules) on the same token, /sign loaded by
 * bench/httpload.c (C, one epoll thread: the load bench/limit.ts gives) at c=16 with 16 identities
 * (`--concurrency`), audit on and off, in interleaved rounds; prints each round and the medians of
 * req/s, the daemon's CPU µs per request (all threads and main thread, from /proc), p50 and p99.
 * Interleaving and medians are what make µs comparable when other work moves the machine's speed.
 *
 * @example
 * ```sh
 * git worktree add --detach /tmp/before <commit> && ln -s "$PWD/node_modules" /tmp/before/
 * node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. --rounds 3 --seconds 4
 * node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. --serve-args=--threads,2
 * # options only one checkout knows: `{tmp}` is a fresh folder for each daemon
 * node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. \
 *   --tree-args='after=--metrics-socket,{tmp}/metrics.sock'
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption } from "./_args.ts";
import { checkouts } from "./_checkouts.ts";
import { buildHttpload, runSignLoad } from "./_httpload.ts";
import { daemonCpu } from "./_proc_cpu.ts";
import { makeTestToken } from "../tests/support/token.ts";

const { values, positionals, exitWithUsage } = benchArgs({
  url: import.meta.url,
  measures: "Before/after on a shared machine: the daemons of several checkouts of this " +
    "repository on one token, /sign from bench/httpload.c at c=16 with 16 identities, audit on " +
    "and off, in interleaved rounds; prints each round and the medians of req/s, the daemon's " +
    "CPU µs per request (all threads and main thread), p50 and p99.",
  positionals: {
    value: "NAME=DIR…",
    help: "the checkouts to compare, each named (e.g. before=/tmp/before after=.), each with " +
      "node_modules",
  },
  options: {
    rounds: valueOption(count, "3", "rounds, interleaved"),
    seconds: valueOption(positiveNumber, "4", "seconds per figure"),
    concurrency: valueOption(count, "16", "connections at a time, one identity each"),
    "serve-args": {
      type: "string",
      default: "",
      value: "A,B,…",
      help: "more options for every daemon, comma separated, e.g. --serve-args=--threads,2",
    },
    "tree-args": {
      type: "string",
      multiple: true,
      default: [],
      value: "NAME=A,B,…",
      help: "more options for the daemon of one checkout (repeatable), e.g. an option the " +
        "other checkout does not know; {tmp} in them is a fresh folder for each daemon",
    },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. --concurrency 1",
    "node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. --rounds 3 --seconds 4",
    "node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. " +
    "--serve-args=--threads,2",
    "node_modules/.bin/deno run -A bench/ab.ts before=/tmp/before after=. " +
    "--tree-args='after=--metrics-socket,{tmp}/metrics.sock'",
  ],
});
if (positionals.length === 0) exitWithUsage("name at least one checkout, NAME=DIR");
const trees = checkouts(positionals, exitWithUsage);
const rounds = Number(values.rounds);
const seconds = Number(values.seconds);
const clients = Number(values.concurrency);
const serveArgs = values["serve-args"].split(",").filter(Boolean);
const treeArgs = new Map(values["tree-args"].map((t) => {
  const at = t.indexOf("=");
  if (at < 1 || !trees.some((tree) => tree.name === t.slice(0, at))) {
    exitWithUsage(`--tree-args '${t}': NAME=a,b,… with NAME one of the checkouts`);
  }
  return [t.slice(0, at), t.slice(at + 1).split(",").filter(Boolean)];
}));

/** One daemon of `dir` under load: req/s, CPU µs per request (all threads, main thread). */
async function measure(
  { name, dir }: { name: string; dir: string },
  token: Awaited<ReturnType<typeof makeTestToken>>,
  policy: string,
  without: string[],
  load: { httpload: string; bodyFile: string },
) {
  // Each checkout starts its daemon with its own test support: its options are its own.
  const { startDaemon } = await import(`${dir}/tests/support/daemon.ts`);
  const tmp = await Deno.makeTempDir({ prefix: "svcd-ab-" });
  const own = (treeArgs.get(name) ?? []).map((a) => a.replaceAll("{tmp}", tmp));
  const d = await startDaemon({
    token,
    policy,
    entry: [`${dir}/bench/serve.ts`, ...without],
    args: ["--workers", "16", ...serveArgs, ...own],
  }).catch(async (err: unknown) => {
    await Deno.remove(tmp, { recursive: true });
    throw err;
  });
  try {
    const signLoad = (secs: number) =>
      runSignLoad(load.httpload, {
        unix: d.socket,
        bodyFile: load.bodyFile,
        key: KEY,
        clients,
        seconds: secs,
      });
    await signLoad(0.5);
    const before = await daemonCpu(d.pid);
    const r = await signLoad(seconds);
    const after = await daemonCpu(d.pid);
    const n = Math.max(1, r.requests);
    return [
      r.perSecond,
      (after.all - before.all) * 1e6 / n,
      (after.main - before.main) * 1e6 / n,
      r.p50ms,
      r.p99ms,
    ];
  } finally {
    await d.stop();
    await Deno.remove(tmp, { recursive: true });
  }
}

const KEY = "k-ec";

/** req/s, CPU µs per request (all threads, main thread), p50 and p99 in ms. */
function figureLine([rate, cpu, main, p50, p99]: number[]): string {
  return `${rate.toFixed(0)} req/s  ${cpu.toFixed(0)} µs CPU/req  ${main.toFixed(0)} main µs  ` +
    `p50 ${p50.toFixed(2)} ms  p99 ${p99.toFixed(2)} ms`;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

if (import.meta.main) {
  const token = await makeTestToken({ keys: { [KEY]: "ec-p256" } });
  const policy = Array.from({ length: clients }, (_, i) => `CN=bench${i},O=Bench\t${KEY}\n`)
    .join("");
  const rows = new Map<string, number[][]>();
  const dir = await Deno.makeTempDir({ prefix: "svcd-ab-load-" });
  try {
    const bodyFile = `${dir}/message`;
    Deno.writeFileSync(bodyFile, crypto.getRandomValues(new Uint8Array(32)));
    const load = { httpload: await buildHttpload(dir), bodyFile };
    for (let round = 1; round <= rounds; round++) {
      for (const tree of trees) {
        for (const without of [[], ["--without", "audit"]]) {
          const row = `${tree.name} ${without.length > 0 ? "audit off" : "audit on"}`;
          const figures = await measure(tree, token, policy, without, load);
          rows.set(row, [...rows.get(row) ?? [], figures]);
          console.log(`round ${round}  ${row.padEnd(24)} ${figureLine(figures)}`);
        }
      }
    }
  } finally {
    await token.cleanup();
    await Deno.remove(dir, { recursive: true });
  }
  console.log("\nmedians:");
  for (const [row, figures] of rows) {
    console.log(
      `  ${row.padEnd(24)} ${
        figureLine(figures[0].map((_, i) => median(figures.map((f) => f[i]))))
      }`,
    );
  }
}
