/**
 * The CRLs the daemon keeps (`svcd serve --ca-dir`): served on the public socket (DER,
 * application/pkix-crl, HEAD too), verified by openssl, certtool and pyca, each partition's IDP its
 * certificates' CDP; a revocation by `svcd ca revoke` is in the served CRLs within the stated bound
 * (5 s; the measured time is printed); a damaged index.txt and a CRL folder that cannot be written
 * leave the last good CRLs served, with a log line and a metric each.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type Issued, makeTestCa, opensslRequest, type TestCa } from "./support/ca.ts";
import { request } from "./support/http_client.ts";
import { checkCrl, pythonPointers, verifyWithCrl } from "./support/crl_check.ts";
import { runCommand } from "./support/command.ts";

/** The bound within which a revocation is in the served CRLs (docs/api.md). */
const FRESHNESS_BOUND_MS = 5_000;
const PARTITIONS = 4;

interface Setup {
  token: TestToken;
  ca: TestCa;
  daemon: TestDaemon;
  publicSocket: string;
  metricsSocket: string;
  crlDir: string;
  certs: Issued[];
  work: string;
}

async function setup(extra: string[] = []): Promise<Setup> {
  const token = await makeTestToken({ keys: {} });
  const work = moduleTempDir("svcd-crl-");
  const ca = await makeTestCa(token, {
    keyLabel: "ca",
    keyType: "ec-p256",
    subject: "CN=CRL test CA",
    dir: `${work}/ca`,
  });
  assert.equal(
    (await ca.run("urls", [
      "--ocsp-url",
      "http://pki.example.org/ocsp",
      "--crl-url",
      "http://pki.example.org/crl",
      "--crl-partitions",
      String(PARTITIONS),
    ])).code,
    0,
  );
  const certs: Issued[] = [];
  for (let i = 0; i < 6; i++) {
    certs.push(
      await ca.issue(["--csr", (await opensslRequest(ca.dir, `c${i}`, `/CN=c${i}`)).request]),
    );
  }
  assert.equal((await ca.run("revoke", [certs[0].serial, "--reason", "keyCompromise"])).code, 0);
  const publicSocket = `${work}/public.sock`;
  const metricsSocket = `${work}/metrics.sock`;
  const crlDir = `${work}/crl`;
  const daemon = await startDaemon({
    token,
    policy: "",
    args: [
      "--public-socket",
      publicSocket,
      "--ca-dir",
      ca.dir,
      "--ocsp-label",
      "ca",
      "--ca-cert",
      ca.caPem,
      "--crl-dir",
      crlDir,
      "--metrics-socket",
      metricsSocket,
      "--syslog-socket",
      "none",
      ...extra,
    ],
  });
  return { token, ca, daemon, publicSocket, metricsSocket, crlDir, certs, work };
}

async function teardown(s: Setup): Promise<void> {
  await s.daemon.stop();
  await s.token.cleanup();
}

async function getCrl(socket: string, name: string, method = "GET") {
  return await request(socket, { method, path: `/crl/${name}` });
}

/** Polls the served CRL until `ok(read)` holds or the deadline passes; the time it took. */
async function waitForServed(
  s: Setup,
  name: string,
  ok: (der: Uint8Array) => boolean,
  deadlineMs: number,
): Promise<number> {
  const start = performance.now();
  for (;;) {
    const res = await getCrl(s.publicSocket, name);
    if (res.status === 200 && ok(res.body)) return performance.now() - start;
    if (performance.now() - start > deadlineMs) {
      throw new Error(`CRL ${name} not as expected within ${deadlineMs} ms:\n${s.daemon.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether a DER CRL lists a serial (its INTEGER bytes appear as an entry's). */
function lists(der: Uint8Array, serialHex: string): boolean {
  let hex = serialHex;
  if (parseInt(hex.slice(0, 2), 16) & 0x80) hex = "00" + hex;
  const entry = `02${(hex.length / 2).toString(16).padStart(2, "0")}${hex}`.toLowerCase();
  return der.toHex().includes(entry);
}

/** The daemon's log shows `pattern` within `ms`, else fails with the log. */
async function logged(s: Setup, pattern: RegExp | string, ms = 10_000): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${pattern} in:\n${s.daemon.stderr()}`)), ms);
  });
  try {
    await Promise.race([s.daemon.waitForLog(pattern), late]);
  } finally {
    clearTimeout(timer);
  }
}

