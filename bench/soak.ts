/**
 * Soak: a mixed load against a fresh daemon for a chosen time at a fraction (default 80 %) of the
 * /sign capacity measured first, or at a fixed rate — signatures, verifications (valid and
 * tampered), refused identities (403, then 429 from the refusal budget), /health, silent
 * connections (released at the 1 s deadline), OCSP requests with a nonce on the public socket, and
 * a SIGHUP (policy reload) every 30 s. Every report interval it prints the daemon's RSS and open
 * fds, p50/p99 of /sign and /verify and the answers by kind; at the end it prints the RSS series
 * and how flat it was over the last half of the run, stops the daemon, counts the signatures a
 * client received that have no audit line (must be 0) and runs `svcd audit verify`. With
 * `--gc-trace` it also sums up V8's garbage collections per isolate (bench/_gc_trace.ts): whether
 * the heap in use grows (a leak) or only the heap V8 keeps. Open loop (a late daemon does not slow
 * the offered load), bounded in flight, stops by itself; UNIX socket only.
 *
 * @example
 * ```sh
 * deno run -A bench/soak.ts --minutes 30                 # the README's soak
 * deno run -A bench/soak.ts --minutes 2 --report-seconds 30
 * nice -n 10 deno run -A bench/soak.ts --minutes 12 --threads 4 --rate 400 --gc-trace
 * ```
 */
import { createHash } from "node:crypto";
import { benchArgs, count, positiveNumber, valueOption, wholeNumber } from "./_args.ts";
import { runLoad } from "./load.ts";
import { auditLines, runAuditVerify } from "../tests/support/audit.ts";
import { startDaemon, type TestDaemon } from "../tests/support/daemon.ts";
import { type ClientResponse, request } from "../tests/support/http_client.ts";
import { verifyIndependently } from "../tests/support/oracle.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { publicListenerSetup } from "../tests/support/ca.ts";
import { certIdFor, encodeOcspRequest, parseOcspResponse } from "../lib/ocsp/mod.ts";
import { gcTraceReport } from "./_gc_trace.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "A mixed load against a fresh daemon (signatures, verifications, refused identities, " +
    "/health, silent connections, OCSP with a nonce, a SIGHUP every --hup-seconds): RSS, fds, " +
    "latencies and answers per interval; the RSS series and its flatness over the last half. " +
    "Exit 0 when no signature was lost, every checked signature verified, the daemon stopped " +
    "with 0 and `svcd audit verify` passed.",
  options: {
    minutes: {
      type: "string",
      default: "30",
      check: positiveNumber,
      value: "M",
      help: "how long the load runs",
    },
    "report-seconds": {
      type: "string",
      default: "60",
      check: positiveNumber,
      help: "one report (RSS, fds, latencies, answers) every S seconds",
    },
    "load-fraction": {
      type: "string",
      default: "0.8",
      check: positiveNumber,
      value: "F",
      help: "offered rate: F × the /sign capacity measured first",
    },
    rate: {
      type: "string",
      check: positiveNumber,
      value: "R",
      help: "offered rate in requests/s instead (no capacity measured)",
    },
    "capacity-seconds": {
      type: "string",
      default: "5",
      check: positiveNumber,
      help: "length of the capacity measurement",
    },
    "max-in-flight": {
      type: "string",
      default: "256",
      check: count,
      help: "most requests in flight; past it the offered load is not met",
    },
    threads: valueOption(wholeNumber, "0", "the daemon's --threads"),
    "hup-seconds": {
      type: "string",
      default: "30",
      check: positiveNumber,
      help: "one SIGHUP every S seconds",
    },
    "gc-trace": {
      type: "boolean",
      default: false,
      help: "V8 traces the daemon's collections; summed up per isolate at the end",
    },
  },
  examples: [
    "deno run -A bench/soak.ts --minutes 30",
    "deno run -A bench/soak.ts --minutes 2 --report-seconds 30",
    "nice -n 10 deno run -A bench/soak.ts --minutes 12 --threads 4 --rate 400 --gc-trace",
  ],
});
const MINUTES = Number(values.minutes);
const REPORT_MS = Number(values["report-seconds"]) * 1000;
const MAX_IN_FLIGHT = Number(values["max-in-flight"]);
const HUP_EVERY_MS = Number(values["hup-seconds"]) * 1000;
const THREADS = Number(values.threads);
/** Silent connections: the daemon must close them after 1 s; later than this is an error. */
const SILENT_DEADLINE_MS = 3_000;

