/**
 * The HTTP fuzz campaign against a real `svcd serve`: generated cases (grammar.ts) written over a
 * raw UNIX socket, each answer judged by an oracle that does not use the daemon's code —
 * reference.ts decides what the bytes are, node:crypto / @noble decide whether a signature is
 * valid. A finding is: a 2xx for bytes that must be refused; a /sign 200 whose body is not a
 * signature over exactly the request's body; a /verify answer that disagrees with the independent
 * check; a 500; an answer that is not HTTP; no answer for a request that must be refused; a
 * connection the daemon still holds at a guard well past its deadlines; the daemon gone; RSS or
 * open fds growing past their bounds.
 *
 * @example
 * ```ts
 * const target = await startFuzzTarget();
 * const report = await runCampaign(target, { seed: 1, cases: 1000, concurrency: 8 });
 * await target.stop();
 * ```
 */
import { parseRawResponse } from "../support/raw_http.ts";
import { latin1 } from "../../lib/bytes/mod.ts";
import { startDaemon, type TestDaemon } from "../support/daemon.ts";
import { request } from "../support/http_client.ts";
import { verifyIndependently } from "../support/oracle.ts";
import { makeTestToken, type TestToken } from "../support/token.ts";
import { type Fixture, type FuzzCase, generateCase } from "./grammar.ts";
import type { PublicFixture } from "./public_fuzz.ts";
import { publicListenerSetup } from "../support/ca.ts";
import { readReference, type Verdict } from "./reference.ts";

/** The daemon's documented limits (README: 16 KiB head, --max-body default 1 MiB). */
export const LIMITS = { maxHeaderBytes: 16 * 1024, maxBodyBytes: 1 << 20 };
/**
 * A connection the daemon has not ended this long after it was opened is closed by the harness and
 * is a finding (a hang): the daemon's longest deadline (a body still arriving is cut after 10 s)
 * with room for a loaded machine. A guard, not a measured claim: how long answers took is printed.
 */
const HANG_GUARD_MS = 15_000;
/** RSS may grow this much over the first sample before it is a finding (caches, JIT, pools). */
const RSS_GROWTH_BOUND_KB = 256 * 1024;
/** Open fds past the first sample, beyond one per connection in flight. */
const FD_SLACK = 32;

/** Identities and grants of the fuzz daemon; `CN=fuzz` / `k1` are the issue's names. */
const GRANTS: Record<string, string[]> = {
  "CN=fuzz": ["k1", "k-ec"],
  "CN=other,O=Example,C=DE": ["k-ec"],
  "CN=health-only": ["no-such-key"],
};
const KEYS = { "k1": "ed25519", "k-ec": "ec-p256", "k-orphan": "ed25519" };

/** A running daemon and what the oracle knows about it. */
export interface FuzzTarget {
  daemon: TestDaemon;
  token: TestToken;
  fixture: Fixture;
  /** Present when started with its public listener (`--public-socket`, OCSP). */
  publicFixture?: PublicFixture;
  stop(): Promise<number>;
}

/** The public listener with a CA made by `svcd ca init` and one certificate it issued. */
async function publicListener(token: TestToken, workDir: string) {
  const pub = await publicListenerSetup(token, workDir);
  const fixture: PublicFixture = {
    socket: pub.socket,
    caKeyType: "ec-p256",
    issuer: { publicKey: pub.issuer.publicKey, spki: pub.issuer.spki },
    issuerInfo: pub.issuer,
    serials: [pub.issuedSerial, Uint8Array.of(0x01), Uint8Array.of(0x7f, 0xff, 0x00, 0x12)],
  };
  return { fixture, args: pub.args };
}

/**
 * Starts the daemon with a fresh token, its keys, the grants above and a refusal budget too large
 * to limit the fuzzer (429s would hide the routes), then makes a few signatures for /verify cases.
 *
 * @example
 * ```ts
 * const t = await startFuzzTarget();
 * ```
 */