async function mount(args: string[]): Promise<void> {
  const r = await runCommand("mount", args);
  assert.equal(r.code, 0, r.text);
}

async function umount(path: string): Promise<void> {
  const r = await runCommand("umount", ["-l", path]);
  assert.equal(r.code, 0, r.text);
}

async function scrape(socket: string): Promise<string> {
  return (await request(socket, { path: "/metrics" })).text();
}

function counter(text: string, line: RegExp): number {
  const m = text.match(line);
  return m ? Number(m[1]) : 0;
}

Deno.test({
  name:
    "crl: the daemon serves the full CRL and every partition, verified by openssl, certtool and pyca; IDP = CDP; HEAD; 404 for other names",
  sanitizeResources: false,
  fn: async () => {
    const s = await setup();
    try {
      await waitForServed(
        s,
        "full.crl",
        (der) => lists(der, s.certs[0].serial),
        FRESHNESS_BOUND_MS,
      );
      const full = await getCrl(s.publicSocket, "full.crl");
      assert.equal(full.header("content-type"), "application/pkix-crl");
      assert.equal(full.header("cache-control"), "no-cache");
      const head = await getCrl(s.publicSocket, "full.crl", "HEAD");
      assert.equal(head.status, 200);
      assert.equal(head.body.length, 0);
      const read = await checkCrl(s.ca.caPem, full.body, s.work);
      assert.equal(read.idp, null);
      assert.deepEqual(read.serials, [s.certs[0].serial]);
      assert.ok(read.nextUpdate > Date.now());
      assert.equal(new Date(full.header("last-modified")!).getTime(), read.thisUpdate);
      for (let k = 0; k < PARTITIONS; k++) {
        const res = await getCrl(s.publicSocket, `${k}.crl`);
        assert.equal(res.status, 200);
        const part = await checkCrl(s.ca.caPem, res.body, s.work);
        const url = `http://pki.example.org/crl/${k}.crl`;
        assert.deepEqual(part.idp, { uri: url, critical: true });
        for (const c of s.certs) {
          if (Number(BigInt("0x" + c.serial) % BigInt(PARTITIONS)) !== k) continue;
          assert.deepEqual((await pythonPointers(c.path)).crl, [url]);
          const verdict = await verifyWithCrl(s.ca.caPem, c.path, res.body, s.work);
          assert.equal(verdict, c === s.certs[0] ? "revoked" : "ok");
        }
      }
      // The same bytes are in the CRL folder, for nginx (PEM) and a static mirror.
      assert.deepEqual(await Deno.readFile(`${s.crlDir}/full.crl`), full.body);
      assert.match(await Deno.readTextFile(`${s.crlDir}/full.pem`), /^-----BEGIN X509 CRL-----/);
      assert.equal((await getCrl(s.publicSocket, `${PARTITIONS}.crl`)).status, 404);
      assert.equal((await getCrl(s.publicSocket, "../ca/ca.pem")).status, 404);
      const post = await request(s.publicSocket, { method: "POST", path: "/crl/full.crl" });
      assert.equal(post.status, 405);
    } finally {
      await teardown(s);
    }
  },
});

