/**
 * Digest mode through the real proxy, on this run's module (SoftHSM2, then svcmod): curl with a
 * client certificate, TLS and Debian's nginx with the packaged example configuration, in front of
 * the daemon (--proxy-uid 33). For every key type the module offers and every digest name it
 * takes, the digest is made outside the daemon (openssl for SHA-2; μ from the public key and the
 * file, empty context) and sent with X-SVC-Digest, and the signature is checked against the
 * ORIGINAL file by a verifier the project did not write: `openssl dgst -verify` (ECDSA, RSA-PSS, RSA PKCS #1 v1.5) or
 * @noble/post-quantum's ml_dsa*.verify over the file (ML-DSA). Each refusal (digest-unknown,
 * digest-length, digest-unsupported) arrives through nginx as its problem, and a stranger asking
 * digest mode gets the one 403 for an existing and a missing key, byte for byte, on /sign and
 * /verify. Then svcmod without CKM_ML_DSA_EXTERNAL_MU (SVCMOD_HIDE_MECHANISMS=0x403c): its ML-DSA
 * key lists no digest names and ml-dsa-mu gets `digest-unsupported` naming the mechanism.
 */
import assert from "node:assert/strict";
import * as asn1js from "asn1js";
import { moduleTempDir } from "../support/temp_dir.ts";
import { makePki, type Pki } from "../support/pki.ts";
import { curlNginx, curlTlsArgs, startNginx, type TestNginx } from "../support/nginx.ts";
import { makeTestToken, type TestToken } from "../support/token.ts";
import { selectedModuleName } from "../support/modules.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "../support/daemon.ts";
import { type TokenKey, writeSpkiPem } from "../support/oracle.ts";
import {
  DIGEST_BYTES,
  DIGEST_NAMES,
  digestModeKeys,
  expectedDigestModeKeys,
  KNOWN_DIGESTS,
  ML_DSA,
  SHA2,
} from "../support/digest_mode.ts";
import { muHasher } from "../../lib/client/mu.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
const WWW_DATA = 33;
const canRun = Deno.uid() === 0 && await Deno.stat("/usr/sbin/nginx").then(() => true, () => false);

const KEYS = digestModeKeys("alice-");
const EXPECTED_KEYS = expectedDigestModeKeys("alice-");
const td = new TextDecoder();

async function run(
  cmd: string,
  args: string[],
): Promise<{ ok: boolean; out: Uint8Array; err: string }> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return { ok: o.success, out: o.stdout, err: td.decode(o.stderr) };
}

