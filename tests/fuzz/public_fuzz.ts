/**
 * The public listener under fuzz (no identity, no policy, no refusal budget): OCSP requests — valid ones for an issued certificate
 * and for unknown serials, with and without a nonce, and the same damaged by the parsers' mutator —
 * POSTed to /ocsp over the raw public socket, among other methods and routes. The oracle: the
 * reference reader for the HTTP framing (no 2xx for bytes that must be refused); POST /ocsp always
 * 200 with an OCSP response; a request lib/ocsp parses gets a successful response whose signature
 * verifies with the CA's public key (Web Crypto / @noble, not the daemon's code) and whose nonce is
 * the request's; one it refuses gets the five-byte malformedRequest; GET /ocsp 405 with
 * `Allow: POST`; /sign and /verify 404; no 500.
 *
 * @example
 * ```ts
 * import { startFuzzTarget } from "./http_fuzz.ts";
 * const target = await startFuzzTarget({ publicListener: true });
 * const r = await runPublicCampaign(target, { seed: 1, cases: 500 });
 * ```
 */
import { createHash } from "node:crypto";
import { parseRawResponse } from "../support/raw_http.ts";
import { concat } from "../../lib/bytes/mod.ts";
import {
  certIdFor,
  encodeOcspRequest,
  MalformedRequest,
  parseOcspRequest,
  parseOcspResponse,
  SIGNATURE_ALGORITHMS,
} from "../../lib/ocsp/mod.ts";
import { verifyIndependently } from "../support/oracle.ts";
import type { FuzzCase } from "./grammar.ts";
import {
  type CampaignReport,
  finalAnswer,
  type FuzzTarget,
  LIMITS,
  sendCase,
} from "./http_fuzz.ts";
import { mutate } from "./parsers.ts";
import { Prng } from "./prng.ts";
import { readReference } from "./reference.ts";

const MALFORMED = Uint8Array.of(0x30, 0x03, 0x0a, 0x01, 0x01);
const te = new TextEncoder();
const ROUTES: Array<[string, string]> = [
  ["GET", "/ocsp"],
  ["POST", "/sign"],
  ["POST", "/verify"],
  ["GET", "/certificates"],
  ["HEAD", "/certificates"],
  ["POST", "/certificates"],
  ["GET", "/health"],
];

/** What the public side's oracle knows: the issuer and DER requests to start from. */
export interface PublicFixture {
  socket: string;
  caKeyType: string;
  issuer: { publicKey: Uint8Array; spki: Uint8Array };
  /** An issued certificate's serial and serials the CA never issued, as CertIDs' inputs. */
  serials: Uint8Array[];
  issuerInfo: Parameters<typeof certIdFor>[0];
}

/**
 * Case `index` of `seed` for the public socket.
 */
export function publicCase(seed: number, index: number, pf: PublicFixture): FuzzCase {
  const rng = new Prng((seed * 0x2545f491 + index * 0x9e3779b1 + 0x1b873593) >>> 0);
  const steps: string[] = [];
  const certIds = Array.from(
    { length: 1 + rng.int(2) },
    () => certIdFor(pf.issuerInfo, rng.pick(pf.serials), rng.pick(["sha1", "sha256", "sha512"])),
  );
  let der = encodeOcspRequest({
    certIds,
    nonce: rng.chance(0.5) ? rng.bytes(1 + rng.int(32)) : null,
  });
  if (rng.chance(0.4)) der = mutate(rng, der, steps);
  const [method, path] = rng.chance(0.85) ? ["POST", "/ocsp"] : rng.pick(ROUTES);
  steps.unshift(`${method} ${path}`);
  const headers = ["Host: svcd"];
  if (rng.chance(0.9)) headers.push("Content-Type: application/ocsp-request");
  if (method !== "GET" && method !== "HEAD") headers.push(`Content-Length: ${der.length}`);
  const head = te.encode(`${method} ${path} HTTP/1.1\r\n${headers.join("\r\n")}\r\n\r\n`);
  const body = method !== "GET" && method !== "HEAD" ? der : new Uint8Array();
  return { bytes: concat([head, body]), writes: [], halfClose: false, steps };
}

/**
 * Judges one answer of the public socket; a finding or undefined, and the outcome for the tally.
 *
 * @example
 * ```ts
 * import type { FuzzCase } from "./grammar.ts";
 * import { sendCase } from "./http_fuzz.ts";
 * declare const fixture: PublicFixture, c: FuzzCase;
 * const j = await judgePublic(fixture, c.bytes, (await sendCase(fixture.socket, c)).raw);
 * ```
 */
