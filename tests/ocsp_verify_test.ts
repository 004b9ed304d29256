/**
 * Our OCSP responses checked by tools nobody here wrote: `openssl ocsp`, Python `cryptography`
 * and GnuTLS `ocsptool`, for ECDSA P-256/P-384, Ed25519 and RSA-PSS responders signing as the CA
 * and as a delegated responder; ML-DSA and composite responses by @noble/post-quantum.
 */
import assert from "node:assert/strict";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import {
  formatIndexLine,
  IndexFileSource,
  parseOcspResponse,
  Responder,
  SIGNATURE_ALGORITHMS,
} from "../lib/ocsp/mod.ts";
import { certIdFor, encodeOcspRequest } from "../lib/ocsp/request.ts";
import { parseCertificate } from "../lib/ocsp/certificate.ts";
import { DerReader } from "../lib/der/mod.ts";
import { verifyIndependently } from "../lib/token_admin/independent_verify.ts";
import { runCommand } from "./support/command.ts";
import {
  opensslCa,
  type OpensslKeyType,
  opensslResponder,
  pqCa,
  type PqKeyType,
  type TestCert,
  withTempDir,
} from "./support/ocsp.ts";

const PYTHON = "/usr/bin/python3";
const CHECK_PY = new URL("./support/ocsp_check.py", import.meta.url).pathname;
const EXP = Date.UTC(2035, 0, 1);
const REVOKED_AT = Date.UTC(2026, 0, 2, 3, 4, 5);

function writeIndex(path: string): void {
  Deno.writeTextFileSync(
    path,
    formatIndexLine({ status: "V", expires: EXP, serial: "1001", subject: "/CN=good" }) +
      formatIndexLine({
        status: "R",
        expires: EXP,
        revokedAt: REVOKED_AT,
        reason: 1,
        serial: "1002",
        subject: "/CN=revoked",
      }) +
      formatIndexLine({
        status: "R",
        expires: EXP,
        revokedAt: REVOKED_AT,
        serial: "1004",
        subject: "/CN=no reason",
      }),
  );
}

const withDir = (fn: (dir: string) => Promise<void> | void) => withTempDir("ocsp-verify-", fn);

const SERIALS = ["0x1001", "0x1002", "0x1003", "0x1004"];

/** openssl output must verify, show every status, and carry no warning or time complaint. */
function assertOpensslOk(text: string, what: string): void {
  assert.match(text, /Response verify OK/, `${what}: ${text}`);
  assert.doesNotMatch(text, /WARNING|Status times invalid|error/i, `${what}: ${text}`);
}

async function checkWithTools(dir: string, ca: TestCert, signerCert: TestCert, delegated: boolean) {
  writeIndex(`${dir}/index.txt`);
  const responder = new Responder({
    source: new IndexFileSource(`${dir}/index.txt`),
    issuer: ca.der,
    signer: signerCert.signer,
    responderCertificate: delegated ? signerCert.der : undefined,
  });
  // The request is openssl's own (with its nonce).
  const reqOut = await runCommand("openssl", [
    "ocsp",
    "-issuer",
    ca.certPath,
    ...SERIALS.flatMap((s) => ["-serial", s]),
    "-reqout",
    `${dir}/req.der`,
  ]);
  assert.equal(reqOut.code, 0, reqOut.text);
  const resp = await responder.answer(await Deno.readFile(`${dir}/req.der`));
  await Deno.writeFile(`${dir}/resp.der`, resp);
  const trust = delegated ? [] : ["-verify_other", ca.certPath];

  // openssl: signature, chain (delegated: OCSPSigning), the nonce against the request.
  const withNonce = await runCommand("openssl", [
    "ocsp",
    "-reqin",
    `${dir}/req.der`,
    "-respin",
    `${dir}/resp.der`,
    "-CAfile",
    ca.certPath,
    ...trust,
  ]);
  assert.equal(withNonce.code, 0, withNonce.text);
  assertOpensslOk(withNonce.text, "openssl -reqin");
  const statuses = await runCommand("openssl", [
    "ocsp",
    "-respin",
    `${dir}/resp.der`,
    "-CAfile",
    ca.certPath,
    ...trust,
    "-issuer",
    ca.certPath,
    ...SERIALS.flatMap((s) => ["-serial", s]),
    "-no_nonce",
  ]);
  assert.equal(statuses.code, 0, statuses.text);
  assertOpensslOk(statuses.text, "openssl statuses");
  assert.match(statuses.stdout, /0x1001: good/);
  assert.match(
    statuses.stdout,
    /0x1002: revoked[\s\S]*Reason: keyCompromise[\s\S]*Revocation Time: Jan {2}2 03:04:05 2026 GMT/,
  );
  assert.match(statuses.stdout, /0x1003: unknown/);
  assert.match(
    statuses.stdout,
    /0x1004: revoked\n\tThis Update[^\n]*\n\tNext Update[^\n]*\n\tRevocation Time/,
  );
  if (delegated) {
    // -VAfile: the responder certificate named as trusted directly.
    const va = await runCommand("openssl", [
      "ocsp",
      "-respin",
      `${dir}/resp.der`,
      "-VAfile",
      signerCert.certPath,
    ]);
    assertOpensslOk(va.text, "openssl -VAfile");
  }

  // Python cryptography: signature with the signer's key, and every field.
  const py = await runCommand(PYTHON, [CHECK_PY, `${dir}/resp.der`, signerCert.certPath]);
  assert.equal(py.code, 0, py.text);
  const got = JSON.parse(py.stdout);
  assert.equal(got.verified, true);
  assert.equal(got.certs, delegated ? 1 : 0);
  const reqNonce = parseNonceFromOpensslRequest(await Deno.readFile(`${dir}/req.der`));
  assert.equal(got.nonce, reqNonce);
  assert.deepEqual(
    got.responses.map((
      r: Record<string, unknown>,
    ) => [r.serial, r.hash, r.status, r.revokedAt, r.reason]),
    [
      ["1001", "sha1", "GOOD", null, null],
      ["1002", "sha1", "REVOKED", REVOKED_AT, "keyCompromise"],
      ["1003", "sha1", "UNKNOWN", null, null],
      ["1004", "sha1", "REVOKED", REVOKED_AT, null],
    ],
  );
  for (const r of got.responses) assert.equal(r.nextUpdate - r.thisUpdate, 3600_000);

  // GnuTLS ocsptool: the CA as the known signer, or the CA as trust anchor for a delegated one.
  const gnutls = await runCommand("ocsptool", [
    "-e",
    delegated ? "--load-trust" : "--load-signer",
    ca.certPath,
    "--load-response",
    `${dir}/resp.der`,
  ]);
  assert.equal(gnutls.code, 0, gnutls.text);
  assert.match(gnutls.text, /Verifying OCSP Response: Success\./);
}

