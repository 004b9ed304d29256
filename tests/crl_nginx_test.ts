/**
 * Revocation as relying parties and the proxy find it, through real nginx (Debian's, with the
 * packaged example, packaging/nginx-svcd.conf) in front of `svcd serve --ca-dir`, for a CA made by
 * `svcd ca` whose recorded URLs are the ones this nginx serves:
 *
 * - `openssl ocsp -url` with the OCSP URL openssl reads from a certificate's AIA (a POST: the
 *   example's /ocsp goes to svcd, which answers GET with 405) gets a verified answer, good and
 *   revoked; the CRL Distribution Point and the CA issuers URL fetched through nginx are the served
 *   CRL and the CA certificate.
 * - With client certificates: after `svcd ca revoke` the revoked client's next requests are refused
 *   by nginx within the stated bound (5 s; the measured time is printed), a good client is served
 *   throughout, and nobody acts after the revoke: the daemon re-signs full.pem, and the package's
 *   path unit reloads nginx. systemd is not PID 1 here, so tests/support/crl_path_unit.ts stands
 *   in for svcd-crl.path and svcd-crl-reload.service, reading PathChanged= and ExecStart= from the
 *   shipped files and doing what systemd does with them (watch the file, `nginx -s reload`).
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makePki } from "./support/pki.ts";
import { curlNginx, freeNginxPorts, startNginx, type TestNginx } from "./support/nginx.ts";
import { makeTestToken } from "./support/token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type Issued, makeTestCa, openssl, opensslRequest } from "./support/ca.ts";
import { checkCrl, pythonPointers, verifyWithCrl } from "./support/crl_check.ts";
import { startCrlPathUnit } from "./support/crl_path_unit.ts";
import { request } from "./support/http_client.ts";
import { runCommand } from "./support/command.ts";

const WWW_DATA = 33;
/** The bound within which a revocation takes effect (docs/api.md, docs/operations.md). */
const REVOCATION_BOUND_MS = 5_000;
/** Failure guard only: nginx's old workers are gone well before this after a reload. */
const RELOAD_DONE_MS = 10_000;
const PARTITIONS = 2;

const canRun = Deno.uid() === 0 && await Deno.stat("/usr/sbin/nginx").then(() => true, () => false);

/** A client: its certificate from `svcd ca issue`, its key from openssl. */
interface Client {
  issued: Issued;
  cert: string;
  key: string;
}

