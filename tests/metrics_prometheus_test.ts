/**
 * The metrics as an operator collects them: Debian's Prometheus scrapes the daemon's metrics socket
 * through nginx's metrics server of the packaged example (packaging/nginx-svcd.conf; nginx's workers
 * run as www-data, the daemon's --metrics-uid). After a known /sign load, Prometheus' HTTP API
 * gives the exact /sign count, a non-empty audit fdatasync histogram whose +Inf bucket is its count,
 * and at least one audit line made durable per /sign; `promtool check metrics` finds nothing in a
 * scrape through nginx; and no stored series carries a client's subject or a key label a client
 * sent, even from subjects with unusual bytes. The public listener keeps a CA's CRLs (--ca-dir):
 * `svcd_crl_signed_total` counts their signing, and GET /crl/NAME through nginx's public server is
 * counted under the one route label `/crl`, whatever NAME a client asks for.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { assertPromtoolAccepts, ODD_SUBJECTS, signAs } from "./support/metrics.ts";
import { makePki } from "./support/pki.ts";
import { startNginx, type TestNginx } from "./support/nginx.ts";
import { startPrometheus, type TestPrometheus } from "./support/prometheus.ts";
import { makeTestToken } from "./support/token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./support/daemon.ts";
import { makeTestCa } from "./support/ca.ts";

const ALICE = "CN=alice,O=Example,C=DE";
/** CRL names no CA has: asked for through nginx, they must not become a series of their own. */
const ODD_CRL_NAMES = ["no-such.crl", "16.crl", "0123456789abcdef.crl"];
const LEAKS = ["alice", "zo", "mallory", "secret", "\ufffd", "\xff", "CN=", "no-such", "abcdef"];
const CRL_GETS = 3;
const WWW_DATA = 33;
const SIGNS = 40;

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx") &&
  await exists("/usr/bin/prometheus");

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test({
  name:
    "metrics: Prometheus scrapes through nginx; the API gives the exact /sign count, the fdatasync histogram, no subject",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256", ca: "ec-p256" } });
    const dir = moduleTempDir("svcd-prometheus-");
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    let prometheus: TestPrometheus | undefined;
    try {
      const pki = await makePki(dir, [ALICE]);
      // The package's layout of /run/svcd: setgid with the proxy's group, so the metrics socket is
      // www-data's group's. The test itself is the authenticated proxy (uid 0).
      const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
      const metricsSocket = `${workDir}/metrics.sock`;
      const publicSocket = `${workDir}/public.sock`;
      const ca = await makeTestCa(token, { keyLabel: "ca", dir: `${dir}/ca` });
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: 0,
        policy: `${ALICE}\tk\n`,
        args: [
          ...["--metrics-socket", metricsSocket, "--metrics-uid", String(WWW_DATA)],
          ...["--syslog-socket", "none", "--public-socket", publicSocket],
          ...["--ca-dir", ca.dir, "--ca-cert", ca.caPem, "--ocsp-label", "ca"],
          ...["--crl-dir", `${dir}/crl`],
        ],
      });
      await daemon.waitForLog("metrics listener on");
      nginx = await startNginx(dir, pki, {
        authSocket: daemon.socket,
        metricsSocket,
        publicSocket,
      });
      prometheus = await startPrometheus(dir, `127.0.0.1:${nginx.metricsPort}`);
      await prometheus.waitFor('up{job="svcd"}', (v) => v === 1);

      // Rounds of 8: one identity may hold --workers − 1 (15) requests at once.
      for (let round = 0; round < SIGNS / 8; round++) {
        const statuses = await Promise.all(
          Array.from({ length: 8 }, () => signAs(daemon!.socket, ALICE, "k").then((r) => r.status)),
        );
        assert.deepEqual(statuses, Array(8).fill(200));
      }
      for (const subject of ODD_SUBJECTS) {
        assert.equal((await signAs(daemon.socket, subject, "secret-label-\xff")).status, 403);
      }

      const crlBase = `http://127.0.0.1:${nginx.publicPort}/crl`;
      for (let i = 0; i < CRL_GETS; i++) {
        const res = await fetch(`${crlBase}/full.crl`);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get("content-type"), "application/pkix-crl");
        await res.body?.cancel();
      }
      for (const name of ODD_CRL_NAMES) {
        const res = await fetch(`${crlBase}/${name}`);
        await res.body?.cancel();
        assert.equal(res.status, 404, name);
      }

      const signed =
        'svcd_http_requests_total{job="svcd",listener="authenticated",route="/sign",status="200"}';
      assert.equal(await prometheus.waitFor(signed, (v) => v >= SIGNS), SIGNS);
      const refused = signed.replace('status="200"', 'status="403"');
      assert.equal(await prometheus.waitFor(refused, (v) => v >= 3), ODD_SUBJECTS.length);
      const syncs = 'svcd_audit_fdatasync_duration_seconds_count{job="svcd"}';
      assert.ok(await prometheus.waitFor(syncs, (v) => v > 0) > 0);
      // One instant query, so both sides come from the same scrape: +Inf holds every observation.
      const inf = 'svcd_audit_fdatasync_duration_seconds_bucket{job="svcd",le="+Inf"}';
      assert.equal(await prometheus.value(`${inf} - ignoring(le) ${syncs}`), 0);
      assert.ok((await prometheus.value(inf))! > 0);
      // The scrape that saw every 200 came after their audit lines were durable (before each
      // answer): the group commits made at least one line durable per /sign.
      const lines = await prometheus.value('svcd_audit_group_lines_sum{job="svcd"}');
      assert.ok(lines! >= SIGNS, `svcd_audit_group_lines_sum ${lines}`);
      assert.equal(await prometheus.value('svcd_token_logged_in{job="svcd"}'), 1);
      // The CRLs: signed at the start (the full CRL, no partitions), and each GET counted under
      // /crl whatever the name asked for.
      assert.ok(await prometheus.waitFor('svcd_crl_signed_total{job="svcd"}', (v) => v >= 1) >= 1);
      const crl =
        'svcd_http_requests_total{job="svcd",listener="public",route="/crl",status="200"}';
      assert.equal(await prometheus.waitFor(crl, (v) => v >= CRL_GETS), CRL_GETS);
      const unknown = crl.replace('status="200"', 'status="404"');
      assert.equal(
        await prometheus.waitFor(unknown, (v) => v >= ODD_CRL_NAMES.length),
        ODD_CRL_NAMES.length,
      );

      // What Prometheus scraped, as nginx serves it: promtool finds nothing.
      const scrape = await fetch(`http://127.0.0.1:${nginx.metricsPort}/metrics`);
      assert.equal(scrape.status, 200);
      await assertPromtoolAccepts(await scrape.text());

      // Every stored series of the job: no label name or value carries what a client sent.
      const series = await prometheus.api("series", [["match[]", '{job="svcd"}']]) as Array<
        Record<string, string>
      >;
      assert.ok(series.length > 50, `${series.length} series`);
      const names = await prometheus.api("labels", []) as string[];
      for (const text of [...names, ...series.flatMap((s) => Object.entries(s).flat())]) {
        for (const leak of LEAKS) {
          assert.ok(!text.includes(leak), `a series carries ${JSON.stringify(text)}`);
        }
      }
    } finally {
      await prometheus?.stop();
      await nginx?.stop();
      await daemon?.stop();
      await token.cleanup();
    }
  },
});
