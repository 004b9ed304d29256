/**
 * The metrics socket of `svcd serve --metrics-socket`: after a known /sign load, with the main
 * thread alone and with two request Workers (separate isolates counting into one shared buffer),
 * the scrape counts every answer, signature, /sign time and audit group commit; `promtool check
 * metrics` finds nothing to complain about; no series carries a client's subject or a key label a
 * client sent, even from subjects with unusual bytes; and only --metrics-uid may connect.
 */
import assert from "node:assert/strict";
import { startDaemon } from "./support/daemon.ts";
import { encodeRequest, rawExchange, request } from "./support/http_client.ts";
import { makeTestToken } from "./support/token.ts";
import { publicListenerSetup } from "./support/ca.ts";
import { certIdFor, encodeOcspRequest } from "../lib/ocsp/mod.ts";
import { moduleTempDir } from "./support/temp_dir.ts";
import { ODD_SUBJECTS, promtoolCheckMetrics, signAs } from "./support/metrics.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const SIGNS = 24;

/** The value of one series line, e.g. `svcd_x_total{a="b"}`; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

for (const threads of ["0", "2"]) {
  Deno.test({
    name:
      `metrics (--threads ${threads}): a known load is counted, promtool is content, no subject leaks`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token = await makeTestToken({ keys: { k: "ec-p256" } });
      const metricsSocket = `${moduleTempDir("svcd-metrics-")}/metrics.sock`;
      const d = await startDaemon({
        token,
        policy: `${ALICE}\tk\n`,
        args: ["--threads", threads, "--metrics-socket", metricsSocket, "--syslog-socket", "none"],
      });
      try {
        await d.waitForLog("metrics listener on");
        // Rounds of 8: one identity may hold --workers − 1 (15) requests at once.
        for (let round = 0; round < SIGNS / 8; round++) {
          const statuses = await Promise.all(
            Array.from({ length: 8 }, () => signAs(d.socket, ALICE, "k").then((r) => r.status)),
          );
          assert.deepEqual(statuses, Array(8).fill(200));
        }
        for (const subject of ODD_SUBJECTS) {
          assert.equal((await signAs(d.socket, subject, "secret-label-\xff")).status, 403);
        }
        const res = await request(metricsSocket, { method: "GET", path: "/metrics" });
        assert.equal(res.status, 200);
        assert.match(res.header("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
        const text = res.text();
        const ok = 'svcd_http_requests_total{listener="authenticated",route="/sign",status="200"}';
        assert.equal(sample(text, ok), SIGNS, text);
        const refused =
          'svcd_http_requests_total{listener="authenticated",route="/sign",status="403"}';
        assert.equal(sample(text, refused), ODD_SUBJECTS.length, text);
        assert.equal(
          sample(text, 'svcd_signatures_total{key_type="ec-p256",mode="message"}'),
          SIGNS,
        );
        assert.ok(sample(text, "svcd_sign_duration_seconds_count")! >= SIGNS);
        assert.equal(
          sample(text, 'svcd_sign_duration_seconds_bucket{le="+Inf"}'),
          sample(text, "svcd_sign_duration_seconds_count"),
        );
        // Every sign line was made durable by some group commit: lines ≥ signatures.
        assert.ok(sample(text, "svcd_audit_group_lines_sum")! >= SIGNS, text);
        assert.ok(sample(text, "svcd_audit_fdatasync_duration_seconds_count")! >= 1);
        assert.equal(sample(text, "svcd_audit_write_failures_total"), 0);
        assert.ok(sample(text, "process_resident_memory_bytes")! > 1e6);
        assert.ok(sample(text, "process_open_fds")! > 3);
        assert.ok(sample(text, "svcd_token_sessions_max")! >= 1);
        for (const leak of ["alice", "zo", "mallory", "secret", "\ufffd", "\xff", "CN="]) {
          assert.ok(!text.includes(leak), `the scrape carries ${JSON.stringify(leak)}`);
        }
        const check = await promtoolCheckMetrics(text);
        assert.equal(check.code, 0, check.out);
        assert.equal(check.out.trim(), "", check.out);
        const other = await request(metricsSocket, { method: "GET", path: "/sign" });
        assert.equal(other.status, 404);
      } finally {
        await d.stop();
      }
    },
  });
}

Deno.test({
  name: "metrics: a peer other than --metrics-uid is refused on the metrics socket",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const metricsSocket = `${moduleTempDir("svcd-metrics-")}/metrics.sock`;
    const d = await startDaemon({
      token,
      policy: `${ALICE}\tk\n`,
      args: [
        "--metrics-socket",
        metricsSocket,
        "--metrics-uid",
        String(Deno.uid()! + 1),
        "--syslog-socket",
        "none",
      ],
    });
    try {
      await d.waitForLog("metrics listener on");
      // The listener closes a refused peer's connection without a byte.
      const raw = await rawExchange(metricsSocket, encodeRequest({ path: "/metrics" }))
        .catch(() => new Uint8Array(0));
      assert.equal(raw.length, 0, new TextDecoder().decode(raw));
      await d.waitForLog(/metrics .*uid/);
    } finally {
      await d.stop();
    }
  },
});

Deno.test({
  name:
    "metrics: 429s are counted by reason (budget, cap), each crossing once; the token is present and logged in",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const metricsSocket = `${moduleTempDir("svcd-metrics-")}/metrics.sock`;
    const MALLORY = "CN=mallory,O=Example,C=DE";
    const d = await startDaemon({
      token,
      policy: `${ALICE}\tk\n${MALLORY}\tk\n`,
      // Two workers: an identity holds one request at a time; a delay far longer than the test.
      args: [
        ...["--workers", "2", "--metrics-socket", metricsSocket, "--syslog-socket", "none"],
        ...[
          "--refusal-threshold",
          "3",
          "--refusal-base-delay",
          "600",
          "--refusal-max-delay",
          "3600",
        ],
        ...["--refusal-refill", "3600"],
      ],
    });
    try {
      await d.waitForLog("metrics listener on");
      const mallory: number[] = [];
      for (let i = 0; i < 6; i++) mallory.push((await signAs(d.socket, MALLORY, "nope")).status);
      assert.deepEqual(mallory, [403, 403, 403, 429, 429, 429]);
      let capped = 0;
      for (let round = 0; round < 20 && capped === 0; round++) {
        const answers = await Promise.all(
          Array.from({ length: 8 }, () => signAs(d.socket, ALICE, "k").then((r) => r.status)),
        );
        for (const s of answers) assert.ok(s === 200 || s === 429, String(s));
        capped += answers.filter((s) => s === 429).length;
      }
      assert.ok(capped > 0, "eight concurrent requests with two workers never hit the cap");
      const text = (await request(metricsSocket, { method: "GET", path: "/metrics" })).text();
      assert.equal(sample(text, 'svcd_throttled_total{reason="budget"}'), 3, text);
      assert.equal(sample(text, 'svcd_throttled_total{reason="cap"}'), capped, text);
      assert.equal(sample(text, "svcd_refusal_budget_crossings_total"), 1, text);
      assert.equal(sample(text, "svcd_token_present"), 1, text);
      assert.equal(sample(text, "svcd_token_logged_in"), 1, text);
      const check = await promtoolCheckMetrics(text);
      assert.equal(check.code, 0, check.out);
      assert.equal(check.out.trim(), "", check.out);
    } finally {
      await d.stop();
      await token.cleanup();
    }
  },
});

Deno.test({
  name:
    "metrics: OCSP answers by response and certificate status, cache hits and misses, revocation database loads",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const workDir = moduleTempDir("svcd-metrics-ocsp-");
    const metricsSocket = `${workDir}/metrics.sock`;
    const pub = await publicListenerSetup(token, workDir);
    // One public thread: its cache alone answers, so hits and misses are exact.
    const d = await startDaemon({
      token,
      workDir,
      policy: `${ALICE}\tk\n`,
      args: [
        ...pub.args,
        ...["--public-threads", "1", "--metrics-socket", metricsSocket, "--syslog-socket", "none"],
      ],
    });
    const ocsp = (body: Uint8Array) =>
      request(pub.socket, {
        method: "POST",
        path: "/ocsp",
        headers: [["Content-Type", "application/ocsp-request"]],
        body,
      }).then((r) => r.status);
    const scrape = async () =>
      (await request(metricsSocket, { method: "GET", path: "/metrics" })).text();
    try {
      await d.waitForLog("metrics listener on");
      const issued = encodeOcspRequest({ certIds: [certIdFor(pub.issuer, pub.issuedSerial)] });
      const unknown = encodeOcspRequest({
        certIds: [certIdFor(pub.issuer, Uint8Array.of(0x7f, 1))],
        nonce: Uint8Array.of(1, 2, 3, 4),
      });
      assert.deepEqual(
        [
          await ocsp(issued),
          await ocsp(issued),
          await ocsp(unknown),
          await ocsp(Uint8Array.of(0x30, 0)),
        ],
        [200, 200, 200, 200],
      );
      const index = `${pub.ca.dir}/index.txt`;
      const good = await Deno.readTextFile(index);
      await Deno.writeTextFile(index, good + "V\tbroken\n");
      assert.equal(await ocsp(issued), 200);
      let text = await scrape();
      const counts = (name: string) => sample(text, name);
      assert.equal(counts('svcd_ocsp_responses_total{status="successful"}'), 3, text);
      assert.equal(counts('svcd_ocsp_responses_total{status="malformed_request"}'), 1);
      assert.equal(counts('svcd_ocsp_responses_total{status="try_later"}'), 1);
      assert.equal(counts('svcd_ocsp_certificate_statuses_total{status="good"}'), 2);
      assert.equal(counts('svcd_ocsp_certificate_statuses_total{status="unknown"}'), 1);
      assert.equal(counts("svcd_ocsp_cache_hits_total"), 1);
      assert.equal(counts("svcd_ocsp_cache_misses_total"), 1);
      assert.equal(counts('svcd_revocation_database_loads_total{result="ok"}'), 1);
      assert.equal(counts('svcd_revocation_database_loads_total{result="failed"}'), 1);
      await Deno.writeTextFile(index, good);
      assert.equal(await ocsp(issued), 200);
      text = await scrape();
      assert.equal(counts('svcd_revocation_database_loads_total{result="ok"}'), 2, text);
      assert.equal(counts('svcd_ocsp_responses_total{status="successful"}'), 4);
      const check = await promtoolCheckMetrics(text);
      assert.equal(check.code, 0, check.out);
      assert.equal(check.out.trim(), "", check.out);
    } finally {
      await d.stop();
      await token.cleanup();
    }
  },
});