export async function startFuzzTarget(
  opts: { publicListener?: boolean } = {},
): Promise<FuzzTarget> {
  const token = await makeTestToken({ keys: KEYS });
  const policy = Object.entries(GRANTS).flatMap(([s, labels]) => labels.map((l) => `${s}\t${l}\n`))
    .join("");
  const workDir = await Deno.makeTempDir({ prefix: "svcd-fuzz-" });
  const pub = opts.publicListener ? await publicListener(token, workDir) : undefined;
  const daemon = await startDaemon({
    token,
    policy,
    workDir,
    args: ["--refusal-threshold", "1000000", "--refusal-refill", "1", ...(pub?.args ?? [])],
  }).catch(async (err) => {
    await token.cleanup();
    throw err;
  });
  const fixture: Fixture = { grants: GRANTS, keys: {}, signatures: [] };
  const listing = await request(daemon.socket, {
    method: "GET",
    path: "/token",
    headers: [["X-SVC-Client-Subject", "CN=fuzz"]],
  });
  const keys = (listing.json() as {
    keys: { label: string; key_type: string; public_key: string | null; public_key_raw: string }[];
  }).keys;
  for (const k of keys) {
    fixture.keys[k.label] = {
      keyType: k.key_type,
      raw: Uint8Array.fromBase64(k.public_key_raw),
      spki: k.public_key ? Uint8Array.fromBase64(k.public_key) : undefined,
    };
  }
  fixture.keys["k-orphan"] = { keyType: "ed25519", raw: new Uint8Array() }; // exists, granted to nobody
  for (const label of ["k1", "k-ec"]) {
    for (const text of ["", "m", "a message to verify", "x".repeat(300)]) {
      const message = new TextEncoder().encode(text);
      const res = await request(daemon.socket, {
        method: "POST",
        path: "/sign",
        headers: [["X-SVC-Client-Subject", "CN=fuzz"], ["X-SVC-Key", label]],
        body: message,
      });
      if (res.status !== 200) throw new Error(`set-up /sign ${label}: ${res.status} ${res.text()}`);
      fixture.signatures.push({ label, message, signature: res.body });
    }
  }
  return {
    daemon,
    token,
    fixture,
    publicFixture: pub?.fixture,
    stop: async () => {
      const code = await daemon.stop();
      await Deno.remove(daemon.workDir, { recursive: true }).catch(() => {});
      await token.cleanup();
      return code;
    },
  };
}

/** One exchange: what came back and how long it took. `raw` is empty when nothing came back. */
export interface Exchange {
  raw: Uint8Array;
  ms: number;
  /** The daemon had not ended the connection at the hang guard: the harness closed it. */
  hung: boolean;
  /** Set when the connection could not be made (the daemon is gone). */
  connectError?: string;
}

/**
 * Writes a case the way it says (split writes, optional half-close) and reads until the daemon
 * closes, or the guard (a hang) fires.
 *
 * @example
 * ```ts
 * import type { FuzzCase } from "./grammar.ts";
 * declare const target: FuzzTarget, fuzzCase: FuzzCase;
 * const ex = await sendCase(target.daemon.socket, fuzzCase);
 * ```
 */
export async function sendCase(socket: string, c: FuzzCase): Promise<Exchange> {
  const started = performance.now();
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path: socket });
  } catch (err) {
    return { raw: new Uint8Array(), ms: 0, hung: false, connectError: (err as Error).message };
  }
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    conn.close();
  }, HANG_GUARD_MS);
  try {
    const reading = readAllOf(conn);
    try {
      let at = 0;
      for (const end of [...c.writes, c.bytes.length]) {
        for (let p = at; p < end;) p += await conn.write(c.bytes.subarray(p, end));
        at = end;
      }
      if (c.halfClose) await conn.closeWrite();
    } catch {
      // The daemon answered and closed before taking everything (400, 413): read what it said.
    }
    const raw = await reading;
    return { raw, ms: performance.now() - started, hung };
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the guard or already */ }
  }
}

async function readAllOf(conn: Deno.Conn): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const buf = new Uint8Array(65536);
  for (;;) {
    let n: number | null;
    try {
      n = await conn.read(buf);
    } catch {
      break; // reset or closed by the guard: what arrived is the answer
    }
    if (n === null) break;
    parts.push(buf.slice(0, n));
  }
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let o = 0;
  for (const p of parts) out.set(p, (o += p.length) - p.length);
  return out;
}

