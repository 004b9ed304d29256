/**
 * `make fuzz N=… SEED=…`: the HTTP fuzz campaign against a fresh daemon, OCSP requests on its
 * public socket, then the parsers (policy,
 * index.txt, DER, OCSP request). Prints progress every few thousand cases and a summary; findings are written
 * to a folder as `.http` files ready to become regression inputs (tests/fuzz/regressions/).
 * Exit 1 when anything was found. Ctrl-C stops early and still prints the summary.
 *
 *   deno run -A tests/fuzz/main.ts --cases 100000 --seed 1 [--from 0] [--concurrency 8]
 *                                  [--parser-cases 20000] [--public-cases 5000] [--findings DIR]
 *                                  [--minutes M]
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A tests/fuzz/main.ts --cases 1 --from 4711 --seed 3   # one case again
 * ```
 */
import { parseArgs } from "node:util";
import { runCampaign, startFuzzTarget } from "./http_fuzz.ts";
import { fuzzParsers } from "./parsers.ts";
import { runPublicCampaign } from "./public_fuzz.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    cases: { type: "string", default: "10000" },
    seed: { type: "string", default: "1" },
    from: { type: "string", default: "0" },
    concurrency: { type: "string", default: "8" },
    "parser-cases": { type: "string" },
    "public-cases": { type: "string" },
    findings: { type: "string", default: "build/fuzz-findings" },
    minutes: { type: "string" },
  },
});
const cases = Number(values.cases);
const seed = Number(values.seed);
const parserCases = Number(values["parser-cases"] ?? Math.min(cases, 50_000));
if (!Number.isSafeInteger(cases) || !Number.isSafeInteger(seed) || cases < 0) {
  console.error("fuzz: --cases and --seed must be whole numbers, e.g. --cases 100000 --seed 1");
  Deno.exit(2);
}

// Ctrl-C ends the campaign early with its summary (the cases that ran are reported).
// --minutes ends it at a time limit the same way, whichever comes first of that and --cases.
let interrupted = false;
Deno.addSignalListener("SIGINT", () => interrupted = true);
const stopAt = values.minutes ? Date.now() + Number(values.minutes) * 60_000 : Infinity;

const target = await startFuzzTarget({ publicListener: true });
console.log(`fuzz: daemon pid ${target.daemon.pid}, seed ${seed}, ${cases} HTTP cases`);
const report = await runCampaign(target, {
  seed,
  cases,
  from: Number(values.from),
  concurrency: Number(values.concurrency),
  progressEvery: 5000,
  interrupted: () => interrupted || Date.now() > stopAt,
  onProgress: (r) =>
    console.log(
      `fuzz: ${r.cases} cases in ${r.seconds.toFixed(0)} s (${
        (r.cases / r.seconds).toFixed(0)
      }/s), ` +
        `${r.findings.length} findings, RSS ${r.rss.lastKb} KiB (max ${r.rss.maxKb}), fds ${r.fds.last} (max ${r.fds.max})`,
    ),
});
const publicCases = Number(values["public-cases"] ?? Math.min(Math.ceil(cases / 10), 50_000));
const pub = await runPublicCampaign(target, {
  seed,
  cases: publicCases,
  interrupted: () => interrupted,
});
const code = await target.stop();
const parsers = fuzzParsers({ seed, cases: parserCases });

console.log(
  `\nHTTP: ${report.cases} cases, seed ${seed}, ${report.seconds.toFixed(1)} s, ` +
    `${(report.cases / report.seconds).toFixed(0)} cases/s; slowest answer ${
      report.maxMs.toFixed(0)
    } ms`,
);
console.log(
  `RSS ${report.rss.firstKb} → max ${report.rss.maxKb} → ${report.rss.lastKb} KiB; ` +
    `fds ${report.fds.first} → max ${report.fds.max} → ${report.fds.last}; daemon exit ${code}`,
);
for (const [outcome, n] of Object.entries(report.outcomes).sort((a, b) => b[1] - a[1])) {
  console.log(`  ${String(n).padStart(8)}  ${outcome}`);
}
console.log(`public socket (OCSP): ${pub.cases} cases in ${pub.seconds.toFixed(1)} s`);
for (const [outcome, n] of Object.entries(pub.outcomes).sort((a, b) => b[1] - a[1])) {
  console.log(`  ${String(n).padStart(8)}  ${outcome}`);
}
for (const p of parsers) console.log(`parser ${p.name}: ${p.cases} inputs, ${p.summary}`);
const findings = [
  ...report.findings,
  ...pub.findings.map((f) => ({ ...f, index: `public${f.index}` })),
  ...parsers.flatMap((p) => p.findings),
];
if (findings.length > 0) {
  await Deno.mkdir(values.findings, { recursive: true });
  for (const [i, f] of findings.entries()) {
    const name = `${values.findings}/seed${seed}-case${"index" in f ? f.index : i}`;
    await Deno.writeFile(`${name}.http`, f.bytes);
    await Deno.writeTextFile(`${name}.txt`, `${f.finding}\nsteps: ${(f.steps ?? []).join(", ")}\n`);
    console.log(`FINDING ${name}: ${f.finding.split("\n")[0]} [${(f.steps ?? []).join(", ")}]`);
  }
}
console.log(`fuzz: ${findings.length} findings`);
Deno.exit(findings.length > 0 || code !== 0 ? 1 : 0);
