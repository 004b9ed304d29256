/**
 * The reload storm on every kind of thread at once: request threads signing with a granted key,
 * public threads answering OCSP, and a policy reader thread for every SIGHUP reading a policy file
 * that changes before each one. Every answer must be right: each /sign of a granted subject 200
 * (its signature verified with Web Crypto), each /sign of a subject no version of the policy
 * grants 403, each OCSP answer successful with its own nonce, "good" for the issued certificate and
 * signed by the CA (verified with node:crypto), and every reload read without a failure.
 */
import assert from "node:assert/strict";
import { verify, X509Certificate } from "node:crypto";
import { makeTestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type PublicListenerSetup, publicListenerSetup } from "./support/ca.ts";
import { request } from "./support/http_client.ts";
import { moduleTempDir } from "./support/temp_dir.ts";
import { notOk, reloadStorm } from "./support/reload_storm.ts";
import { certIdFor, encodeOcspRequest, parseOcspResponse } from "../lib/ocsp/mod.ts";

const SIGNERS = Array.from({ length: 8 }, (_, i) => `CN=storm${i},O=Example,C=DE`);
const INTRUDER = "CN=intruder,O=Elsewhere";
const HUPS = 300;
const OCSP_CLIENTS = 4;

/**
 * Two policies that both grant k1 to every signer and never to the intruder, in a different order,
 * with a different other grant each: every reload installs a policy that really differs.
 */
function policyVersion(n: number): string {
  const grants = SIGNERS.map((s) => `${s}\tk1`);
  const lines = n % 2 === 0
    ? [`# version ${n}`, ...grants, "CN=only-even,O=Example\tk1"]
    : [`# version ${n}`, ...grants.reverse(), "CN=only-odd,O=Example\tk1"];
  return lines.join("\n") + "\n";
}

/** Replaces the policy file in one step: a reload reads one version whole, never a mix. */
async function writePolicy(d: TestDaemon, n: number): Promise<void> {
  const next = `${d.policyPath}.next`;
  await Deno.writeTextFile(next, policyVersion(n));
  await Deno.rename(next, d.policyPath);
}

/** What the OCSP clients saw that was wrong, and how many answers they checked. */
interface OcspSeen {
  answers: number;
  wrong: string[];
}

/** One OCSP client: a nonce request for the issued certificate, again and again, each answer checked. */
async function askOcsp(pub: PublicListenerSetup, running: () => boolean, seen: OcspSeen) {
  const caKey = new X509Certificate(await Deno.readTextFile(pub.ca.caPem)).publicKey;
  const certId = certIdFor(pub.issuer, pub.issuedSerial);
  while (running()) {
    const nonce = crypto.getRandomValues(new Uint8Array(16));
    const res = await request(pub.socket, {
      method: "POST",
      path: "/ocsp",
      headers: [["Content-Type", "application/ocsp-request"]],
      body: encodeOcspRequest({ certIds: [certId], nonce }),
    });
    seen.answers++;
    const wrong = ocspWrongness(res.status, res.body, nonce, caKey);
    if (wrong) seen.wrong.push(wrong);
  }
}

/** Why an OCSP answer is wrong, or undefined when it is right. */
function ocspWrongness(
  status: number,
  body: Uint8Array,
  nonce: Uint8Array,
  caKey: X509Certificate["publicKey"],
): string | undefined {
  if (status !== 200) return `HTTP ${status}`;
  const parsed = parseOcspResponse(body);
  if (parsed.status !== "successful" || !parsed.basic) return `OCSP ${parsed.status}`;
  const { basic } = parsed;
  if (basic.nonce?.toHex() !== nonce.toHex()) return "another request's nonce";
  if (basic.singles[0]?.certStatus.status !== "good") return "not good";
  if (!verify("sha256", basic.tbs, caKey, basic.signature)) return "signature does not verify";
  return undefined;
}

function signAs(d: TestDaemon, subject: string) {
  return request(d.socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k1"]],
    body: "m",
  });
}

/** The intruder signs again and again: every answer must be 403. */
async function intrude(d: TestDaemon, running: () => boolean, statuses: number[]) {
  while (running()) statuses.push((await signAs(d, INTRUDER)).status);
}

/** Waits until `subject` gets a signature (the reload granting it is in force); at most 10 s. */
async function untilSigned(d: TestDaemon, subject: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await signAs(d, subject)).status !== 200) {
    if (Date.now() > deadline) assert.fail(`${subject} never got a signature after the storm`);
  }
}

Deno.test({
  name:
    `reload storm on request, public and policy threads: ${HUPS} SIGHUPs 50 ms apart, a new policy file each — every answer right`,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k1: "ec-p256" } });
    const work = moduleTempDir("svcd-public-storm-");
    const pub = await publicListenerSetup(token, work);
    const d = await startDaemon({
      token,
      workDir: work,
      policy: policyVersion(0),
      // The intruder's refusals are the point here, not a reason to delay it (429).
      args: [
        ...pub.args,
        "--threads",
        "2",
        "--public-threads",
        "2",
        "--refusal-threshold",
        "1000000",
      ],
    });
    try {
      const ocsp: OcspSeen = { answers: 0, wrong: [] };
      const intruder: number[] = [];
      const storm = await reloadStorm(d, {
        subjects: SIGNERS,
        key: "k1",
        hups: HUPS,
        beforeHup: (n) => writePolicy(d, n),
        alongside: [
          ...Array.from(
            { length: OCSP_CLIENTS },
            () => (running: () => boolean) => askOcsp(pub, running, ocsp),
          ),
          (running) => intrude(d, running, intruder),
        ],
      });
      const summary = `${JSON.stringify(storm)}\nocsp ${JSON.stringify(ocsp).slice(0, 500)}`;
      assert.equal(notOk(storm), 0, summary);
      assert.equal(storm.badSignatures, 0, summary);
      assert.ok(storm.checked > 0, summary);
      assert.deepEqual(ocsp.wrong.slice(0, 5), [], summary);
      assert.ok(ocsp.answers >= HUPS, summary);
      assert.deepEqual([...new Set(intruder)], [403], "the intruder's answers");
      // Every reload read its file, and the last one installed the last version in every thread.
      assert.doesNotMatch(d.stderr(), /policy reload failed/);
      const last = storm.hups % 2 === 0 ? "CN=only-even,O=Example" : "CN=only-odd,O=Example";
      const other = storm.hups % 2 === 0 ? "CN=only-odd,O=Example" : "CN=only-even,O=Example";
      await untilSigned(d, last);
      const after = await Promise.all(
        Array.from({ length: 16 }, (_, i) => signAs(d, i % 2 ? last : other)),
      );
      assert.deepEqual(after.map((r) => r.status), after.map((_, i) => i % 2 ? 200 : 403));
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});