function parseNonceFromOpensslRequest(der: Uint8Array): string {
  // Independent of our request parser: the nonce is the last 16 bytes openssl writes.
  return Array.from(der.subarray(der.length - 16), (b) => b.toString(16).padStart(2, "0")).join("");
}

for (
  const keyType of [
    "ec-p256",
    "ec-p384",
    "ed25519",
    "rsa-3072",
    "rsa-3072-pkcs1v15",
  ] as OpensslKeyType[]
) {
  Deno.test(`openssl, cryptography and ocsptool verify a ${keyType} CA's response`, () =>
    withDir(async (dir) => {
      const ca = await opensslCa(dir, keyType);
      await checkWithTools(dir, ca, ca, false);
    }));
}

for (
  const [caType, responderType] of [["ec-p256", "ed25519"], ["ed25519", "rsa-3072"], [
    "rsa-3072",
    "ec-p384",
  ]] as const
) {
  Deno.test(`… and a delegated ${responderType} responder under a ${caType} CA (certs carries it)`, () =>
    withDir(async (dir) => {
      const ca = await opensslCa(dir, caType);
      const responder = await opensslResponder(dir, ca, caType, responderType);
      await checkWithTools(dir, ca, responder, true);
    }));
}

const PQ_VERIFY = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

for (
  const keyType of [
    "ml-dsa-44",
    "ml-dsa-65",
    "ml-dsa-87",
    "composite-mldsa65-ed25519",
  ] as PqKeyType[]
) {
  Deno.test(`a ${keyType} response verifies with @noble/post-quantum`, () =>
    withDir(async (dir) => {
      const ca = await pqCa(dir, keyType);
      writeIndex(`${dir}/index.txt`);
      const responder = new Responder({
        source: new IndexFileSource(`${dir}/index.txt`),
        issuer: ca.der,
        signer: ca.signer,
      });
      const issuer = parseCertificate(ca.der);
      const nonce = crypto.getRandomValues(new Uint8Array(32));
      const req = encodeOcspRequest({
        certIds: [certIdFor(issuer, Uint8Array.of(0x10, 0x02), "sha256")],
        nonce,
      });
      const parsed = parseOcspResponse(await responder.answer(req));
      const basic = parsed.basic!;
      assert.deepEqual(basic.signatureAlgorithm, SIGNATURE_ALGORITHMS[keyType].algorithmIdentifier);
      // Parameters absent: the AlgorithmIdentifier is SEQUENCE { OID } only.
      const alg = new DerReader(basic.signatureAlgorithm).enter(0x30);
      alg.readOid();
      assert.ok(alg.done);
      assert.deepEqual(basic.nonce, nonce);
      assert.equal(basic.singles[0].certStatus.status, "revoked");
      if (keyType === "composite-mldsa65-ed25519") {
        // draft-19 verification (ML-DSA-65 part with the label as context, Ed25519 part), by noble
        // and WebCrypto; and each part by itself fails on a changed tbs.
        const ok = await verifyIndependently(
          { keyType, publicKeyRaw: ca.publicKey!, publicKeySpki: undefined },
          basic.tbs,
          basic.signature,
        );
        assert.ok(ok.ok, ok.verifier);
        const tampered = basic.tbs.slice();
        tampered[tampered.length - 1] ^= 1;
        assert.equal(
          (await verifyIndependently(
            { keyType, publicKeyRaw: ca.publicKey! },
            tampered,
            basic.signature,
          )).ok,
          false,
        );
      } else {
        assert.ok(PQ_VERIFY[keyType].verify(basic.signature, basic.tbs, ca.publicKey!));
        const tampered = basic.tbs.slice();
        tampered[10] ^= 1;
        assert.equal(PQ_VERIFY[keyType].verify(basic.signature, tampered, ca.publicKey!), false);
      }
    }));
}