type Kind = "sign" | "verify" | "refused" | "health" | "silent" | "ocsp";
const MIX: Array<[Kind, number]> = [
  ["sign", 0.55],
  ["ocsp", 0.05],
  ["verify", 0.2],
  ["refused", 0.1],
  ["health", 0.05],
  ["silent", 0.05],
];
const SIGNERS = Array.from({ length: 8 }, (_, i) => `CN=soak${i},O=Example,C=DE`);
const INTRUDERS = Array.from({ length: 4 }, (_, i) => `CN=intruder${i},O=Elsewhere`);
const BENCH = Array.from({ length: 16 }, (_, i) => `CN=bench${i},O=Bench`);
const POLICY = [...SIGNERS, ...BENCH].map((s) => `${s}\tk-ec\n`).join("");

/** One interval's figures. */
class Interval {
  latencies: Record<"sign" | "verify" | "ocsp", number[]> = { sign: [], verify: [], ocsp: [] };
  answers: Record<string, number> = {};
  errors: string[] = [];
  count(kind: Kind, what: string | number): void {
    const key = `${kind} ${what}`;
    this.answers[key] = (this.answers[key] ?? 0) + 1;
  }
}

function pct(sorted: number[], p: number): string {
  if (sorted.length === 0) return "-";
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))].toFixed(1);
}

function usage(pid: number): { rssKb: number; fds: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  let fds = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) fds++;
  return { rssKb: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]), fds };
}

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const pick = <T>(items: T[]) => items[Math.floor(Math.random() * items.length)];

function chooseKind(): Kind {
  let r = Math.random();
  for (const [kind, share] of MIX) if ((r -= share) < 0) return kind;
  return "sign";
}

const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
const workDir = await Deno.makeTempDir({ prefix: "svcd-soak-" });
const pub = await publicListenerSetup(token, workDir);
const gcTraceFile = values["gc-trace"] ? `${workDir}/gc-trace.txt` : undefined;
const daemon: TestDaemon = await startDaemon({
  token,
  policy: POLICY,
  workDir,
  args: [...pub.args, "--threads", String(THREADS)],
  gcTraceFile,
});
const ocspCertId = certIdFor(pub.issuer, pub.issuedSerial);
const served = new Set<string>();
let interval = new Interval();
let signaturesChecked = 0;
let signaturesBad = 0;

const listing = await request(daemon.socket, {
  method: "GET",
  path: "/token",
  headers: [["X-SVC-Client-Subject", SIGNERS[0]]],
});
const k = (listing.json() as { keys: { public_key: string; public_key_raw: string }[] }).keys[0];
const publicKey = {
  raw: Uint8Array.fromBase64(k.public_key_raw),
  spki: Uint8Array.fromBase64(k.public_key),
};

async function signOnce(subject: string, message: Uint8Array): Promise<ClientResponse> {
  return await request(daemon.socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k-ec"]],
    body: message,
  });
}

// Signatures to verify: made now, so /verify never depends on the load's own answers.
const known: Array<{ message: Uint8Array; signature: Uint8Array }> = [];
for (let i = 0; i < 8; i++) {
  const message = new TextEncoder().encode(`soak verify ${i}`);
  const res = await signOnce(SIGNERS[0], message);
  if (res.status !== 200) throw new Error(`set-up /sign: ${res.status}`);
  served.add(sha256(res.body));
  known.push({ message, signature: res.body });
}

if (!values.rate) {
  console.log("soak: measuring /sign capacity (closed loop, c=16) …");
  await runLoad({ socket: daemon.socket, key: "k-ec", concurrency: 16, seconds: 1 }); // warm-up
}
const capacity = values.rate ? undefined : await runLoad({
  socket: daemon.socket,
  key: "k-ec",
  concurrency: 16,
  seconds: Number(values["capacity-seconds"]),
});
const rate = capacity ? capacity.perSecond * Number(values["load-fraction"]) : Number(values.rate);
console.log(
  `soak: ${
    capacity
      ? `capacity ${capacity.perSecond.toFixed(0)} /sign/s (p50 ${
        capacity.p50ms.toFixed(1)
      } ms, p99 ${capacity.p99ms.toFixed(1)} ms); `
      : ""
  }offering ${rate.toFixed(0)} requests/s of the mix for ${MINUTES} min to --threads ${THREADS}; ` +
    `mix ${MIX.map(([k, s]) => `${k} ${Math.round(s * 100)}%`).join(", ")}; SIGHUP every ${
      HUP_EVERY_MS / 1000
    } s`,
);