/** How a case ended, for the campaign's tally. */
export interface Judgement {
  finding?: string;
  /** "200 sign", "400", "no answer", … */
  outcome: string;
}

/**
 * Judges one exchange. Independent of the daemon's code: the reference parser and the key's public
 * key decide.
 *
 * @example
 * ```ts
 * import type { Fixture, FuzzCase } from "./grammar.ts";
 * declare const fixture: Fixture, fuzzCase: FuzzCase, exchange: Exchange;
 * const j = await judge(fixture, fuzzCase.bytes, exchange);
 * if (j.finding) console.log(j.finding);
 * ```
 */
export async function judge(
  fx: Fixture,
  bytes: Uint8Array,
  ex: Exchange,
  writes: readonly number[] = [],
): Promise<Judgement> {
  const verdict = readReference(bytes, LIMITS);
  if (ex.connectError) return { finding: `cannot connect: ${ex.connectError}`, outcome: "gone" };
  if (ex.hung) {
    return { finding: `connection still open at the ${HANG_GUARD_MS} ms guard`, outcome: "hung" };
  }
  const answer = finalAnswer(ex.raw);
  if (answer.length === 0) {
    if (verdict.kind === "refuse") {
      return {
        finding: `closed without an answer for a refused request (${verdict.why})`,
        outcome: "no answer",
      };
    }
    if (verdict.kind === "message") {
      return { finding: "closed without an answer for a complete request", outcome: "no answer" };
    }
    return { outcome: "no answer (incomplete)" };
  }
  let res;
  try {
    res = parseRawResponse(answer);
  } catch (err) {
    return { finding: `not an HTTP answer: ${(err as Error).message}`, outcome: "garbage" };
  }
  const status = res.status;
  if (status === 500) return { finding: `500: ${latin1(res.body).slice(0, 200)}`, outcome: "500" };
  if (status >= 200 && status < 300) {
    const judged = await judgeSuccess(fx, verdict, status, res.body);
    if (!judged.finding) return judged;
    // A message complete before a later write may be answered before those bytes arrive: the
    // daemon cannot refuse bytes it has not read. The answer must then fit that message alone.
    for (const end of writes) {
      const first = readReference(bytes.subarray(0, end), LIMITS);
      if (first.kind !== "message") continue;
      const alone = await judgeSuccess(fx, first, status, res.body);
      if (!alone.finding) {
        return { outcome: `${alone.outcome} (message complete before a later write)` };
      }
    }
    return judged;
  }
  if (verdict.kind === "message" && status === 422) return await judgeInvalid(fx, verdict);
  return { outcome: String(status) };
}

/**
 * The bytes after any interim (1xx) answers, e.g. `100 Continue`.
 *
 * @example
 * ```ts
 * import { parseRawResponse } from "../support/raw_http.ts";
 * declare const raw: Uint8Array;
 * parseRawResponse(finalAnswer(raw)).status;
 * ```
 */
export function finalAnswer(raw: Uint8Array): Uint8Array {
  let at = 0;
  while (latin1(raw.subarray(at, at + 13)).match(/^HTTP\/1\.1 1\d\d /)) {
    let end = at;
    while (
      end + 3 < raw.length &&
      !(raw[end] === 13 && raw[end + 1] === 10 && raw[end + 2] === 13 && raw[end + 3] === 10)
    ) end++;
    if (end + 3 >= raw.length) break; // no final answer after it: judged as it is
    at = end + 4;
  }
  return raw.subarray(at);
}

