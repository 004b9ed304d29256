/**
 * The reload storm at length (tests/daemon_reload_storm_test.ts runs it short, in CI): clients
 * sign with one granted key (ec-p256, `k1`) without pause while the daemon gets a SIGHUP every
 * `--hup-ms`, until `--requests` answers arrived. Prints the answers by status (every one must be
 * 200), the first answers that were not, how many signatures were checked with Web Crypto and the
 * daemon's RSS once a minute; with `--gc-trace`, V8's collections per isolate (bench/_gc_trace.ts).
 * Exit 0 when every answer was 200 and every checked signature verified.
 *
 * @example
 * ```sh
 * nice -n 10 deno run -A bench/reload-storm.ts --threads 4 --requests 100000
 * ```
 */
import { benchArgs, count, positiveNumber, valueOption, wholeNumber } from "./_args.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { notOk, reloadStorm, type StormResult } from "../tests/support/reload_storm.ts";
import { gcTraceReport } from "./_gc_trace.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "/sign under a SIGHUP every few ms until --requests answers arrived: the answers by " +
    "status (every one must be 200), the signatures checked with Web Crypto, the daemon's RSS " +
    "once a minute. Exit 0 when every answer was 200 and every checked signature verified.",
  options: {
    threads: valueOption(wholeNumber, "0", "the daemon's --threads"),
    requests: valueOption(count, "100000", "answers to wait for"),
    "hup-ms": {
      type: "string",
      default: "50",
      check: positiveNumber,
      value: "MS",
      help: "pause between two SIGHUPs",
    },
    clients: valueOption(count, "8", "clients signing at once"),
    "gc-trace": {
      type: "boolean",
      default: false,
      help: "V8 traces the daemon's collections; summed up per isolate at the end",
    },
  },
  examples: ["nice -n 10 deno run -A bench/reload-storm.ts --threads 4 --requests 100000"],
});
const THREADS = Number(values.threads);
const REQUESTS = Number(values.requests);
const HUP_MS = Number(values["hup-ms"]);
const CLIENTS = Number(values.clients);

const SUBJECTS = Array.from({ length: 8 }, (_, i) => `CN=storm${i},O=Example,C=DE`);
const token = await makeTestToken({ keys: { k1: "ec-p256" } });
const workDir = await Deno.makeTempDir({ prefix: "svcd-reload-storm-" });
const gcTraceFile = values["gc-trace"] ? `${workDir}/gc-trace.txt` : undefined;
const daemon = await startDaemon({
  token,
  workDir,
  policy: SUBJECTS.map((s) => `${s}\tk1\n`).join(""),
  args: ["--threads", String(THREADS)],
  gcTraceFile,
});

const rssMib = () =>
  Number(/VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${daemon.pid}/status`))?.[1]) / 1024;
const start = performance.now();
const rss: string[] = [`0 min ${rssMib().toFixed(0)}`];
const perMinute = setInterval(() => {
  rss.push(`${((performance.now() - start) / 60_000).toFixed(0)} min ${rssMib().toFixed(0)}`);
}, 60_000);
console.log(
  `reload-storm: --threads ${THREADS}, ${CLIENTS} clients, a SIGHUP every ${HUP_MS} ms, ` +
    `until ${REQUESTS} answers`,
);
let storm: StormResult;
try {
  storm = await reloadStorm(daemon, {
    subjects: SUBJECTS,
    key: "k1",
    clients: CLIENTS,
    hupEveryMs: HUP_MS,
    requests: REQUESTS,
    progressEvery: 20_000,
    onProgress: (r) => console.log(`  … ${JSON.stringify(r.statuses)}, ${r.hups} SIGHUPs`),
  });
} finally {
  clearInterval(perMinute);
}
const seconds = (performance.now() - start) / 1000;
rss.push(`end ${rssMib().toFixed(0)}`);
const code = await daemon.stop();
console.log(
  `reload-storm: --threads ${THREADS}: ${JSON.stringify(storm.statuses)} in ${
    seconds.toFixed(0)
  } s, ${storm.hups} SIGHUPs, no answer ${storm.transportErrors}, answers other than 200 ${
    notOk(storm)
  }; signatures checked ${storm.checked} (${storm.badSignatures} bad); daemon exit ${code}`,
);
for (const failure of storm.failures) console.log(`  not 200: ${failure.trim()}`);
for (const line of daemon.stderr().split("\n").filter((l) => / failed: /.test(l)).slice(0, 5)) {
  console.log(`  log: ${line}`);
}
console.log(`reload-storm: RSS (MiB) per minute: ${rss.join(", ")}`);
if (gcTraceFile) {
  for (const line of gcTraceReport(await Deno.readTextFile(gcTraceFile))) {
    console.log(`reload-storm: ${line}`);
  }
}
await Deno.remove(workDir, { recursive: true }).catch(() => {});
await token.cleanup();
Deno.exit(notOk(storm) === 0 && storm.badSignatures === 0 && code === 0 ? 0 : 1);
