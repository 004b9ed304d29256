/**
 * Digest mode through the real proxy: curl with a client certificate, TLS and Debian's nginx with
 * the packaged example configuration, in front of the daemon (--proxy-uid 33). The file's digest
 * is made by openssl, sent with X-SVC-Digest, and the signature checked by `openssl dgst -verify`
 * (RSA-PSS) and node:crypto (ECDSA) against the ORIGINAL file; a refusal arrives as its problem,
 * and a stranger asking digest mode gets the one 403 for an existing and a missing key, byte for
 * byte. Then the test module without CKM_ML_DSA_EXTERNAL_MU (SVCMOD_HIDE_MECHANISMS=0x403c): its
 * ML-DSA key lists no digest names and ml-dsa-mu gets `digest-unsupported` naming the mechanism.
 */
import assert from "node:assert/strict";
import { createPublicKey, verify as nodeVerify } from "node:crypto";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makePki } from "./support/pki.ts";
import { curlNginx, startNginx, type TestNginx } from "./support/nginx.ts";
import { makeTestToken } from "./support/token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./support/daemon.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
const WWW_DATA = 33;
const canRun = Deno.uid() === 0 && await Deno.stat("/usr/sbin/nginx").then(() => true, () => false);

async function run(
  cmd: string,
  args: string[],
): Promise<{ ok: boolean; out: Uint8Array; err: string }> {
  const o = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  return { ok: o.success, out: o.stdout, err: new TextDecoder().decode(o.stderr) };
}