async function judgeSuccess(
  fx: Fixture,
  v: Verdict,
  status: number,
  body: Uint8Array,
): Promise<Judgement> {
  if (v.kind !== "message") {
    return { finding: `${status} for bytes that are ${v.kind}: ${v.why}`, outcome: "2xx" };
  }
  const path = v.target.split("?")[0];
  const one = (name: string) => {
    const values = v.headers.filter(([n]) => n === name).map(([, x]) => x);
    return values.length === 1 ? values[0] : undefined;
  };
  const subject = one("x-svc-client-subject");
  const label = one("x-svc-key");
  const refused = (why: string) => ({
    finding: v.ambiguous ? undefined : `${status} ${v.method} ${v.target}: ${why}`,
    outcome: `2xx (${why}${v.ambiguous ? `; ${v.ambiguous}` : ""})`,
  });
  if (status !== 200) return refused(`status ${status} is not one the routes give`);
  if (!subject) return refused("no single non-empty X-SVC-Client-Subject");
  const grants = fx.grants[subject] ?? [];
  // HEAD is GET without the body (RFC 9110 §9.3.2; the daemon serves it so).
  const route = `${v.method === "HEAD" ? "GET" : v.method} ${path}`;
  if (route === "GET /health" || route === "GET /token") {
    return grants.length > 0
      ? { outcome: `200 ${path}` }
      : refused("subject unknown to the policy");
  }
  if (route !== "POST /sign" && route !== "POST /verify") return refused("no such route");
  if (!label || !grants.includes(label) || !fx.keys[label]?.raw.length) {
    return refused(`key ${JSON.stringify(label)} not granted to ${JSON.stringify(subject)}`);
  }
  const key = fx.keys[label];
  if (route === "POST /sign") {
    const ok = await verifyIndependently(key.keyType, key, v.body, body).catch(() => false);
    return ok ? { outcome: "200 /sign" } : {
      finding: "200 /sign whose body is not a signature over exactly the request's body",
      outcome: "200 /sign",
    };
  }
  const split = signatureSplit(v);
  if (split === undefined) return refused("bad X-SVC-Signature-Length");
  const valid = await verifyIndependently(key.keyType, key, split.message, split.signature)
    .catch(() => false);
  return valid ? { outcome: "200 /verify" } : {
    finding: "200 /verify for a signature the independent check rejects",
    outcome: "200 /verify",
  };
}

async function judgeInvalid(fx: Fixture, v: Verdict & { kind: "message" }): Promise<Judgement> {
  const label = v.headers.find(([n]) => n === "x-svc-key")?.[1];
  const key = label ? fx.keys[label] : undefined;
  const split = signatureSplit(v);
  if (!key?.raw.length || !split) return { outcome: "422" };
  const valid = await verifyIndependently(key.keyType, key, split.message, split.signature)
    .catch(() => false);
  return valid
    ? { finding: "422 for a signature the independent check accepts", outcome: "422" }
    : { outcome: "422" };
}

function signatureSplit(
  v: Verdict & { kind: "message" },
): { signature: Uint8Array; message: Uint8Array } | undefined {
  const values = v.headers.filter(([n]) => n === "x-svc-signature-length").map(([, x]) => x);
  if (values.length !== 1 || !/^[0-9]{1,6}$/.test(values[0])) return undefined;
  const n = Number(values[0]);
  if (n < 1 || n > 16384 || n > v.body.length) return undefined;
  return { signature: v.body.subarray(0, n), message: v.body.subarray(n) };
}

/** RSS (KiB) and open fds of a process, from /proc. */
export function processUsage(pid: number): { rssKb: number; fds: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  let fds = 0;
  for (const _ of Deno.readDirSync(`/proc/${pid}/fd`)) fds++;
  return { rssKb, fds };
}

/** What a campaign did and found. */
export interface CampaignReport {
  seed: number;
  cases: number;
  outcomes: Record<string, number>;
  findings: Array<{ index: number; finding: string; steps: string[]; bytes: Uint8Array }>;
  rss: { firstKb: number; maxKb: number; lastKb: number };
  fds: { first: number; max: number; last: number };
  maxMs: number;
  seconds: number;
}