Deno.test({
  name:
    "crl: after svcd ca revoke the served CRLs list the serial within the bound (measured), with a larger cRLNumber",
  sanitizeResources: false,
  fn: async () => {
    const s = await setup();
    try {
      await waitForServed(
        s,
        "full.crl",
        (der) => lists(der, s.certs[0].serial),
        FRESHNESS_BOUND_MS,
      );
      const before = await checkCrl(
        s.ca.caPem,
        (await getCrl(s.publicSocket, "full.crl")).body,
        s.work,
      );
      const target = s.certs[3];
      const k = Number(BigInt("0x" + target.serial) % BigInt(PARTITIONS));
      const revokedAt = performance.now();
      assert.equal((await s.ca.run("revoke", [target.serial, "--reason", "superseded"])).code, 0);
      const revokeMs = performance.now() - revokedAt;
      const tookFull = await waitForServed(
        s,
        "full.crl",
        (der) => lists(der, target.serial),
        FRESHNESS_BOUND_MS,
      );
      const tookPart = await waitForServed(
        s,
        `${k}.crl`,
        (der) => lists(der, target.serial),
        FRESHNESS_BOUND_MS,
      );
      console.log(
        `revocation in the served full CRL ${(revokeMs + tookFull).toFixed(0)} ms after the ` +
          `revoke began, partition ${k} ${
            (revokeMs + tookPart).toFixed(0)
          } ms (bound ${FRESHNESS_BOUND_MS} ms)`,
      );
      const after = await checkCrl(
        s.ca.caPem,
        (await getCrl(s.publicSocket, "full.crl")).body,
        s.work,
      );
      assert.ok(after.number > before.number);
      assert.deepEqual(after.serials.sort(), [s.certs[0].serial, target.serial].sort());
      const part = (await getCrl(s.publicSocket, `${k}.crl`)).body;
      assert.equal(await verifyWithCrl(s.ca.caPem, target.path, part, s.work), "revoked");
    } finally {
      await teardown(s);
    }
  },
});

Deno.test({
  ignore: Deno.uid() !== 0, // the read-only folder is a mount
  name:
    "crl: a damaged index.txt and an unwritable CRL folder keep the last good CRLs served, each with a log line and a metric",
  sanitizeResources: false,
  fn: async () => {
    const s = await setup();
    try {
      await waitForServed(
        s,
        "full.crl",
        (der) => lists(der, s.certs[0].serial),
        FRESHNESS_BOUND_MS,
      );
      const good = (await getCrl(s.publicSocket, "full.crl")).body;
      const index = `${s.ca.dir}/index.txt`;
      const text = await Deno.readTextFile(index);
      await Deno.writeTextFile(index, text + "R\tnot a line\n");
      await logged(s, /crl: cannot read the revocation database: .*index line/);
      const failed = counter(
        await scrape(s.metricsSocket),
        /svcd_crl_failures_total\{stage="index"\} (\d+)/,
      );
      assert.ok(failed >= 1);
      const served = await getCrl(s.publicSocket, "full.crl");
      assert.equal(served.status, 200);
      assert.deepEqual(served.body, good);
      await Deno.writeTextFile(index, text);
      await logged(s, "crl: working again");

      // The CRL folder mounted read-only (root writes anywhere else): nothing can be written.
      const goodAgain = (await getCrl(s.publicSocket, "full.crl")).body;
      const target = s.certs[1];
      await mount(["--bind", s.crlDir, s.crlDir]);
      try {
        await mount(["-o", "remount,bind,ro", s.crlDir]);
        assert.equal((await s.ca.run("revoke", [target.serial, "--reason", "superseded"])).code, 0);
        await logged(s, /crl: cannot write .*crl/);
        const writeFailures = counter(
          await scrape(s.metricsSocket),
          /svcd_crl_failures_total\{stage="write"\} (\d+)/,
        );
        assert.ok(writeFailures >= 1);
        // The last good CRL, never an empty or unsigned one.
        const last = await getCrl(s.publicSocket, "full.crl");
        assert.equal(last.status, 200);
        assert.deepEqual(last.body, goodAgain);
        assert.ok(!lists(last.body, target.serial));
      } finally {
        await umount(s.crlDir);
      }
      await waitForServed(s, "full.crl", (der) => lists(der, target.serial), FRESHNESS_BOUND_MS);
      await checkCrl(s.ca.caPem, (await getCrl(s.publicSocket, "full.crl")).body, s.work);
    } finally {
      await teardown(s);
    }
  },
});
