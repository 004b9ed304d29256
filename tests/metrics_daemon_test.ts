/**
 * The metrics socket of `svcd serve --metrics-socket`: after a known /sign load, with the main
 * thread alone and with two request Workers (separate isolates counting into one shared buffer),
 * the scrape counts every answer, signature, /sign time and audit group commit; `promtool check
 * metrics` finds nothing to complain about; no series carries a client's subject or a key label a
 * client sent, even from subjects with unusual bytes; and only --metrics-uid may connect. Also
 * counted: policy reloads by result, connections held, a full queue's 503s, first-byte deadline
 * drops, sessions in use (never above the cap) and audit groups that could not be written.
 */
import assert from "node:assert/strict";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import {
  encodeRequest,
  parseResponse,
  rawExchange,
  readAll,
  request,
} from "./support/http_client.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { publicListenerSetup } from "./support/ca.ts";
import { certIdFor, encodeOcspRequest } from "../lib/ocsp/mod.ts";
import { moduleTempDir } from "./support/temp_dir.ts";
import { fillFs, mountSmallTmpfs, smallTmpfsAvailable } from "./support/mounts.ts";
import { assertPromtoolAccepts, ODD_SUBJECTS, sample, scrape, signAs } from "./support/metrics.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const SIGNS = 24;

/** How many lines of `log` match `pattern` (a log line a test waits for, counted). */
function occurrences(log: string, pattern: RegExp): number {
  return log.match(new RegExp(pattern.source, "gm"))?.length ?? 0;
}

/** What a metrics test is given: see `metricsTest`. */
interface MetricsBed {
  token: TestToken;
  /** A fresh folder: the metrics socket's, and the daemon's. */
  workDir: string;
  metricsSocket: string;
  /**
   * Starts the daemon (policy: ALICE may use k) with `args` and the metrics socket, no syslog;
   * resolves once its metrics listener is on. The test stops it, whatever happens.
   */
  start(opts?: { policy?: string; args?: string[] }): Promise<TestDaemon>;
}

/** A test of a daemon with a metrics socket, on a fresh one-key token (k, ec-p256). */
function metricsTest(
  name: string,
  fn: (bed: MetricsBed) => Promise<void>,
  opts: { ignore?: boolean; prefix?: string } = {},
): void {
  Deno.test({
    name,
    ignore: opts.ignore,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token = await makeTestToken({ keys: { k: "ec-p256" } });
      const workDir = moduleTempDir(opts.prefix ?? "svcd-metrics-");
      const metricsSocket = `${workDir}/metrics.sock`;
      let d: TestDaemon | undefined;
      const start = async ({ policy = `${ALICE}\tk\n`, args = [] as string[] } = {}) => {
        d = await startDaemon({
          token,
          workDir,
          policy,
          args: [...args, "--metrics-socket", metricsSocket, "--syslog-socket", "none"],
        });
        await d.waitForLog("metrics listener on");
        return d;
      };
      try {
        await fn({ token, workDir, metricsSocket, start });
      } finally {
        await d?.stop();
        await token.cleanup();
      }
    },
  });
}

for (const threads of ["0", "2"]) {
  metricsTest(
    `metrics (--threads ${threads}): a known load is counted, promtool is content, no subject leaks`,
    async ({ metricsSocket, start }) => {
      const d = await start({ args: ["--threads", threads] });
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
      // Sessions lent out: present, never more than the cap (Workers' values may be a second old).
      const inUse = sample(text, "svcd_token_sessions_in_use");
      assert.ok(inUse !== undefined && inUse >= 0, text);
      assert.ok(inUse <= sample(text, "svcd_token_sessions_max")!, text);
      for (const leak of ["alice", "zo", "mallory", "secret", "\ufffd", "\xff", "CN="]) {
        assert.ok(!text.includes(leak), `the scrape carries ${JSON.stringify(leak)}`);
      }
      await assertPromtoolAccepts(text);
      const other = await request(metricsSocket, { method: "GET", path: "/sign" });
      assert.equal(other.status, 404);
    },
  );
}

