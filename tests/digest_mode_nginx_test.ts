/**
 * Digest mode through the real proxy: curl with a client certificate, TLS and Debian's nginx with
 * the packaged example configuration, in front of the daemon (--proxy-uid 33). The file's digest
 * is made by openssl, sent with X-SVC-Digest, and the signature checked by `openssl dgst -verify`
 * (RSA-PSS) and node:crypto (ECDSA) against the ORIGINAL file; a refusal arrives as its problem,
 * and a stranger asking digest mode gets the one 403 for an existing and a missing key.
 */
import assert from "node:assert/strict";
import { createPublicKey, verify as nodeVerify } from "node:crypto";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makePki } from "./support/pki.ts";
import { curlNginx, startNginx, type TestNginx } from "./support/nginx.ts";
import { makeTestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";

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
      const workDir = `${dir}/daemon`;
      await Deno.mkdir(workDir);
      await Deno.chown(workDir, 0, WWW_DATA);
      await Deno.chmod(workDir, 0o2750);
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
        const ask = (key: string) =>
          curlNginx(
            proxy,
            pki,
            bob,
            "/sign",
            [["X-SVC-Key", key], ["X-SVC-Digest", "sha-256"]],
            new Uint8Array(32),
          );
        const existing = await ask("alice-ec");
        const missing = await ask("no-such-key");
        assert.equal(existing.status, 403);
        assert.deepEqual(existing.body, missing.body);
      });
    } finally {
      await nginx?.stop();
      if (daemon) await daemon.stop();
      await token.cleanup();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