Deno.test({
  name: "digest mode through nginx with TLS and a client certificate",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { "alice-ec": "ec-p256", "alice-rsa": "rsa-3072" } });
    const dir = moduleTempDir("svcd-digest-nginx-");
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    try {
      const labels = ["alice-ec", "alice-rsa"].filter((l) => token.keys.includes(l));
      assert.ok(labels.includes("alice-ec"));
      const pki = await makePki(dir, [ALICE, BOB]);
      const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: WWW_DATA,
        policy: labels.map((l) => `${ALICE}\t${l}\n`).join(""),
      });
      nginx = await startNginx(dir, pki, { authSocket: daemon.socket });
      const proxy = nginx;
      const [alice, bob] = pki.clients;
      const file = `${dir}/file`;
      await Deno.writeFile(file, new Uint8Array(200_000).map((_, i) => (i * 131 + 7) & 0xff));
      const original = await Deno.readFile(file);
      const listed = await curlNginx(proxy, pki, alice, "/token", []);
      const keys = JSON.parse(new TextDecoder().decode(listed.body)).keys as {
        label: string;
        public_key: string;
        digests: string[];
      }[];

      assert.deepEqual(keys.map((k) => k.label), labels);
      await t.step("each SHA-2 name: the signature verifies over the original file", async () => {
        for (const key of keys) {
          assert.deepEqual(key.digests, ["sha-256", "sha-384", "sha-512"], key.label);
          const spki = Uint8Array.fromBase64(key.public_key);
          const publicKey = createPublicKey({
            key: Buffer.from(spki),
            format: "der",
            type: "spki",
          });
          const pem = `${dir}/${key.label}.pem`;
          await Deno.writeTextFile(
            pem,
            publicKey.export({ format: "pem", type: "spki" }) as string,
          );
          for (const bits of ["256", "384", "512"]) {
            const digest = await run("openssl", ["dgst", `-sha${bits}`, "-binary", file]);
            assert.ok(digest.ok, digest.err);
            const res = await curlNginx(proxy, pki, alice, "/sign", [
              ["X-SVC-Key", key.label],
              ["X-SVC-Digest", `SHA-${bits}`],
            ], digest.out);
            assert.equal(res.status, 200, new TextDecoder().decode(res.body));
            if (key.label === "alice-rsa") {
              const sig = `${dir}/sig`;
              await Deno.writeFile(sig, res.body);
              const pss = ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest"];
              const ok = await run("openssl", [
                "dgst",
                `-sha${bits}`,
                ...pss,
                "-verify",
                pem,
                "-signature",
                sig,
                file,
              ]);
              assert.ok(ok.ok && new TextDecoder().decode(ok.out).includes("Verified OK"), ok.err);
            } else {
              const opts = { key: publicKey, dsaEncoding: "ieee-p1363" as const };
              assert.ok(nodeVerify(`sha${bits}`, original, opts, res.body), `sha${bits}`);
              assert.equal(nodeVerify(`sha${bits}`, original.subarray(1), opts, res.body), false);
            }
          }
        }
      });

      await t.step("a refusal arrives as its problem; a stranger gets the one 403", async () => {
        const mu = await curlNginx(proxy, pki, alice, "/sign", [
          ["X-SVC-Key", "alice-ec"],
          ["X-SVC-Digest", "ml-dsa-mu"],
        ], new Uint8Array(64));
        assert.equal(mu.status, 400);
        const doc = JSON.parse(new TextDecoder().decode(mu.body));
        assert.equal(doc.type, "urn:svcd:problem:digest-unsupported");
        // Byte for byte (bar the Date line): nothing tells the stranger that the key exists.
        const ask = (key: string) =>
          rawAnswer(proxy, pki, bob, "/sign", [
            ["X-SVC-Key", key],
            ["X-SVC-Digest", "sha-256"],
          ], new Uint8Array(32));
        const missing = await ask("no-such-key");
        assert.match(missing, /^HTTP\/1\.1 403 /);
        assert.equal(await ask("alice-ec"), missing);
      });
    } finally {
      await nginx?.stop();
      if (daemon) await daemon.stop();
      await token.cleanup();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

/** curl's whole answer (status line, headers, body) without its Date line. */
async function rawAnswer(
  nginx: TestNginx,
  pki: { caCert: string },
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
      "--cacert",
      pki.caCert,
      "--cert",
      client.cert,
      "--key",
      client.key,
      ...headers.flatMap(([n, v]) => ["-H", `${n}: ${v}`]),
      "--data-binary",
      `@${dir}/in`,
      `https://localhost:${nginx.port}${path}`,
    ]);
    assert.ok(r.ok, r.err);
    return new TextDecoder().decode(r.out).replace(/\r\nDate: [^\r]*/i, "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name: "digest mode through nginx: a module without CKM_ML_DSA_EXTERNAL_MU",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    // The test module with the mechanism hidden (SVCMOD_HIDE_MECHANISMS, read at C_Initialize).
    const made = await makeTestToken({
      keys: { "alice-ml": "ml-dsa-65", "alice-ec": "ec-p256" },
      module: "svcmod",
    });
    const token = { ...made, env: { ...made.env, SVCMOD_HIDE_MECHANISMS: "0x403c" } };
    const dir = moduleTempDir("svcd-digest-nomu-");
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    try {
      assert.deepEqual(token.keys, ["alice-ml", "alice-ec"]);
      const pki = await makePki(dir, [ALICE, BOB]);
      const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: WWW_DATA,
        policy: `${ALICE}\talice-ml\n${ALICE}\talice-ec\n`,
      });
      nginx = await startNginx(dir, pki, { authSocket: daemon.socket });
      const proxy = nginx;
      const [alice, bob] = pki.clients;

      await t.step("GET /token: the ML-DSA key lists no digest names", async () => {
        const listed = await curlNginx(proxy, pki, alice, "/token", []);
        assert.equal(listed.status, 200);
        const keys = JSON.parse(new TextDecoder().decode(listed.body)).keys as {
          label: string;
          digests: string[];
        }[];
        assert.deepEqual(keys.find((k) => k.label === "alice-ml")?.digests, []);
        assert.deepEqual(keys.find((k) => k.label === "alice-ec")?.digests, [
          "sha-256",
          "sha-384",
          "sha-512",
        ]);
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
          assert.equal(res.status, 400, path);
          const doc = JSON.parse(new TextDecoder().decode(res.body));
          assert.equal(doc.type, "urn:svcd:problem:digest-unsupported");
          assert.match(doc.detail, /lacks CKM_ML_DSA_EXTERNAL_MU/);
          assert.match(doc.detail, /send the message itself/);
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
    } finally {
      await nginx?.stop();
      if (daemon) await daemon.stop();
      await token.cleanup();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