metricsTest(
  "metrics: a peer other than --metrics-uid is refused on the metrics socket",
  async ({ metricsSocket, start }) => {
    const d = await start({ args: ["--metrics-uid", String(Deno.uid()! + 1)] });
    // The listener closes a refused peer's connection without a byte.
    const raw = await rawExchange(metricsSocket, encodeRequest({ path: "/metrics" }))
      .catch(() => new Uint8Array(0));
    assert.equal(raw.length, 0, new TextDecoder().decode(raw));
    await d.waitForLog(/metrics .*uid/);
  },
);

metricsTest(
  "metrics: 429s are counted by reason (budget, cap), each crossing once; the token is present and logged in",
  async ({ metricsSocket, start }) => {
    const MALLORY = "CN=mallory,O=Example,C=DE";
    const d = await start({
      policy: `${ALICE}\tk\n${MALLORY}\tk\n`,
      // Two workers: an identity holds one request at a time; a delay far longer than the test.
      args: [
        ...["--workers", "2"],
        ...["--refusal-threshold", "3", "--refusal-base-delay", "600"],
        ...["--refusal-max-delay", "3600", "--refusal-refill", "3600"],
      ],
    });
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
    const text = await scrape(metricsSocket);
    assert.equal(sample(text, 'svcd_throttled_total{reason="budget"}'), 3, text);
    assert.equal(sample(text, 'svcd_throttled_total{reason="cap"}'), capped, text);
    assert.equal(sample(text, "svcd_refusal_budget_crossings_total"), 1, text);
    assert.equal(sample(text, "svcd_token_present"), 1, text);
    assert.equal(sample(text, "svcd_token_logged_in"), 1, text);
    await assertPromtoolAccepts(text);
  },
);

metricsTest(
  "metrics: OCSP answers by response and certificate status, cache hits and misses, revocation database loads",
  async ({ token, workDir, metricsSocket, start }) => {
    const pub = await publicListenerSetup(token, workDir);
    // One public thread: its cache alone answers, so hits and misses are exact.
    await start({ args: [...pub.args, "--public-threads", "1"] });
    const ocsp = (body: Uint8Array) =>
      request(pub.socket, {
        method: "POST",
        path: "/ocsp",
        headers: [["Content-Type", "application/ocsp-request"]],
        body,
      }).then((r) => r.status);
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
    let text = await scrape(metricsSocket);
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
    text = await scrape(metricsSocket);
    assert.equal(counts('svcd_revocation_database_loads_total{result="ok"}'), 2, text);
    assert.equal(counts('svcd_ocsp_responses_total{status="successful"}'), 4);
    await assertPromtoolAccepts(text);
  },
  { prefix: "svcd-metrics-ocsp-" },
);

metricsTest(
  "metrics: policy reloads are counted by result — SIGHUP with a good file (ok), with a bad line (failed)",
  async ({ metricsSocket, start }) => {
    const d = await start();
    // The reload is counted before its result is logged: once the line is there, so is the count.
    const reloaded = /^svcd: policy reload(ed:| failed)/;
    const reload = async (policy: string, done: number) => {
      await Deno.writeTextFile(d.policyPath, policy);
      d.signal("SIGHUP");
      await d.waitForLog((log) => occurrences(log, reloaded) >= done);
    };
    const ok = 'svcd_policy_reloads_total{result="ok"}';
    const failed = 'svcd_policy_reloads_total{result="failed"}';
    let text = await scrape(metricsSocket);
    assert.equal(sample(text, ok), undefined, text);
    assert.equal(sample(text, failed), undefined, text);

    await reload(`${ALICE}\tk\nCN=bob,O=Example,C=DE\tk\n`, 1);
    await d.waitForLog("policy reloaded: 2 grants");
    text = await scrape(metricsSocket);
    assert.equal(sample(text, ok), 1, text);
    assert.equal(sample(text, failed), undefined, text);

    // A grant without a key: the file is refused, the policy in force stays.
    await reload(`${ALICE}\tk\nCN=bob,O=Example,C=DE\n`, 2);
    await d.waitForLog("policy reload failed");
    text = await scrape(metricsSocket);
    assert.equal(sample(text, ok), 1, text);
    assert.equal(sample(text, failed), 1, text);
    assert.equal((await signAs(d.socket, "CN=bob,O=Example,C=DE", "k")).status, 200);
    await assertPromtoolAccepts(text, { silent: false });
  },
);