async function oneRequest(kind: Kind): Promise<void> {
  const t0 = performance.now();
  try {
    switch (kind) {
      case "sign": {
        const message = crypto.getRandomValues(
          new Uint8Array(32 + Math.floor(Math.random() * 224)),
        );
        const res = await signOnce(pick(SIGNERS), message);
        interval.latencies.sign.push(performance.now() - t0);
        interval.count(kind, res.status);
        if (res.status !== 200) {
          if (res.status !== 429) interval.errors.push(`sign ${res.status}`);
          return;
        }
        served.add(sha256(res.body));
        if (Math.random() < 0.02) {
          signaturesChecked++;
          if (!await verifyIndependently("ec-p256", publicKey, message, res.body)) signaturesBad++;
        }
        return;
      }
      case "verify": {
        const { message, signature } = pick(known);
        const tampered = Math.random() < 0.25;
        const sig = signature.slice();
        if (tampered) sig[sig.length - 1] ^= 1;
        const res = await request(daemon.socket, {
          method: "POST",
          path: "/verify",
          headers: [
            ["X-SVC-Client-Subject", pick(SIGNERS)],
            ["X-SVC-Key", "k-ec"],
            ["X-SVC-Signature-Length", String(sig.length)],
          ],
          body: new Uint8Array([...sig, ...message]),
        });
        interval.latencies.verify.push(performance.now() - t0);
        interval.count(kind, res.status);
        const want = tampered ? 422 : 200;
        if (res.status !== want && res.status !== 429) interval.errors.push(`verify ${res.status}`);
        return;
      }
      case "refused": {
        const res = await signOnce(pick(INTRUDERS), new TextEncoder().encode("not mine"));
        interval.count(kind, res.status);
        if (res.status !== 403 && res.status !== 429) interval.errors.push(`refused ${res.status}`);
        return;
      }
      case "health": {
        const res = await request(daemon.socket, {
          method: "GET",
          path: "/health",
          headers: [["X-SVC-Client-Subject", SIGNERS[0]]],
        });
        interval.count(kind, res.status);
        if (res.status !== 200) interval.errors.push(`health ${res.status}`);
        return;
      }
      case "ocsp": {
        const res = await request(pub.socket, {
          method: "POST",
          path: "/ocsp",
          headers: [["Content-Type", "application/ocsp-request"]],
          body: encodeOcspRequest({
            certIds: [ocspCertId],
            nonce: crypto.getRandomValues(new Uint8Array(16)),
          }),
        });
        interval.latencies.ocsp.push(performance.now() - t0);
        const status = res.status === 200 ? parseOcspResponse(res.body).status : res.status;
        interval.count(kind, status);
        if (status !== "successful") interval.errors.push(`ocsp ${status}`);
        return;
      }
      case "silent": {
        const conn = await Deno.connect({ transport: "unix", path: daemon.socket });
        try {
          const guard = setTimeout(() => conn.close(), SILENT_DEADLINE_MS);
          const n = await conn.read(new Uint8Array(1)).catch(() => null);
          clearTimeout(guard);
          const ms = performance.now() - t0;
          interval.count(kind, n === null && ms < SILENT_DEADLINE_MS ? "released" : "not released");
          if (n !== null || ms >= SILENT_DEADLINE_MS) {
            interval.errors.push(`silent after ${ms.toFixed(0)} ms`);
          }
        } finally {
          try {
            conn.close();
          } catch { /* closed by the guard */ }
        }
        return;
      }
    }
  } catch (err) {
    interval.count(kind, "error");
    interval.errors.push(`${kind}: ${(err as Error).message}`);
  }
}

function report(minute: number): void {
  const u = usage(daemon.pid);
  const i = interval;
  interval = new Interval();
  for (const l of Object.values(i.latencies)) l.sort((a, b) => a - b);
  const answers = Object.entries(i.answers).sort().map(([k, n]) => `${k}:${n}`).join(" ");
  const latency = (k: keyof Interval["latencies"]) =>
    `${k} p50/p99 ${pct(i.latencies[k], 0.5)}/${pct(i.latencies[k], 0.99)} ms (${
      i.latencies[k].length
    })`;
  const errors = i.errors.length ? ` [${[...new Set(i.errors)].slice(0, 5).join("; ")}]` : "";
  console.log(
    `[${minute.toFixed(1)} min] RSS ${(u.rssKb / 1024).toFixed(1)} MiB, fds ${u.fds}, ` +
      `${latency("sign")}, ${latency("verify")}, ${latency("ocsp")}, ` +
      `errors ${i.errors.length}${errors}\n    ${answers}`,
  );
  totals.errors += i.errors.length;
  totals.requests += Object.values(i.answers).reduce((a, b) => a + b, 0);
  totals.maxRssKb = Math.max(totals.maxRssKb, u.rssKb);
  rssSeries.push({ minute, mib: u.rssKb / 1024 });
  totals.maxFds = Math.max(totals.maxFds, u.fds);
}