/** Options of a campaign; `from` starts at another case number (to replay one case: cases 1). */
export interface CampaignOptions {
  seed: number;
  cases: number;
  from?: number;
  concurrency?: number;
  /** Called every `progressEvery` cases with the report so far. */
  onProgress?: (r: CampaignReport) => void;
  progressEvery?: number;
  /** One incomplete request in this many is left open until the daemon's deadline (default 500; 0 never). */
  holdOpenEvery?: number;
  /** Polled before each case: true ends the campaign early (its report covers what ran). */
  interrupted?: () => boolean;
  /** Stop at the first finding. */
  stopOnFinding?: boolean;
}

/**
 * Runs `cases` generated cases against the target, `concurrency` connections at a time, checking
 * the daemon's process (alive, RSS, fds) every few hundred cases.
 *
 * @example
 * ```ts
 * declare const target: FuzzTarget;
 * const r = await runCampaign(target, { seed: 7, cases: 500 });
 * r.findings.length; // 0 when nothing was found
 * ```
 */
export async function runCampaign(t: FuzzTarget, o: CampaignOptions): Promise<CampaignReport> {
  const started = performance.now();
  const first = processUsage(t.daemon.pid);
  const report: CampaignReport = {
    seed: o.seed,
    cases: 0,
    outcomes: {},
    findings: [],
    rss: { firstKb: first.rssKb, maxKb: first.rssKb, lastKb: first.rssKb },
    fds: { first: first.fds, max: first.fds, last: first.fds },
    maxMs: 0,
    seconds: 0,
  };
  const concurrency = o.concurrency ?? 8;
  const from = o.from ?? 0;
  let next = from;
  let exited = false;
  t.daemon.status.then(() => exited = true);
  const sample = () => {
    if (exited) {
      report.findings.push({
        index: next,
        finding: `daemon exited:\n${t.daemon.stderr().slice(-2000)}`,
        steps: [],
        bytes: new Uint8Array(),
      });
      return;
    }
    const u = processUsage(t.daemon.pid);
    report.rss.lastKb = u.rssKb;
    report.rss.maxKb = Math.max(report.rss.maxKb, u.rssKb);
    report.fds.last = u.fds;
    report.fds.max = Math.max(report.fds.max, u.fds);
    if (u.rssKb > first.rssKb + RSS_GROWTH_BOUND_KB) {
      report.findings.push({
        index: next,
        finding: `RSS ${u.rssKb} KiB (started at ${first.rssKb})`,
        steps: [],
        bytes: new Uint8Array(),
      });
    }
    if (u.fds > first.fds + concurrency + FD_SLACK) {
      report.findings.push({
        index: next,
        finding: `${u.fds} open fds (started at ${first.fds})`,
        steps: [],
        bytes: new Uint8Array(),
      });
    }
  };
  const every = o.progressEvery ?? 1000;
  const worker = async () => {
    while (
      next < from + o.cases && !exited && !(o.stopOnFinding && report.findings.length > 0) &&
      !o.interrupted?.()
    ) {
      const index = next++;
      const c = generateCase(o.seed, index, t.fixture);
      // Bytes that are not yet a whole request would wait for the body deadline (10 s): most are
      // ended with EOF; one in `holdOpenEvery` is left open to see that deadline hold.
      const holdOpenEvery = o.holdOpenEvery ?? 500;
      const holdOpen = holdOpenEvery > 0 && index % holdOpenEvery === holdOpenEvery - 1;
      if (readReference(c.bytes, LIMITS).kind === "incomplete" && !holdOpen) {
        c.halfClose = true;
      }
      const ex = await sendCase(t.daemon.socket, c);
      const j = await judge(t.fixture, c.bytes, ex, c.writes);
      report.cases++;
      report.maxMs = Math.max(report.maxMs, ex.ms);
      const key = `${j.outcome} [reference: ${readReference(c.bytes, LIMITS).kind}]`;
      report.outcomes[key] = (report.outcomes[key] ?? 0) + 1;
      if (j.finding) {
        report.findings.push({ index, finding: j.finding, steps: c.steps, bytes: c.bytes });
      }
      if (report.cases % 250 === 0) sample();
      if (report.cases % every === 0) {
        report.seconds = (performance.now() - started) / 1000;
        o.onProgress?.(report);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  sample();
  report.seconds = (performance.now() - started) / 1000;
  return report;
}