metricsTest(
  "metrics: connections held, a full queue's 503 and first-byte deadline drops are counted on the authenticated listener",
  async ({ metricsSocket, start }) => {
    const DEPTH = 2;
    // --threads 0: the listener is the main isolate's, so a scrape samples its held count now.
    const d = await start({ args: ["--threads", "0", "--queue-depth", String(DEPTH)] });
    const held = 'svcd_acceptor_held_connections{listener="authenticated"}';
    const full = 'svcd_acceptor_queue_full_total{listener="authenticated"}';
    const drops = 'svcd_deadline_drops_total{listener="authenticated",phase="first_byte"}';
    const refused503 =
      'svcd_http_requests_total{listener="authenticated",route="other",status="503"}';
    const silent: Deno.UnixConn[] = [];
    try {
      let text = await scrape(metricsSocket);
      assert.equal(sample(text, full), undefined, text);
      assert.equal(sample(text, drops), undefined, text);

      // DEPTH connections that send nothing fill the queue; the next one is answered 503 at once.
      for (let i = 0; i < DEPTH; i++) {
        silent.push(await Deno.connect({ transport: "unix", path: d.socket }));
      }
      // Accepted in their own time: the next connection must come after them (failure guard only;
      // they are dropped 1 s after they were accepted, so the scrape follows them closely).
      const guard = Date.now() + 10_000;
      while (sample(text = await scrape(metricsSocket), held) !== DEPTH) {
        assert.ok(Date.now() < guard, `never ${DEPTH} held:\n${text}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      const extra = await Deno.connect({ transport: "unix", path: d.socket });
      const answer = parseResponse(await readAll(extra));
      extra.close();
      assert.equal(answer.status, 503);
      assert.equal(answer.header("retry-after"), "1");

      // The silent ones are closed without a byte at their first-byte deadline (1 s).
      for (const conn of silent) assert.equal((await readAll(conn)).length, 0);
      await d.waitForLog((log) =>
        occurrences(log, /^svcd: listener deadline: phase="first_byte"/) >= DEPTH
      );
      text = await scrape(metricsSocket);
      assert.equal(sample(text, full), 1, text);
      assert.equal(sample(text, refused503), 1, text);
      assert.equal(sample(text, drops), DEPTH, text);
      // A labelled series at 0 is left out of the exposition.
      assert.equal(sample(text, held) ?? 0, 0, text);
      await assertPromtoolAccepts(text, { silent: false });
    } finally {
      for (const conn of silent) {
        try {
          conn.close();
        } catch { /* closed already */ }
      }
    }
  },
);

const canMount = await smallTmpfsAvailable();

metricsTest(
  "metrics: an audit group that cannot be written (full directory) is counted as a write failure",
  async ({ workDir, metricsSocket, start }) => {
    const auditDir = `${workDir}/audit`;
    await Deno.mkdir(auditDir);
    const small = await mountSmallTmpfs(auditDir);
    assert.ok(small);
    const failures = "svcd_audit_write_failures_total";
    let d: TestDaemon | undefined;
    try {
      d = await start();
      assert.equal((await signAs(d.socket, ALICE, "k")).status, 200);
      assert.equal(sample(await scrape(metricsSocket), failures), 0);
      await fillFs(auditDir);
      // The file's last page may still hold a line or two; then a group fails and is refused.
      let status = 200;
      for (let i = 0; i < 100 && status === 200; i++) {
        status = (await signAs(d.socket, ALICE, "k")).status;
      }
      assert.equal(status, 503);
      // Counted before its lines are refused: the 503 came after the count.
      const text = await scrape(metricsSocket);
      assert.ok(sample(text, failures)! >= 1, text);
      assert.ok(
        sample(
          text,
          'svcd_http_requests_total{listener="authenticated",route="/sign",status="503"}',
        )! >=
          1,
        text,
      );
    } finally {
      await d?.stop(); // before the unmount; stopping again is a no-op
      await small.unmount();
    }
  },
  { ignore: !canMount, prefix: "svcd-metrics-full-" },
);
