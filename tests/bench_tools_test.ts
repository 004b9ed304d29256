/**
 * The memory and reload benches as a reader meets them: `--help` answers with every option the
 * script parses, exit 0, nothing started; a usage mistake is exit 2 with the reason on stderr. And
 * the reading of V8's `--trace-gc` lines they report with (bench/_gc_trace.ts).
 */
import assert from "node:assert/strict";
import { runDeno } from "./support/command.ts";
import { gcTraceReport, summariseGcTrace } from "../bench/_gc_trace.ts";

const BENCHES: Record<string, string[]> = {
  "bench/soak.ts": [
    "minutes",
    "report-seconds",
    "load-fraction",
    "rate",
    "capacity-seconds",
    "max-in-flight",
    "threads",
    "hup-seconds",
    "gc-trace",
    "help",
  ],
  "bench/reload-storm.ts": ["threads", "requests", "hup-ms", "clients", "gc-trace", "help"],
};
const REPO = new URL("../", import.meta.url).pathname;

for (const [script, options] of Object.entries(BENCHES)) {
  Deno.test(`${script} --help lists its options and starts nothing`, async () => {
    const run = await runDeno([`${REPO}${script}`, "--help"]);
    assert.equal(run.code, 0, run.text);
    assert.equal(run.stderr, "");
    const listed = [...run.stdout.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1]);
    assert.deepEqual(listed.sort(), [...options].sort());
    for (const line of run.stdout.split("\n")) assert.ok(line.length <= 100, line);
  });

  Deno.test(`${script}: a bad --threads or an unknown option is a usage error (exit 2)`, async () => {
    for (const args of [["--threads=-1"], ["--threads", "two"], ["--no-such-option"]]) {
      const run = await runDeno([`${REPO}${script}`, ...args]);
      assert.equal(run.code, 2, `${args}: ${run.text}`);
      assert.match(run.stderr, /--(threads|no-such-option)/, `${args}`);
      assert.equal(run.stdout, "", `${args}: nothing started`);
    }
  });
}

const TRACE = [
  "[7:0x55d8f0bd2000]      270 ms: Scavenge 4.1 (4.8) -> 4.0 (5.8) MB, pooled: 0.0 MB, 1.68 / 0.00 ms",
  "[7:0x7f743c060000]       37 ms: Scavenge 4.4 (5.2) -> 4.0 (6.0) MB, pooled: 0.0 MB, 0.99 / 0.00 ms",
  "[7:0x55d8f0bd2000]    83521 ms: Mark-Compact 14.1 (41.4) -> 8.7 (40.6) MB, pooled: 0 MB, 9.0 / 0.0 ms",
  "[7:0x55d8f0bd2000]   105449 ms: Incremental Mark-Compact 34.7 (65.6) -> 8.9 (65.1) MB, pooled: 0 MB",
  "some other line the runtime printed",
  // The short-lived isolate at 0x7f743c060000 ended; a new one took its address (clock from 0).
  "[7:0x7f743c060000]       12 ms: Scavenge 4.0 (5.0) -> 3.9 (5.5) MB, pooled: 0.0 MB, 0.5 / 0.00 ms",
  "[7:0x7f743c060000]    20000 ms: Mark-Compact 9.0 (30.0) -> 7.0 (28.0) MB, pooled: 0 MB, 1 / 0 ms",
].join("\n");

Deno.test("bench/_gc_trace.ts: collections per isolate, an address taken again is a new isolate", () => {
  const isolates = summariseGcTrace(TRACE);
  assert.equal(isolates.length, 3);
  const main = isolates.find((i) => i.isolate === "0x55d8f0bd2000")!;
  assert.equal(main.scavenges, 1);
  assert.equal(main.markCompacts, 2);
  assert.deepEqual(main.liveAfterMarkCompactMb, [8.7, 8.9]);
  assert.equal(main.committedMaxMb, 65.1);
  assert.equal(main.committedLastMb, 65.1);
  const reused = isolates.filter((i) => i.isolate === "0x7f743c060000");
  assert.deepEqual(reused.map((i) => [i.scavenges, i.markCompacts, i.lastMs]), [
    [1, 0, 37],
    [1, 1, 20000],
  ]);
  const report = gcTraceReport(TRACE);
  assert.match(report[0], /\(1 short-lived isolates left out\)/);
  assert.equal(report.length, 3, report.join("\n"));
  assert.match(report[1], /0x55d8f0bd2000: 1 scavenges, 2 mark-compacts, committed max 65\.1 MB/);
  assert.match(report[1], /8\.7 MB \(first\) … 8\.9 MB \(last\)/);
});