const totals = { requests: 0, errors: 0, skipped: 0, hups: 0, maxRssKb: 0, maxFds: 0 };
/** RSS at each report. */
const rssSeries: Array<{ minute: number; mib: number }> = [];
const before = usage(daemon.pid);
console.log(
  `soak: daemon pid ${daemon.pid}, RSS ${(before.rssKb / 1024).toFixed(1)} MiB, fds ${before.fds}`,
);
const start = performance.now();
const end = start + MINUTES * 60_000;
let started = 0;
let inFlight = 0;
let nextReport = start + REPORT_MS;
let nextHup = start + HUP_EVERY_MS;
const pending = new Set<Promise<void>>();
while (performance.now() < end) {
  const now = performance.now();
  const due = Math.floor(((now - start) / 1000) * rate);
  for (; started < due; started++) {
    if (inFlight >= MAX_IN_FLIGHT) {
      totals.skipped++; // the offered load is not met: counted, not queued without bound
      continue;
    }
    inFlight++;
    const p = oneRequest(chooseKind()).finally(() => {
      inFlight--;
      pending.delete(p);
    });
    pending.add(p);
  }
  if (now >= nextHup) {
    daemon.signal("SIGHUP");
    totals.hups++;
    nextHup += HUP_EVERY_MS;
  }
  if (now >= nextReport) {
    report((now - start) / 60_000);
    nextReport += REPORT_MS;
  }
  await new Promise((r) => setTimeout(r, 5)); // the pacing tick of an open-loop generator
}
await Promise.all(pending);
report((performance.now() - start) / 60_000);

console.log(
  `\nsoak: RSS (MiB) per report: ${
    rssSeries.map((r) => `${r.minute.toFixed(1)} min ${r.mib.toFixed(0)}`).join(", ")
  }`,
);
console.log(`soak: ${describeFlatness(rssSeries)}`);
const code = await daemon.stop();
if (gcTraceFile) {
  for (const line of gcTraceReport(await Deno.readTextFile(gcTraceFile))) {
    console.log(`soak: ${line}`);
  }
}
// Streamed: 30 minutes of signing is a gigabyte of log, more than one string can hold.
const logged = new Set<string>();
for await (const l of auditLines(`${workDir}/audit`)) {
  if (l.event === "sign") logged.add(l.signature_sha256 as string);
}
const lost = [...served].filter((h) => !logged.has(h)).length;
const verify = await runAuditVerify(token, `${workDir}/audit`);
console.log(
  `\nsoak: ${MINUTES} min, ${totals.requests} requests (${
    (totals.requests / (MINUTES * 60)).toFixed(0)
  }/s), ` +
    `${served.size} signatures served, ${signaturesChecked} checked independently (${signaturesBad} bad), ` +
    `signatures lost (no audit line): ${lost}; errors ${totals.errors}; not offered (in-flight cap): ` +
    `${totals.skipped}; SIGHUPs ${totals.hups}; RSS max ${
      (totals.maxRssKb / 1024).toFixed(1)
    } MiB ` +
    `(start ${
      (before.rssKb / 1024).toFixed(1)
    }), fds max ${totals.maxFds} (start ${before.fds}); ` +
    `daemon exit ${code}; audit verify exit ${verify.code}`,
);
if (verify.code !== 0) console.log(verify.text);
await Deno.remove(workDir, { recursive: true }).catch(() => {});

/**
 * How far the RSS of the last half of the run strays from its mean (the bar: within ±10 %), and
 * the rise from the first to the last report of that half.
 */
function describeFlatness(series: Array<{ minute: number; mib: number }>): string {
  const last = series.filter((r) => r.minute >= MINUTES / 2);
  if (last.length < 2) return "RSS over the last half: too few reports";
  const mean = last.reduce((sum, r) => sum + r.mib, 0) / last.length;
  const spread = Math.max(...last.map((r) => Math.abs(r.mib - mean) / mean));
  return `RSS over the last half (${last.length} reports): mean ${mean.toFixed(0)} MiB, ` +
    `at most ${(spread * 100).toFixed(1)} % from it (${
      spread <= 0.1 ? "within" : "outside"
    } ±10 %), ` +
    `${last[0].mib.toFixed(0)} → ${last.at(-1)!.mib.toFixed(0)} MiB`;
}
await token.cleanup();
Deno.exit(lost === 0 && code === 0 && verify.code === 0 && signaturesBad === 0 ? 0 : 1);