/** The digest of `file` for `name`: openssl's SHA-2, or μ over the raw ML-DSA public key. */
async function digestOf(name: string, file: string, key: TokenKey): Promise<Uint8Array> {
  if (name === "ml-dsa-mu") {
    const h = muHasher(Uint8Array.fromBase64(key.public_key_raw));
    h.update(await Deno.readFile(file));
    return h.digest();
  }
  const out = await run("openssl", ["dgst", `-${name.replace("-", "")}`, "-binary", file]);
  assert.ok(out.ok, out.err);
  assert.equal(out.out.length, DIGEST_BYTES[name]);
  return out.out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** r ‖ s as openssl reads an ECDSA signature: DER, built by asn1js. */
function ecdsaDer(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  const int = (b: Uint8Array) => asn1js.Integer.fromBigInt(BigInt(`0x${b.toHex()}`));
  const seq = new asn1js.Sequence({ value: [int(raw.subarray(0, half)), int(raw.subarray(half))] });
  return new Uint8Array(seq.toBER());
}

/**
 * The independent check of a digest-mode signature over `file`: `openssl dgst -verify` for ECDSA
 * and RSA-PSS (MGF1 and salt length of the digest's hash), noble's plain ML-DSA verify otherwise.
 */
async function verifiesOverFile(
  dir: string,
  key: TokenKey,
  name: string,
  file: string,
  signature: Uint8Array,
): Promise<boolean> {
  if (key.key_type in ML_DSA) {
    const noble = ML_DSA[key.key_type as keyof typeof ML_DSA];
    return noble.verify(
      signature,
      await Deno.readFile(file),
      Uint8Array.fromBase64(key.public_key_raw),
    );
  }
  const pem = `${dir}/${key.label}.pem`;
  await writeSpkiPem(pem, key.public_key!);
  const sig = `${dir}/${key.label}.sig`;
  const rsa = key.key_type.startsWith("rsa-");
  await Deno.writeFile(sig, rsa ? signature : ecdsaDer(signature));
  // openssl dgst's default RSA padding is PKCS #1 v1.5.
  const pss = key.key_type === "rsa-3072"
    ? ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"]
    : [];
  const hash = `-${name.replace("-", "")}`;
  const out = await run("openssl", ["dgst", hash, ...pss, "-verify", pem, "-signature", sig, file]);
  const verified = td.decode(out.out).includes("Verified OK");
  assert.equal(out.ok, verified, out.err);
  return verified;
}

/** A digest-mode refusal through nginx: 400 and its problem type. */
function assertProblem(
  res: { status: number; body: Uint8Array },
  slug: string,
  what: string,
  detail?: RegExp,
): void {
  assert.equal(res.status, 400, `${what}: ${td.decode(res.body)}`);
  const doc = JSON.parse(td.decode(res.body));
  assert.equal(doc.type, `urn:svcd:problem:${slug}`, what);
  if (detail) assert.match(doc.detail, detail, what);
}

/** What a test through nginx is given by `throughNginx`: alice and bob are clients of `pki`. */
interface ThroughNginx {
  dir: string;
  pki: Pki;
  nginx: TestNginx;
  alice: Pki["clients"][number];
  bob: Pki["clients"][number];
}

/**
 * Runs `fn` against the daemon on `token` (--proxy-uid 33) behind nginx, with a PKI of alice and
 * bob, in a fresh folder (`prefix`); then stops both, cleans the token up and removes the folder,
 * whatever happened.
 */
async function throughNginx(
  token: TestToken,
  prefix: string,
  serve: { policy: string; args?: string[] },
  fn: (s: ThroughNginx) => Promise<void>,
): Promise<void> {
  const dir = moduleTempDir(prefix);
  await Deno.chmod(dir, 0o711);
  let daemon: TestDaemon | undefined;
  let nginx: TestNginx | undefined;
  try {
    const pki = await makePki(dir, [ALICE, BOB]);
    const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
    daemon = await startDaemon({ token, workDir, proxyUid: WWW_DATA, ...serve });
    nginx = await startNginx(dir, pki, { authSocket: daemon.socket });
    const [alice, bob] = pki.clients;
    await fn({ dir, pki, nginx, alice, bob });
  } finally {
    await nginx?.stop();
    if (daemon) await daemon.stop();
    await token.cleanup();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name: "digest mode through nginx with TLS and a client certificate: every key type and name",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: KEYS });
    const labels = Object.keys(KEYS).filter((l) => token.keys.includes(l));
    await throughNginx(token, "svcd-digest-nginx-", {
      // Bob holds one key, so his 403s are those of a known subject asking for another's key.
      policy: [...labels.map((l) => `${ALICE}\t${l}`), `${BOB}\talice-ed`].join("\n") + "\n",
      // Every refusal counts into the refusal budget, and this test asks for dozens on purpose.
      args: ["--refusal-threshold", "100000"],
    }, async ({ dir, pki, nginx: proxy, alice, bob }) => {
      assert.deepEqual(labels, EXPECTED_KEYS[token.module.name]);
      const ask = (
        path: string,
        label: string,
        headers: Array<[string, string]>,
        body: Uint8Array,
      ) => curlNginx(proxy, pki, alice, path, [["X-SVC-Key", label], ...headers], body);
      const file = `${dir}/file`;
      await Deno.writeFile(file, new Uint8Array(200_000).map((_, i) => (i * 131 + 7) & 0xff));
      const other = `${dir}/other`;
      await Deno.writeFile(other, (await Deno.readFile(file)).subarray(1));

      const listed = await curlNginx(proxy, pki, alice, "/token", []);
      assert.equal(listed.status, 200, td.decode(listed.body));
      const keys = (JSON.parse(td.decode(listed.body)).keys as TokenKey[])
        .filter((k) => labels.includes(k.label));
      assert.deepEqual(keys.map((k) => k.label), labels);

      await t.step("GET /token lists each key type's digest names", () => {
        for (const key of keys) {
          assert.equal(key.key_type, KEYS[key.label]);
          assert.deepEqual(key.digests, DIGEST_NAMES[key.key_type], key.label);
        }
      });

      await t.step("each name: the signature verifies over the original file", async () => {
        let count = 0;
        for (const key of keys) {
          for (const name of DIGEST_NAMES[key.key_type]) {
            const what = `${key.label} ${name}`;
            const digest = await digestOf(name, file, key);
            const res = await ask("/sign", key.label, [["X-SVC-Digest", name]], digest);
            assert.equal(res.status, 200, `${what}: ${td.decode(res.body)}`);
            assert.ok(await verifiesOverFile(dir, key, name, file, res.body), what);
            assert.equal(await verifiesOverFile(dir, key, name, other, res.body), false, what);
            // The daemon's own check in digest mode: the same signature, then one bit off.
            const length: [string, string] = ["X-SVC-Signature-Length", String(res.body.length)];
            const headers: Array<[string, string]> = [["X-SVC-Digest", name], length];
            const valid = await ask("/verify", key.label, headers, concat(res.body, digest));
            assert.equal(valid.status, 200, what);
            const bad = res.body.slice();
            bad[bad.length >> 1] ^= 0x10;
            const invalid = await ask("/verify", key.label, headers, concat(bad, digest));
            assert.equal(invalid.status, 422, what);
            count++;
          }
        }
        // SoftHSM2: 4 keys × 3 SHA-2 names; svcmod: P-256 × 3 and three ML-DSA keys × μ.
        assert.equal(count, token.module.name === "softhsm" ? 12 : 6);
      });

      await t.step("digest-unknown: a name nobody knows, on /sign and /verify", async () => {
        const listsKnown = new RegExp(KNOWN_DIGESTS.join(", "));
        for (const label of labels) {
          for (const name of ["sha-1", "md5"]) {
            const what = `${label} ${name}`;
            const sign = await ask("/sign", label, [["X-SVC-Digest", name]], new Uint8Array(32));
            assertProblem(sign, "digest-unknown", what, listsKnown);
            const verify = await ask("/verify", label, [
              ["X-SVC-Digest", name],
              ["X-SVC-Signature-Length", "64"],
            ], new Uint8Array(64 + 32));
            assertProblem(verify, "digest-unknown", what, listsKnown);
          }
        }
      });

      await t.step("digest-length: a body not of the digest's length", async () => {
        for (const key of keys) {
          for (const name of DIGEST_NAMES[key.key_type]) {
            const n = DIGEST_BYTES[name];
            for (const wrong of [0, n - 1, n + 1]) {
              const what = `${key.label} ${name} ${wrong}`;
              const length = new RegExp(`${n} bytes; ${wrong} arrived`);
              const headers: Array<[string, string]> = [["X-SVC-Digest", name]];
              const sign = await ask("/sign", key.label, headers, new Uint8Array(wrong));
              assertProblem(sign, "digest-length", what, length);
              const verify = await ask("/verify", key.label, [
                ...headers,
                ["X-SVC-Signature-Length", "64"],
              ], new Uint8Array(64 + wrong));
              assertProblem(verify, "digest-length", what, length);
            }
          }
        }
      });

      await t.step("digest-unsupported: every known name a key type does not take", async () => {
        let count = 0;
        for (const key of keys) {
          const takes = DIGEST_NAMES[key.key_type];
          const expected = takes.length === 0
            ? new RegExp(`${key.key_type} keys take no digest mode`)
            : new RegExp(`${key.key_type} keys take X-SVC-Digest ${takes.join(", ")}`);
          for (const name of KNOWN_DIGESTS.filter((n) => !takes.includes(n))) {
            const what = `${key.label} ${name}`;
            const body = new Uint8Array(DIGEST_BYTES[name]);
            const headers: Array<[string, string]> = [["X-SVC-Digest", name]];
            assertProblem(
              await ask("/sign", key.label, headers, body),
              "digest-unsupported",
              what,
              expected,
            );
            const verify = await ask("/verify", key.label, [
              ...headers,
              ["X-SVC-Signature-Length", "64"],
            ], concat(new Uint8Array(64), body));
            assertProblem(verify, "digest-unsupported", what, expected);
            count++;
          }
        }
        // Ed25519 and the composite take none; EC asked ml-dsa-mu; ML-DSA asked SHA-2.
        assert.ok(labels.includes("alice-ed") && labels.includes("alice-p256"));
        assert.ok(count >= 5);
      });

      await t.step("a stranger asking digest mode: the one 403, byte for byte", async () => {
        const stranger = (path: string, label: string, digest: string) =>
          rawAnswer(proxy, pki, bob, path, [
            ["X-SVC-Key", label],
            ["X-SVC-Digest", digest],
            ...(path === "/verify" ? [["X-SVC-Signature-Length", "64"] as [string, string]] : []),
          ], new Uint8Array(path === "/verify" ? 64 + 32 : 32));
        const missing = await stranger("/sign", "no-such-key", "sha-256");
        assert.match(missing, /^HTTP\/1\.1 403 /);
        for (const path of ["/sign", "/verify"]) {
          assert.equal(await stranger(path, "no-such-key", "sha-256"), missing, path);
          assert.equal(await stranger(path, "no-such-key", "sha-1"), missing, path);
          // Names the key takes, names it does not, nonsense: never a hint of the key or its type.
          for (const label of labels.filter((l) => l !== "alice-ed")) {
            for (const digest of ["sha-256", "ml-dsa-mu", "sha-1"]) {
              assert.equal(
                await stranger(path, label, digest),
                missing,
                `${path} ${label} ${digest}`,
              );
            }
          }
        }
      });
    });
  },
});

