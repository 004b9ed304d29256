/**
 * Digest mode (X-SVC-Digest) on POST /sign and POST /verify, by raw HTTP over the daemon's real
 * socket, against SoftHSM2 and against the project's test module: every key type's accepted names
 * signed and checked by an independent verifier against the ORIGINAL message (node:crypto for
 * ECDSA and RSA-PSS, @noble/post-quantum's ml_dsa*.verify over the message for ML-DSA), each
 * refusal, the one 403 for a stranger asking digest mode, /verify's 200 and 422, the audit line of
 * a digest signature and `svcd audit verify`, and GET /token's digest names.
 */
import assert from "node:assert/strict";
import { constants, createHash, createPublicKey, verify as nodeVerify } from "node:crypto";
import { makeTestToken } from "../support/token.ts";
import { startDaemon } from "../support/daemon.ts";
import {
  type ClientResponse,
  encodeRequest,
  rawExchange,
  request,
} from "../support/http_client.ts";
import { type DaemonPublicKey, daemonPublicKeys } from "../support/oracle.ts";
import { readAuditLines, runAuditVerify } from "../support/audit.ts";
import {
  DIGEST_BYTES,
  DIGEST_NAMES,
  digestModeKeys,
  expectedDigestModeKeys,
  KNOWN_DIGESTS,
  ML_DSA,
} from "../support/digest_mode.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
const KEYS = digestModeKeys("k-");
const EXPECTED_KEYS = expectedDigestModeKeys("k-");
const NODE_HASH: Record<string, string> = {
  "sha-256": "sha256",
  "sha-384": "sha384",
  "sha-512": "sha512",
};
const te = new TextEncoder();

/** The digest a client sends: SHA-2 of the message, or μ with an empty context (FIPS 204). */
function digestOf(name: string, message: Uint8Array, publicKeyRaw: Uint8Array): Uint8Array {
  if (name !== "ml-dsa-mu") {
    return new Uint8Array(createHash(NODE_HASH[name]).update(message).digest());
  }
  const shake = () => createHash("shake256", { outputLength: 64 });
  const tr = shake().update(publicKeyRaw).digest();
  return new Uint8Array(shake().update(tr).update(Uint8Array.of(0, 0)).update(message).digest());
}

/** The independent check of a digest-mode signature against the original message. */
function verifiesOverMessage(
  keyType: string,
  name: string,
  pub: DaemonPublicKey,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  if (keyType in ML_DSA) {
    return ML_DSA[keyType as keyof typeof ML_DSA].verify(signature, message, pub.raw);
  }
  const key = createPublicKey({ key: Buffer.from(pub.spki!), format: "der", type: "spki" });
  if (keyType === "rsa-3072") {
    return nodeVerify(NODE_HASH[name], message, {
      key,
      padding: constants.RSA_PKCS1_PSS_PADDING,
      saltLength: DIGEST_BYTES[name],
    }, signature);
  }
  if (keyType === "rsa-3072-pkcs1v15") {
    return nodeVerify(NODE_HASH[name], message, {
      key,
      padding: constants.RSA_PKCS1_PADDING,
    }, signature);
  }
  return nodeVerify(NODE_HASH[name], message, { key, dsaEncoding: "ieee-p1363" }, signature);
}

function signHeaders(subject: string, key: string, digest?: string[]): [string, string][] {
  return [
    ["X-SVC-Client-Subject", subject],
    ["X-SVC-Key", key],
    ...(digest ?? []).map((d): [string, string] => ["X-SVC-Digest", d]),
  ];
}

function sign(sock: string, subject: string, key: string, body: Uint8Array, ...digest: string[]) {
  return request(sock, {
    method: "POST",
    path: "/sign",
    headers: signHeaders(subject, key, digest),
    body,
  });
}

function verify(
  sock: string,
  subject: string,
  key: string,
  signature: Uint8Array,
  digestValue: Uint8Array,
  ...digest: string[]
) {
  return request(sock, {
    method: "POST",
    path: "/verify",
    headers: [
      ...signHeaders(subject, key, digest),
      ["X-SVC-Signature-Length", String(signature.length)],
    ],
    body: new Uint8Array([...signature, ...digestValue]),
  });
}

