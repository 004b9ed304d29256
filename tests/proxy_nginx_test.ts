/**
 * The proxy path for real: Debian's nginx with the packaged example configuration
 * (packaging/nginx-svcd.conf), real client certificates, workers running as www-data (uid 33) and
 * the daemon started with --proxy-uid 33. The operator's checks: an owned key signs (200); a client's
 * own X-SVC-Client-Subject is replaced by the proxy's; an unowned and a missing key get the same 403;
 * /verify accepts /sign's signature; the audit line names the subject as actor.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { verifyIndependently } from "./support/oracle.ts";
import { makePki, type Pki, revokeClient } from "./support/pki.ts";
import { curlNginx, startNginx, type TestNginx } from "./support/nginx.ts";
import { makeTestToken } from "./support/token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { readAuditLines } from "./support/audit.ts";
import { makeTestCa, opensslRequest, publicListenerArgs } from "./support/ca.ts";
import {
  certIdFor,
  encodeOcspRequest,
  parseOcspResponse,
  readCertificates,
} from "../lib/ocsp/mod.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
/** A subject with every kind of character nginx escapes, as openssl -subj takes it. */
const DAVE_SLASH = '/C=DE/O=R&D, "Ops"/OU=Zoë <x>;y/CN=#dave ';
const WWW_DATA = 33;

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx");

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "proxy: real nginx with client certificates (the operator's checks)",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({
      keys: {
        "alice-ec": "ec-p256",
        "bob-ec": "ec-p256",
        "ca-ec": "ec-p256",
        "dave-ed": "ed25519",
      },
    });
    const dir = moduleTempDir("svcd-nginx-");
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    try {
      const pki = await makePki(dir, [ALICE, BOB]);
      // dave's certificate comes from `svcd ca issue`; nginx trusts that CA beside the openssl one,
      // and the policy holds the line the tool printed — plus the slash form, granting bob's key.
      const ca = await makeTestCa(token, { keyLabel: "ca-ec", dir: `${dir}/ca` });
      const daveRequest = await opensslRequest(ca.dir, "dave", DAVE_SLASH);
      const dave = await ca.issue(["--csr", daveRequest.request, "--grant", "dave-ed"]);
      await Deno.writeTextFile(pki.caCert, await Deno.readTextFile(ca.caPem), { append: true });
      // The package's layout of /run/svcd: setgid with the proxy's group, so the socket the
      // daemon creates there is the proxy's group's (0660).
      const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: WWW_DATA,
        policy: `${ALICE}\talice-ec\n${BOB}\tbob-ec\n${
          dave.policyLines[0]
        }\n${DAVE_SLASH}\tbob-ec\n`,
        // The public listener behind the example's public server block, over svcd ca's CA.
        args: publicListenerArgs(ca, `${workDir}/public.sock`, "ca-ec"),
      });
      nginx = await startNginx(dir, pki, {
        authSocket: daemon.socket,
        publicSocket: `${workDir}/public.sock`,
      });
      const proxy = nginx;
      const curl = (
        _port: number,
        pki: Pki,
        client: { cert: string; key: string } | undefined,
        path: string,
        headers: Array<[string, string]>,
        body?: Uint8Array,
      ) => curlNginx(proxy, pki, client, path, headers, body);
      const port = proxy.port;
      const alice = pki.clients[0];
      const message = new TextEncoder().encode("signed through nginx");

      await t.step(
        "1: an authorised subject with an owned key gets 200 and a valid signature",
        async () => {
          const res = await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message);
          assert.equal(res.status, 200);
          const token = (await curl(port, pki, alice, "/token", [])).body;
          const key = JSON.parse(new TextDecoder().decode(token)).keys[0];
          const spki = Uint8Array.fromBase64(key.public_key);
          assert.ok(await verifyIndependently("ec-p256", { spki }, message, res.body));
        },
      );

      await t.step(
        "2: a client-sent X-SVC-Client-Subject is replaced by the proxy's value",
        async () => {
          // alice claims to be bob: she must be served as alice, so bob's key is refused...
          const asBob = await curl(port, pki, alice, "/sign", [
            ["X-SVC-Client-Subject", BOB],
            ["X-SVC-Key", "bob-ec"],
          ], message);
          assert.equal(asBob.status, 403);
          // ...and her own key is served (one header arrived, the proxy's).
          const own = await curl(port, pki, alice, "/sign", [
            ["x-svc-client-subject", BOB],
            ["X-SVC-Key", "alice-ec"],
          ], message);
          assert.equal(own.status, 200);
        },
      );

      await t.step(
        "3: a key the subject does not own and a key nobody owns: identical 403",
        async () => {
          const notOwned = await curl(
            port,
            pki,
            alice,
            "/sign",
            [["X-SVC-Key", "bob-ec"]],
            message,
          );
          const nobodys = await curl(
            port,
            pki,
            alice,
            "/sign",
            [["X-SVC-Key", "no-such"]],
            message,
          );
          assert.equal(notOwned.status, 403);
          assert.deepEqual(notOwned.body, nobodys.body);
        },
      );

      await t.step("4: /verify with the signature from /sign returns 200", async () => {
        const sig =
          (await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message)).body;
        const body = new Uint8Array([...sig, ...message]);
        const res = await curl(port, pki, alice, "/verify", [
          ["X-SVC-Key", "alice-ec"],
          ["X-SVC-Signature-Length", String(sig.length)],
        ], body);
        assert.equal(res.status, 200);
      });

      await t.step("5: the audit line of a served request names the subject as actor", async () => {
        const signs = (await readAuditLines(daemon!.auditDir)).filter((l) => l.event === "sign");
        assert.ok(signs.length >= 3);
        for (const line of signs) assert.equal(line.actor, ALICE);
      });

      await t.step(
        "an unverified or missing certificate gets 403 from the proxy",
        async () => {
          const before = (await readAuditLines(daemon!.auditDir)).length;
          assert.equal(
            (await curl(port, pki, pki.rogue, "/sign", [["X-SVC-Key", "alice-ec"]], message))
              .status,
            403,
          );
          assert.equal(
            (await curl(port, pki, undefined, "/sign", [["X-SVC-Key", "alice-ec"]], message))
              .status,
            403,
          );
          assert.equal((await readAuditLines(daemon!.auditDir)).length, before);
        },
      );

      await t.step(
        "revocation: a revoked client certificate is refused by nginx (ssl_crl) with 403",
        async () => {
          const bob = pki.clients[1];
          const before = (await readAuditLines(daemon!.auditDir)).length;
          const own = () => curl(port, pki, bob, "/sign", [["X-SVC-Key", "bob-ec"]], message);
          assert.equal((await own()).status, 200);
          await revokeClient(pki, bob.cert);
          await proxy.reload();
          assert.equal((await own()).status, 403);
          // alice's certificate from the same CA still works
          const alive = await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message);
          assert.equal(alive.status, 200);
          const signs = (await readAuditLines(daemon!.auditDir)).slice(before)
            .filter((l) => l.event === "sign").map((l) => l.actor);
          assert.deepEqual(signs, [BOB, ALICE], "the revoked request reached the daemon");
        },
      );

      await t.step("a peer that is not the proxy uid is never served", async () => {
        const res = await request(daemon!.socket, {
          method: "POST",
          path: "/sign",
          headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "alice-ec"]],
          body: message,
        });
        assert.equal(res.status, 0, "the daemon closed the connection without a byte");
      });

      // nginx's ssl_crl file holds one CRL per trusted CA: the openssl CA's (as the revocation
      // step left it) and the one `svcd ca crl` signs for dave's CA.
      const opensslCrl = await Deno.readTextFile(pki.crl);
      const publishSvcdCrl = async () => {
        const r = await ca.run("crl");
        assert.equal(r.code, 0, r.text);
        await Deno.writeTextFile(
          pki.crl,
          opensslCrl + await Deno.readTextFile(`${ca.dir}/crl.pem`),
        );
        await proxy.reload();
      };
      const daveClient = { cert: dave.path, key: daveRequest.key };
      const daveSigns = (key: string) =>
        curl(port, pki, daveClient, "/sign", [["X-SVC-Key", key]], message);

      await t.step(
        "svcd ca issue: with the shipped ssl_crl and svcd ca's CRL, the policy line it printed matches what nginx passes; the slash form never does",
        async () => {
          await publishSvcdCrl();
          assert.equal((await daveSigns("dave-ed")).status, 200);
          assert.equal((await daveSigns("bob-ec")).status, 403, "the slash form matched");
          const signs = (await readAuditLines(daemon!.auditDir)).filter((l) => l.event === "sign");
          assert.equal(signs.at(-1)!.actor, dave.nginxSubject);
          assert.equal(
            dave.nginxSubject,
            'CN=\\#dave\\ ,OU=Zo\\C3\\AB \\<x\\>\\;y,O=R&D\\, \\"Ops\\",C=DE',
          );
        },
      );

      await t.step(
        "the example's public server block: /certificates and POST /ocsp through nginx, GET /ocsp 405, /sign 404",
        async () => {
          const base = `http://127.0.0.1:${proxy.publicPort}`;
          const certs = await fetch(`${base}/certificates`);
          assert.equal(certs.status, 200);
          assert.equal(certs.headers.get("content-type"), "application/pem-certificate-chain");
          const pem = new Uint8Array(await certs.arrayBuffer());
          const issuer = readCertificates(pem)[0];
          assert.deepEqual(issuer.der, readCertificates(await Deno.readFile(ca.caPem))[0].der);
          const daveCert = readCertificates(await Deno.readFile(dave.path))[0];
          const nonce = crypto.getRandomValues(new Uint8Array(16));
          const ocsp = await fetch(`${base}/ocsp`, {
            method: "POST",
            headers: { "Content-Type": "application/ocsp-request" },
            body: encodeOcspRequest({
              certIds: [certIdFor(issuer, daveCert.serial)],
              nonce,
            }) as BufferSource,
          });
          assert.equal(ocsp.status, 200);
          assert.equal(ocsp.headers.get("cache-control"), null);
          const answer = parseOcspResponse(new Uint8Array(await ocsp.arrayBuffer()));
          assert.equal(answer.basic?.singles[0].certStatus.status, "good");
          assert.deepEqual(answer.basic?.nonce, nonce);
          const get = await fetch(`${base}/ocsp`);
          await get.body?.cancel();
          assert.equal(get.status, 405);
          assert.equal(get.headers.get("allow"), "POST");
          const sign = await fetch(`${base}/sign`, {
            method: "POST",
            headers: { "X-SVC-Client-Subject": ALICE, "X-SVC-Key": "alice-ec" },
            body: "anonymous",
          });
          await sign.body?.cancel();
          assert.equal(sign.status, 404);
        },
      );

      await t.step(
        "svcd ca revoke + svcd ca crl + nginx reload: the revoked client gets 403 from nginx, others 200",
        async () => {
          const before = (await readAuditLines(daemon!.auditDir)).length;
          const r = await ca.run("revoke", [dave.serial, "--reason", "keyCompromise"]);
          assert.equal(r.code, 0, r.text);
          await publishSvcdCrl();
          assert.equal((await daveSigns("dave-ed")).status, 403);
          const alive = await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message);
          assert.equal(alive.status, 200);
          const actors = (await readAuditLines(daemon!.auditDir)).slice(before)
            .filter((l) => l.event === "sign").map((l) => l.actor);
          assert.deepEqual(actors, [ALICE], "the revoked client's request reached the daemon");
        },
      );
    } finally {
      await nginx?.stop();
      await daemon?.stop();
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});