/** curl's whole answer (status line, headers, body) without its Date line. */
async function rawAnswer(
  nginx: TestNginx,
  pki: Pick<Pki, "caCert">,
  client: { cert: string; key: string },
  path: string,
  headers: Array<[string, string]>,
  body: Uint8Array,
): Promise<string> {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeFile(`${dir}/in`, body);
    const r = await run("curl", [
      "-sS",
      "-i",
      ...curlTlsArgs(pki.caCert, client),
      ...headers.flatMap(([n, v]) => ["-H", `${n}: ${v}`]),
      "--data-binary",
      `@${dir}/in`,
      `https://localhost:${nginx.port}${path}`,
    ]);
    assert.ok(r.ok, r.err);
    return td.decode(r.out).replace(/\r\nDate: [^\r]*/i, "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "digest mode through nginx: svcmod without CKM_ML_DSA_EXTERNAL_MU",
  // SVCMOD_HIDE_MECHANISMS is svcmod's own hook (read at C_Initialize); SoftHSM2 has no ML-DSA.
  ignore: !canRun || selectedModuleName() !== "svcmod",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const made = await makeTestToken({ keys: { "alice-ml": "ml-dsa-65", "alice-ec": "ec-p256" } });
    const token = { ...made, env: { ...made.env, SVCMOD_HIDE_MECHANISMS: "0x403c" } };
    await throughNginx(token, "svcd-digest-nomu-", {
      policy: `${ALICE}\talice-ml\n${ALICE}\talice-ec\n`,
    }, async ({ pki, nginx: proxy, alice, bob }) => {
      assert.deepEqual(token.keys, ["alice-ml", "alice-ec"]);

      await t.step("GET /token: the ML-DSA key lists no digest names", async () => {
        const listed = await curlNginx(proxy, pki, alice, "/token", []);
        assert.equal(listed.status, 200);
        const keys = JSON.parse(td.decode(listed.body)).keys as {
          label: string;
          digests: string[];
        }[];
        assert.deepEqual(keys.find((k) => k.label === "alice-ml")?.digests, []);
        assert.deepEqual(keys.find((k) => k.label === "alice-ec")?.digests, SHA2);
      });

      await t.step("ml-dsa-mu: digest-unsupported naming the missing mechanism", async () => {
        const asks: Array<[string, Array<[string, string]>, Uint8Array]> = [
          ["/sign", [], new Uint8Array(64)],
          ["/verify", [["X-SVC-Signature-Length", "3309"]], new Uint8Array(3309 + 64)],
        ];
        for (const [path, headers, body] of asks) {
          const res = await curlNginx(proxy, pki, alice, path, [
            ["X-SVC-Key", "alice-ml"],
            ["X-SVC-Digest", "ml-dsa-mu"],
            ...headers,
          ], body);
          assertProblem(res, "digest-unsupported", path, /lacks CKM_ML_DSA_EXTERNAL_MU/);
          assert.match(JSON.parse(td.decode(res.body)).detail, /send the message itself/);
        }
        // Message mode is untouched: the key still signs the message itself.
        const message = new TextEncoder().encode("signed whole");
        const res = await curlNginx(
          proxy,
          pki,
          alice,
          "/sign",
          [["X-SVC-Key", "alice-ml"]],
          message,
        );
        assert.equal(res.status, 200);
        assert.equal(res.body.length, 3309);
      });

      await t.step(
        "a stranger: the one 403, byte for byte, for this key and a missing one",
        async () => {
          const ask = (key: string) =>
            rawAnswer(proxy, pki, bob, "/sign", [
              ["X-SVC-Key", key],
              ["X-SVC-Digest", "ml-dsa-mu"],
            ], new Uint8Array(64));
          const missing = await ask("no-such-key");
          assert.match(missing, /^HTTP\/1\.1 403 /);
          assert.equal(await ask("alice-ml"), missing);
          assert.equal(await ask("alice-ec"), missing);
        },
      );
    });
  },
});
