/**
 * The artifact an appliance ships: `make deb` builds it, and the packaged daemon (bundled JavaScript
 * on the packaged runtime, with the wrapper's narrow permissions) signs, writes a verifiable audit
 * log, and its systemd unit passes `systemd-analyze verify`.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { verifyIndependently } from "./support/oracle.ts";
import { runCommand } from "./support/command.ts";
import {
  certIdFor,
  encodeOcspRequest,
  parseOcspResponse,
  readCertificates,
} from "../lib/ocsp/mod.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const te = new TextEncoder();

function run(cmd: string[], env: Record<string, string> = {}) {
  return runCommand(cmd[0], cmd.slice(1), { env, cwd: ROOT });
}

Deno.test({
  name: "packaging: the Debian package's daemon serves, audits and verifies; its unit verifies",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const build = await run(["bash", "packaging/build-deb.sh"]);
    assert.equal(build.code, 0, build.text);
    const deb = /deb: (\S+\.deb)/.exec(build.text)?.[1];
    assert.ok(deb, build.text);
    const root = await Deno.makeTempDir({ prefix: "svcd-deb-" });
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    try {
      assert.equal((await run(["dpkg-deb", "-x", deb, root])).code, 0);
      // The wrapper names /usr/lib/svcd; point it at the unpacked tree, nothing else changes.
      const wrapper = `${root}/usr/bin/svcd`;
      const text = await Deno.readTextFile(wrapper);
      await Deno.writeTextFile(wrapper, text.replaceAll("/usr/lib/svcd/", `${root}/usr/lib/svcd/`));

      await t.step("control file, conffiles and the files an operator expects", async () => {
        const info = await run(["dpkg-deb", "-I", deb]);
        assert.match(info.text, /Package: svcd/);
        assert.match(info.text, /Depends: .*systemd \(>= 250\)/);
        for (
          const f of [
            "usr/bin/svcd",
            "usr/lib/svcd/svcd.js",
            "usr/lib/svcd/deno",
            "usr/lib/systemd/system/svcd.service",
            "etc/svcd/policy",
            "usr/share/doc/svcd/nginx-svcd.conf",
          ]
        ) await Deno.stat(`${root}/${f}`);
        const conffiles = await run(["dpkg-deb", "-e", deb, `${root}/DEBIAN`]);
        assert.equal(conffiles.code, 0);
        assert.match(await Deno.readTextFile(`${root}/DEBIAN/conffiles`), /\/etc\/svcd\/policy/);
      });

      await t.step("systemd-analyze verify accepts the unit", async () => {
        const unit = (await Deno.readTextFile(`${root}/usr/lib/systemd/system/svcd.service`))
          .replaceAll("/usr/bin/svcd", wrapper);
        await Deno.writeTextFile(`${root}/svcd.service`, unit);
        assert.match(unit, /LoadCredentialEncrypted=svc-pin:/);
        assert.match(unit, /LimitNOFILE=4096/);
        const v = await run(["systemd-analyze", "verify", `${root}/svcd.service`]);
        assert.equal(v.code, 0, v.text);
      });

      await t.step(
        "the packaged daemon signs and its audit log verifies with the packaged tool",
        async () => {
          const subject = "CN=pkg,O=Example,C=DE";
          const daemon = await startDaemon({
            token,
            policy: `${subject}\tk-ec\n`,
            command: [wrapper, "serve"],
          });
          try {
            const message = te.encode("from the package");
            const res = await request(daemon.socket, {
              method: "POST",
              path: "/sign",
              headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k-ec"]],
              body: message,
            });
            assert.equal(res.status, 200, res.text());
            const view = (await request(daemon.socket, {
              path: "/token",
              headers: [["X-SVC-Client-Subject", subject]],
            })).json() as { keys: Array<{ public_key: string; public_key_raw: string }> };
            const pub = {
              raw: Uint8Array.fromBase64(view.keys[0].public_key_raw),
              spki: Uint8Array.fromBase64(view.keys[0].public_key),
            };
            assert.ok(await verifyIndependently("ec-p256", pub, message, res.body));
          } finally {
            assert.equal(await daemon.stop(), 0);
          }
          const verify = await run([
            wrapper,
            "audit",
            "verify",
            "--module",
            token.modulePath,
            "--token",
            token.tokenLabel,
            "--dir",
            `${daemon.workDir}/audit`,
          ], { ...token.env, CREDENTIALS_DIRECTORY: token.credentialsDir });
          assert.equal(verify.code, 0, verify.text);
        },
      );

      await t.step(
        "the packaged CA tool and the public listener's bundled Worker answer OCSP",
        async () => {
          const caDir = `${root}/ca`;
          const env = { ...token.env, CREDENTIALS_DIRECTORY: token.credentialsDir };
          const common = [
            "--ca-dir",
            caDir,
            "--module",
            token.modulePath,
            "--token",
            token.tokenLabel,
          ];
          const init = await run(
            [wrapper, "ca", "init", ...common, "--key-label", "ca", "--key-type", "ec-p256"],
            env,
          );
          assert.equal(init.code, 0, init.text);
          const workDir = await Deno.makeTempDir({ prefix: "svcd-deb-public-" });
          const daemon = await startDaemon({
            token,
            workDir,
            policy: "",
            command: [wrapper, "serve"],
            args: [
              "--public-socket",
              `${workDir}/public.sock`,
              "--revocation-db",
              `${caDir}/index.txt`,
              "--ocsp-label",
              "ca",
              "--ca-cert",
              `${caDir}/ca.pem`,
            ],
          });
          try {
            const certs = await request(`${workDir}/public.sock`, { path: "/certificates" });
            assert.equal(certs.status, 200);
            assert.deepEqual(certs.body, await Deno.readFile(`${caDir}/ca.pem`));
            const issuer = readCertificates(certs.body)[0];
            const res = await request(`${workDir}/public.sock`, {
              method: "POST",
              path: "/ocsp",
              body: encodeOcspRequest({ certIds: [certIdFor(issuer, Uint8Array.of(0x7f))] }),
            });
            assert.equal(res.status, 200);
            const parsed = parseOcspResponse(res.body);
            assert.equal(parsed.basic?.singles[0].certStatus.status, "unknown");
          } finally {
            assert.equal(await daemon.stop(), 0);
            await Deno.remove(workDir, { recursive: true });
          }
        },
      );
    } finally {
      await Deno.remove(root, { recursive: true });
      await token.cleanup();
    }
  },
});