Deno.test({
  name:
    "crl through nginx: the AIA's OCSP URL answers openssl ocsp (POST), verified; after svcd ca revoke nginx refuses the client within the bound, nobody acting, a good client served throughout",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const dir = moduleTempDir("svcd-crl-nginx-");
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    try {
      // The public URLs are this nginx's public server: its port is chosen first.
      const ports = freeNginxPorts();
      const base = `http://127.0.0.1:${ports.publicPort}`;
      const ca = await makeTestCa(token, {
        keyLabel: "ca",
        keyType: "ec-p256",
        subject: "CN=CRL nginx CA,O=Example,C=DE",
        dir: `${dir}/ca`,
      });
      const recorded = await ca.run("urls", [
        ...["--ocsp-url", `${base}/ocsp`, "--crl-url", `${base}/crl`],
        ...["--crl-partitions", String(PARTITIONS), "--ca-issuers-url", `${base}/certificates`],
      ]);
      assert.equal(recorded.code, 0, recorded.text);
      const issue = async (name: string): Promise<Client> => {
        const req = await opensslRequest(ca.dir, name, `/C=DE/O=Example/CN=${name}`);
        const issued = await ca.issue(["--csr", req.request, "--grant", "k"]);
        return { issued, cert: issued.path, key: req.key };
      };
      const alice = await issue("alice"), bob = await issue("bob"), carol = await issue("carol");
      // carol is revoked before the daemon starts: its first CRLs list her.
      const early = await ca.run("revoke", [carol.issued.serial, "--reason", "keyCompromise"]);
      assert.equal(early.code, 0, early.text);

      const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
      const publicSocket = `${workDir}/public.sock`;
      const crlDir = `${dir}/crl`;
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: WWW_DATA,
        policy: [alice, bob, carol].map((c) => `${c.issued.policyLines[0]}\n`).join(""),
        args: [
          ...["--public-socket", publicSocket, "--ca-dir", ca.dir, "--ca-cert", ca.caPem],
          ...["--ocsp-label", "ca"],
          ...["--crl-dir", crlDir, "--syslog-socket", "none"],
        ],
      });
      // nginx trusts svcd ca's CA for clients and reads the daemon's full.pem as its ssl_crl; its
      // server certificate comes from the openssl test PKI.
      const pki = await makePki(dir, []);
      nginx = await startNginx(
        dir,
        { ...pki, caCert: ca.caPem, crl: `${crlDir}/full.pem` },
        { authSocket: daemon.socket, publicSocket },
        undefined,
        "1",
        ports,
      );
      const proxy = nginx;
      const sign = (client: Client) =>
        curlNginx(proxy, { caCert: pki.caCert }, client, "/sign", [["X-SVC-Key", "k"]], body);
      const body = new TextEncoder().encode("signed through nginx, checked against the CRL");

      await t.step(
        "the AIA's OCSP URL: openssl ocsp -url (POST) through nginx, verified, good and revoked",
        async () => {
          const ocspUrl = (await openssl(["x509", "-in", alice.cert, "-noout", "-ocsp_uri"]))
            .trim();
          assert.equal(ocspUrl, `${base}/ocsp`);
          for (const [client, status] of [[alice, "good"], [carol, "revoked"]] as const) {
            const r = await runCommand("openssl", [
              "ocsp",
              ...["-issuer", ca.caPem, "-cert", client.cert, "-CAfile", ca.caPem],
              ...["-url", ocspUrl, "-nonce"],
            ]);
            assert.equal(r.code, 0, r.text);
            assert.match(r.text, /Response verify OK/);
            assert.match(r.stdout, new RegExp(`${client.cert}: ${status}\\b`));
          }
          // What openssl reached is svcd's POST-only responder behind nginx.
          const get = await fetch(`${base}/ocsp`);
          await get.body?.cancel();
          assert.equal(get.status, 405);
        },
      );

      await t.step(
        "the CDP and CA issuers URLs through nginx: the served CRL and the CA certificate",
        async () => {
          for (const client of [alice, carol]) {
            const [cdp] = (await pythonPointers(client.cert)).crl;
            const k = Number(BigInt("0x" + client.issued.serial) % BigInt(PARTITIONS));
            assert.equal(cdp, `${base}/crl/${k}.crl`);
            const res = await fetch(cdp);
            assert.equal(res.status, 200);
            assert.equal(res.headers.get("content-type"), "application/pkix-crl");
            const der = new Uint8Array(await res.arrayBuffer());
            assert.deepEqual(der, (await request(publicSocket, { path: `/crl/${k}.crl` })).body);
            const read = await checkCrl(ca.caPem, der, dir);
            assert.deepEqual(read.idp, { uri: cdp, critical: true });
            const verdict = await verifyWithCrl(ca.caPem, client.cert, der, dir);
            assert.equal(verdict, client === carol ? "revoked" : "ok");
          }
          const [issuers] = (await pythonPointers(alice.cert)).caIssuers;
          assert.equal(issuers, `${base}/certificates`);
          const chain = await (await fetch(issuers)).text();
          assert.equal(chain.trim(), (await Deno.readTextFile(ca.caPem)).trim());
        },
      );

      await t.step(
        "svcd ca revoke: nginx refuses the client within the bound, nobody acting; the good client is served throughout",
        async () => {
          assert.equal((await sign(alice)).status, 200);
          assert.equal((await sign(bob)).status, 200);
          assert.equal(
            (await sign(carol)).status,
            403,
            "nginx's ssl_crl lists carol from the start",
          );
          const unit = await startCrlPathUnit(`${crlDir}/full.pem`, proxy.configPath);
          const workersBefore = await proxy.workers();
          // alice signs on, one request after the other, until bob is refused for good.
          let stopAlice = false;
          const aliceStatuses: number[] = [];
          const aliceLoop = (async () => {
            while (!stopAlice) aliceStatuses.push((await sign(alice)).status);
          })();
          try {
            const revokedAt = performance.now();
            const revoke = await ca.run("revoke", [bob.issued.serial, "--reason", "keyCompromise"]);
            assert.equal(revoke.code, 0, revoke.text);
            // From here on nothing is run but requests: bob's until the first refusal.
            let refusedAfter = NaN;
            while (performance.now() - revokedAt < REVOCATION_BOUND_MS) {
              const status = (await sign(bob)).status;
              if (status === 403) {
                refusedAfter = performance.now() - revokedAt;
                break;
              }
              assert.equal(status, 200);
            }
            assert.ok(
              refusedAfter < REVOCATION_BOUND_MS,
              `bob was still served ${REVOCATION_BOUND_MS} ms after svcd ca revoke; daemon log:\n${
                daemon!.stderr()
              }`,
            );
            // Once the workers that had the old CRL are gone, every request of bob is refused.
            const deadline = performance.now() + RELOAD_DONE_MS;
            while ((await proxy.workers()).some((pid) => workersBefore.includes(pid))) {
              assert.ok(performance.now() < deadline, "nginx's old workers did not exit");
              await new Promise((r) => setTimeout(r, 20));
            }
            for (let i = 0; i < 3; i++) assert.equal((await sign(bob)).status, 403);
            console.log(
              `revoked client refused by nginx ${
                refusedAfter.toFixed(0)
              } ms after svcd ca revoke ` +
                `began (bound ${REVOCATION_BOUND_MS} ms); the path unit's stand-in reloaded nginx ` +
                `${unit.runs} time(s)`,
            );
          } finally {
            stopAlice = true;
            await aliceLoop;
            await unit.stop();
          }
          assert.ok(aliceStatuses.length >= 3, `alice made ${aliceStatuses.length} requests`);
          assert.deepEqual(
            aliceStatuses,
            aliceStatuses.map(() => 200),
            "alice was refused meanwhile",
          );
          assert.ok(unit.runs >= 1);
          // The OCSP URL says so too.
          const r = await runCommand("openssl", [
            "ocsp",
            ...[
              "-issuer",
              ca.caPem,
              "-cert",
              bob.cert,
              "-CAfile",
              ca.caPem,
              "-url",
              `${base}/ocsp`,
            ],
          ]);
          assert.match(r.stdout, new RegExp(`${bob.cert}: revoked\\b`));
        },
      );
    } finally {
      await nginx?.stop();
      await daemon?.stop();
      await token.cleanup();
    }
  },
});