export async function judgePublic(
  pf: PublicFixture,
  bytes: Uint8Array,
  raw: Uint8Array,
): Promise<{ finding?: string; outcome: string }> {
  const v = readReference(bytes, LIMITS);
  const answer = finalAnswer(raw);
  if (answer.length === 0) {
    return v.kind === "incomplete"
      ? { outcome: "no answer (incomplete)" }
      : { finding: `no answer (${v.kind})`, outcome: "no answer" };
  }
  let res;
  try {
    res = parseRawResponse(answer);
  } catch (err) {
    return { finding: `not an HTTP answer: ${(err as Error).message}`, outcome: "garbage" };
  }
  if (res.status === 500) return { finding: "500", outcome: "500" };
  if (v.kind !== "message") {
    return res.status < 300
      ? { finding: `${res.status} for bytes that are ${v.kind}`, outcome: "2xx" }
      : { outcome: String(res.status) };
  }
  const route = `${v.method} ${v.target}`;
  if (route === "GET /ocsp") {
    const allow = res.headers.find(([n]) => n === "allow")?.[1];
    return res.status === 405 && allow === "POST"
      ? { outcome: "405 GET /ocsp" }
      : { finding: `GET /ocsp → ${res.status} Allow ${allow}`, outcome: String(res.status) };
  }
  if (v.target === "/sign" || v.target === "/verify") {
    return res.status === 404
      ? { outcome: `404 ${v.target}` }
      : { finding: `${route} → ${res.status} on the public socket`, outcome: String(res.status) };
  }
  if (route !== "POST /ocsp") return { outcome: `${res.status} ${route}` };
  if (res.status !== 200) {
    return { finding: `POST /ocsp → ${res.status}`, outcome: String(res.status) };
  }
  return await judgeOcsp(pf, v.body, res.body);
}

async function judgeOcsp(
  pf: PublicFixture,
  der: Uint8Array,
  body: Uint8Array,
): Promise<{ finding?: string; outcome: string }> {
  let request;
  try {
    request = parseOcspRequest(der);
  } catch (err) {
    if (!(err instanceof MalformedRequest)) throw err;
    return body.toHex() === MALFORMED.toHex()
      ? { outcome: "200 malformedRequest" }
      : { finding: "a request lib/ocsp refuses did not get malformedRequest", outcome: "200" };
  }
  let parsed;
  try {
    parsed = parseOcspResponse(body);
  } catch (err) {
    return { finding: `unreadable OCSP response: ${(err as Error).message}`, outcome: "200" };
  }
  // RFC 6960 §2.3: a CertID this CA did not issue gets unauthorized (hashes checked here with
  // node:crypto over the CA certificate's subject and key bits).
  const ours = request.certIds.every((id) =>
    id.hash !== null &&
    createHash(id.hash).update(pf.issuerInfo.subject).digest("hex") === id.issuerNameHash.toHex() &&
    createHash(id.hash).update(pf.issuerInfo.publicKey).digest("hex") === id.issuerKeyHash.toHex()
  );
  if (!ours) {
    return parsed.status === "unauthorized"
      ? { outcome: "200 unauthorized (another CA's CertID)" }
      : { finding: `status ${parsed.status} for a CertID of another CA`, outcome: "200" };
  }
  if (parsed.status !== "successful" || !parsed.basic) {
    return { finding: `status ${parsed.status} for a request that parses`, outcome: "200" };
  }
  const alg = SIGNATURE_ALGORITHMS[pf.caKeyType as keyof typeof SIGNATURE_ALGORITHMS];
  const ok = await verifyIndependently(
    pf.caKeyType,
    { raw: pf.issuer.publicKey, spki: pf.issuer.spki },
    parsed.basic.tbs,
    alg.decodeSignature(parsed.basic.signature),
  );
  if (!ok) {
    return { finding: "an OCSP response whose signature the CA key rejects", outcome: "200" };
  }
  if ((parsed.basic.nonce?.toHex() ?? null) !== (request.nonce?.toHex() ?? null)) {
    return { finding: "the response's nonce is not the request's", outcome: "200" };
  }
  if (parsed.basic.singles.length !== request.certIds.length) {
    return { finding: "not one answer per CertID", outcome: "200" };
  }
  return { outcome: "200 successful (signature verified)" };
}

/**
 * Runs `cases` public-socket cases, `concurrency` at a time.
 */
export async function runPublicCampaign(
  t: FuzzTarget,
  o: { seed: number; cases: number; concurrency?: number; interrupted?: () => boolean },
): Promise<Pick<CampaignReport, "cases" | "outcomes" | "findings" | "seconds">> {
  const pf = t.publicFixture;
  if (!pf) throw new Error("the target was started without its public listener");
  const started = performance.now();
  const report = {
    cases: 0,
    outcomes: {} as Record<string, number>,
    findings: [] as CampaignReport["findings"],
    seconds: 0,
  };
  let next = 0;
  const worker = async () => {
    while (next < o.cases && !o.interrupted?.()) {
      const index = next++;
      const c = publicCase(o.seed, index, pf);
      const ex = await sendCase(pf.socket, c);
      const j = ex.connectError
        ? { finding: `cannot connect: ${ex.connectError}`, outcome: "gone" }
        : await judgePublic(pf, c.bytes, ex.raw);
      report.cases++;
      report.outcomes[j.outcome] = (report.outcomes[j.outcome] ?? 0) + 1;
      if (j.finding) {
        report.findings.push({ index, finding: j.finding, steps: c.steps, bytes: c.bytes });
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 8 }, worker));
  report.seconds = (performance.now() - started) / 1000;
  return report;
}
