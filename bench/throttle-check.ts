/**
 * Cost of the refusal budget on the request path: ns per check() for an identity that is not
 * limited (never refused, and refused but under the threshold), for a limited one, and µs per
 * recordRefusal() (write-through to sqlite). The table holds `--entries` identities (default 10 000).
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/throttle-check.ts [--entries 10000] [--rounds 5]
 * ```
 */
import { benchArgs, count, valueOption } from "./_args.ts";
import { RefusalBudget } from "../lib/throttle/mod.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Cost of the refusal budget on the request path: ns per check() for an identity " +
    "that is not limited (never refused, refused under the threshold) and for a limited one, " +
    "and µs per recordRefusal() (write-through to sqlite); best of the rounds.",
  options: {
    entries: {
      type: "string",
      default: "10000",
      check: count,
      help: "identities in the table",
    },
    rounds: valueOption(count, "5", "rounds"),
  },
  examples: ["node_modules/.bin/deno run -A bench/throttle-check.ts --entries 10000 --rounds 5"],
});
const entries = Number(values.entries);
const rounds = Number(values.rounds);
const CHECKS = 2_000_000;

/** Best of `rounds` timings of `n` calls, in ns per call (best: the machine is shared). */
function nsPerCall(n: number, fn: (i: number) => unknown): number {
  let best = Infinity;
  let sink = 0;
  for (let r = 0; r < rounds; r++) {
    const t = performance.now();
    for (let i = 0; i < n; i++) if (fn(i)) sink++;
    best = Math.min(best, (performance.now() - t) * 1e6 / n);
  }
  if (sink < 0) console.log(sink);
  return best;
}

const dir = await Deno.makeTempDir({ prefix: "svcd-bench-throttle-" });
const budget = RefusalBudget.open({ stateDir: dir, threshold: 10, maxEntries: entries + 1000 });
try {
  for (let i = 0; i < entries; i++) budget.recordRefusal(`CN=client-${i},O=Example,C=DE`);
  for (let i = 0; i < 10; i++) budget.recordRefusal("CN=limited,O=Example,C=DE");

  const stranger = "CN=never-refused,O=Example,C=DE";
  const underThreshold = "CN=client-42,O=Example,C=DE";
  const limited = "CN=limited,O=Example,C=DE";
  const subjects = Array.from({ length: 1024 }, (_, i) => `CN=served-${i},O=Example,C=DE`);

  const baseline = nsPerCall(CHECKS, (i) => subjects[i & 1023].length === 0);
  const rows = [
    ["check(), identity never refused", nsPerCall(CHECKS, () => budget.check(stranger).limited)],
    [
      "check(), 1024 rotating served identities",
      nsPerCall(CHECKS, (i) => budget.check(subjects[i & 1023]).limited),
    ],
    [
      "check(), refused but under threshold",
      nsPerCall(CHECKS, () => budget.check(underThreshold).limited),
    ],
    [
      "check(), limited identity (reads the clock)",
      nsPerCall(CHECKS, () => budget.check(limited).limited),
    ],
  ] as const;
  console.log(`refusal budget, ${budget.size} identities in the table, best of ${rounds} rounds`);
  console.log(
    `  ${"empty loop (array index + length)".padEnd(46)} ${baseline.toFixed(1).padStart(8)} ns`,
  );
  for (const [name, ns] of rows) {
    console.log(`  ${name.padEnd(46)} ${ns.toFixed(1).padStart(8)} ns`);
  }

  const writes = 20_000;
  const t = performance.now();
  for (let i = 0; i < writes; i++) budget.recordRefusal(`CN=new-${i},O=Example,C=DE`);
  const us = (performance.now() - t) * 1000 / writes;
  console.log(
    `  ${"recordRefusal(), new identity, at the cap".padEnd(46)} ${us.toFixed(1).padStart(8)} µs`,
  );
} finally {
  budget.close();
  await Deno.remove(dir, { recursive: true });
}