/** A digest-mode refusal: 400, problem+json, its own type and title, a detail. */
function assertDigestProblem(res: ClientResponse, slug: string, detail?: RegExp) {
  assert.equal(res.status, 400, res.text());
  assert.equal(res.header("content-type"), "application/problem+json");
  const doc = res.json() as { type: string; title: string; status: number; detail: string };
  assert.equal(doc.type, `urn:svcd:problem:${slug}`);
  assert.equal(doc.status, 400);
  assert.ok(doc.title && doc.title !== "Bad Request", doc.title);
  if (detail) assert.match(doc.detail, detail);
}

/** The raw answer without its Date line (the one thing allowed to differ between two answers). */
function withoutDate(raw: Uint8Array): string {
  return new TextDecoder().decode(raw).replace(/\r\nDate: [^\r]*/i, "");
}

for (const threads of [0, 2]) {
  Deno.test({
    name: `digest mode over the real socket (--threads ${threads})`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async (t) => {
      const token = await makeTestToken({ keys: KEYS });
      const labels = Object.keys(KEYS).filter((l) => token.keys.includes(l));
      assert.deepEqual(labels, EXPECTED_KEYS[token.module.name]);
      const policy = [...labels.map((l) => `${ALICE}\t${l}`), `${BOB}\tk-ed`].join("\n") + "\n";
      // Every refusal counts into the refusal budget, and this test asks for hundreds on purpose.
      const args = ["--threads", String(threads), "--refusal-threshold", "100000"];
      const daemon = await startDaemon({ token, policy, args });
      const sock = daemon.socket;
      const signed: { label: string; name: string; digest: Uint8Array; sig: Uint8Array }[] = [];
      try {
        const publicKeys = await daemonPublicKeys(sock, ALICE);

        await t.step("GET /token lists each key's digest names", async () => {
          const res = await request(sock, {
            path: "/token",
            headers: [["X-SVC-Client-Subject", ALICE]],
          });
          const keys = (res.json() as { keys: { label: string; digests: string[] }[] }).keys;
          for (const label of labels) {
            const listed = keys.find((k) => k.label === label);
            assert.deepEqual(listed?.digests, DIGEST_NAMES[KEYS[label]], label);
          }
        });

        await t.step(
          "/sign: every accepted name verifies against the original message",
          async () => {
            for (const label of labels) {
              const keyType = KEYS[label];
              const pub = publicKeys.get(label)!;
              for (const name of DIGEST_NAMES[keyType]) {
                const message = te.encode(`the original file for ${label} by ${name}`);
                const digest = digestOf(name, message, pub.raw);
                // The name is matched case-insensitively and answered lowercase.
                const res = await sign(sock, ALICE, label, digest, name.toUpperCase());
                assert.equal(res.status, 200, `${label} ${name}: ${res.text()}`);
                assert.equal(res.header("x-svc-digest"), name);
                assert.ok(
                  verifiesOverMessage(keyType, name, pub, message, res.body),
                  `${label} ${name}`,
                );
                assert.equal(
                  verifiesOverMessage(keyType, name, pub, te.encode("another file"), res.body),
                  false,
                );
                signed.push({ label, name, digest, sig: res.body });
              }
            }
            assert.ok(signed.length >= 4);
          },
        );

        await t.step("/verify in digest mode: 200 valid, 422 invalid", async () => {
          for (const { label, name, digest, sig } of signed) {
            const ok = await verify(sock, ALICE, label, sig, digest, name);
            assert.equal(ok.status, 200, `${label} ${name}: ${ok.text()}`);
            const bad = sig.slice();
            bad[bad.length >> 1] ^= 0x10;
            const refused = await verify(sock, ALICE, label, bad, digest, name);
            assert.equal(refused.status, 422, `${label} ${name}`);
            const other = digestOf(name, te.encode("another file"), publicKeys.get(label)!.raw);
            assert.equal((await verify(sock, ALICE, label, sig, other, name)).status, 422);
          }
          // A message-mode signature verifies in digest mode with the message's SHA-256 digest.
          const message = te.encode("signed whole");
          const whole = await sign(sock, ALICE, "k-p256", message);
          const digest = digestOf("sha-256", message, new Uint8Array());
          assert.equal(
            (await verify(sock, ALICE, "k-p256", whole.body, digest, "sha-256")).status,
            200,
          );
        });

        await t.step("digest-unknown: a name nobody knows, or two headers", async () => {
          const listsKnown = new RegExp(KNOWN_DIGESTS.join(", "));
          for (const name of ["sha-1", "sha256", "md5", "", "ml-dsa"]) {
            assertDigestProblem(
              await sign(sock, ALICE, "k-p256", new Uint8Array(32), name),
              "digest-unknown",
              listsKnown,
            );
          }
          assertDigestProblem(
            await sign(sock, ALICE, "k-p256", new Uint8Array(32), "sha-256", "sha-256"),
            "digest-unknown",
            /more than one/i,
          );
          assertDigestProblem(
            await verify(sock, ALICE, "k-p256", new Uint8Array(64), new Uint8Array(32), "sha-3"),
            "digest-unknown",
          );
        });

        await t.step("digest-unsupported: names the key type and what it takes", async () => {
          for (const label of labels) {
            const keyType = KEYS[label];
            for (const name of KNOWN_DIGESTS.filter((n) => !DIGEST_NAMES[keyType].includes(n))) {
              const body = new Uint8Array(DIGEST_BYTES[name]);
              const expected = DIGEST_NAMES[keyType].length === 0
                ? new RegExp(`${keyType} keys take no digest mode`)
                : new RegExp(
                  `${keyType} keys take X-SVC-Digest ${DIGEST_NAMES[keyType].join(", ")}`,
                );
              assertDigestProblem(
                await sign(sock, ALICE, label, body, name),
                "digest-unsupported",
                expected,
              );
              assertDigestProblem(
                await verify(sock, ALICE, label, new Uint8Array(64), body, name),
                "digest-unsupported",
                expected,
              );
            }
          }
        });

        await t.step("digest-length: the body is not the digest's length", async () => {
          for (const label of labels) {
            for (const name of DIGEST_NAMES[KEYS[label]]) {
              const n = DIGEST_BYTES[name];
              for (const wrong of [0, n - 1, n + 1]) {
                const length = new RegExp(`${n} bytes; ${wrong} arrived`);
                assertDigestProblem(
                  await sign(sock, ALICE, label, new Uint8Array(wrong), name),
                  "digest-length",
                  length,
                );
                assertDigestProblem(
                  await verify(sock, ALICE, label, new Uint8Array(64), new Uint8Array(wrong), name),
                  "digest-length",
                  length,
                );
              }
            }
          }
        });

        await t.step(
          "a stranger asking digest mode: one identical 403, byte for byte",
          async () => {
            const ask = (key: string, digest: string, path = "/sign") =>
              rawExchange(
                sock,
                encodeRequest({
                  method: "POST",
                  path,
                  headers: [
                    ...signHeaders(BOB, key, [digest]),
                    ...(path === "/verify"
                      ? [["X-SVC-Signature-Length", "64"] as [string, string]]
                      : []),
                  ],
                  body: new Uint8Array(path === "/verify" ? 64 + 32 : 32),
                }),
              );
            const missing = withoutDate(await ask("no-such-key", "sha-256"));
            assert.match(missing, /^HTTP\/1\.1 403 /);
            for (const label of labels.filter((l) => l !== "k-ed")) {
              // Names the key takes, names it does not, nonsense, wrong lengths: never a hint.
              for (const digest of ["sha-256", "ml-dsa-mu", "sha-1"]) {
                assert.equal(withoutDate(await ask(label, digest)), missing, `${label} ${digest}`);
                assert.equal(withoutDate(await ask(label, digest, "/verify")), missing);
              }
            }
            assert.equal(withoutDate(await ask("no-such-key", "sha-1", "/verify")), missing);
          },
        );
      } finally {
        assert.equal(await daemon.stop(), 0, daemon.stderr());
      }
      try {
        await t.step(
          "the audit line of a digest signature names the mode and carries the digest",
          async () => {
            const lines = (await readAuditLines(daemon.auditDir)).filter((l) => l.event === "sign");
            for (const { label, name, digest, sig } of signed) {
              const sigHex = new Uint8Array(createHash("sha256").update(sig).digest()).toHex();
              const line = lines.find((l) => l.signature_sha256 === sigHex);
              assert.ok(line, `${label} ${name}: no audit line`);
              assert.equal(line.actor, ALICE);
              assert.equal(line.key, label);
              assert.equal(line.mode, "digest");
              assert.equal(line.digest, name);
              assert.equal(line.digest_value, digest.toHex());
              assert.equal(line.message_sha256, undefined);
            }
            const verified = await runAuditVerify(token, daemon.auditDir);
            assert.equal(verified.code, 0, verified.stdout + verified.stderr);
          },
        );
      } finally {
        await token.cleanup();
      }
    },
  });
}
