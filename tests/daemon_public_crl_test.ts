/**
 * The CRLs the daemon keeps (`svcd serve --ca-dir`): served on the public socket (DER,
 * application/pkix-crl, HEAD too), verified by openssl, certtool and pyca, each partition's IDP its
 * certificates' CDP; a revocation by `svcd ca revoke` is in the served CRLs within the stated bound
 * (5 s; the measured time is printed); a damaged index.txt, a CRL folder that cannot be written
 * and a token that fails while signing (svcmod's fault hook) leave the last good CRLs served until
 * their nextUpdate, never an empty or unsigned one, with a log line and a metric each.
 */
import assert from "node:assert/strict";
import { checkCrl, pythonPointers, verifyWithCrl } from "./support/crl_check.ts";
import {
  type CrlDaemon,
  getCrl,
  lists,
  logged,
  startCrlDaemon,
  waitForServed,
} from "./support/crl_daemon.ts";
import { sample, scrape } from "./support/metrics.ts";
import { request } from "./support/http_client.ts";
import { runCommand } from "./support/command.ts";

/** The bound within which a revocation is in the served CRLs (docs/api.md). */
const FRESHNESS_BOUND_MS = 5_000;

/** The full CRL once it lists the certificate revoked before the start, as pyca reads it. */
async function firstFullCrl(s: CrlDaemon) {
  await waitForServed(s, "full.crl", (der) => lists(der, s.certs[0].serial), FRESHNESS_BOUND_MS);
  const der = (await getCrl(s.publicSocket, "full.crl")).body;
  return { der, read: await checkCrl(s.ca.caPem, der, s.work) };
}

/** The value of svcd_crl_failures_total for `stage` (0 before the first failure). */
async function crlFailures(s: CrlDaemon, stage: string): Promise<number> {
  return sample(await scrape(s.metricsSocket), `svcd_crl_failures_total{stage="${stage}"}`) ?? 0;
}

async function mount(args: string[]): Promise<void> {
  const r = await runCommand("mount", args);
  assert.equal(r.code, 0, r.text);
}

async function umount(path: string): Promise<void> {
  const r = await runCommand("umount", ["-l", path]);
  assert.equal(r.code, 0, r.text);
}

Deno.test({
  name:
    "crl: the daemon serves the full CRL and every partition, verified by openssl, certtool and pyca; IDP = CDP; HEAD; 404 for other names",
  sanitizeResources: false,
  fn: async () => {
    const s = await startCrlDaemon();
    try {
      const { der, read } = await firstFullCrl(s);
      const full = await getCrl(s.publicSocket, "full.crl");
      assert.equal(full.header("content-type"), "application/pkix-crl");
      assert.equal(full.header("cache-control"), "no-cache");
      const head = await getCrl(s.publicSocket, "full.crl", "HEAD");
      assert.equal(head.status, 200);
      assert.equal(head.body.length, 0);
      assert.equal(read.idp, null);
      assert.deepEqual(read.serials, [s.certs[0].serial]);
      assert.ok(read.nextUpdate > Date.now());
      assert.equal(new Date(full.header("last-modified")!).getTime(), read.thisUpdate);
      for (let k = 0; k < s.partitions; k++) {
        const res = await getCrl(s.publicSocket, `${k}.crl`);
        assert.equal(res.status, 200);
        const part = await checkCrl(s.ca.caPem, res.body, s.work);
        const url = `http://pki.example.org/crl/${k}.crl`;
        assert.deepEqual(part.idp, { uri: url, critical: true });
        for (const c of s.certs.filter((c) => s.partitionOf(c) === k)) {
          assert.deepEqual((await pythonPointers(c.path)).crl, [url]);
          const verdict = await verifyWithCrl(s.ca.caPem, c.path, res.body, s.work);
          assert.equal(verdict, c === s.certs[0] ? "revoked" : "ok");
        }
      }
      // The same bytes are in the CRL folder, for nginx (PEM) and a static mirror.
      assert.deepEqual(await Deno.readFile(`${s.crlDir}/full.crl`), der);
      assert.match(await Deno.readTextFile(`${s.crlDir}/full.pem`), /^-----BEGIN X509 CRL-----/);
      assert.equal((await getCrl(s.publicSocket, `${s.partitions}.crl`)).status, 404);
      assert.equal((await getCrl(s.publicSocket, "../ca/ca.pem")).status, 404);
      const post = await request(s.publicSocket, { method: "POST", path: "/crl/full.crl" });
      assert.equal(post.status, 405);
    } finally {
      await s.stop();
    }
  },
});

Deno.test({
  name:
    "crl: after svcd ca revoke the served CRLs list the serial within the bound (measured), with a larger cRLNumber",
  sanitizeResources: false,
  fn: async () => {
    const s = await startCrlDaemon();
    try {
      const before = (await firstFullCrl(s)).read;
      const target = s.certs[3];
      const k = s.partitionOf(target);
      const revokedAt = performance.now();
      assert.equal((await s.ca.run("revoke", [target.serial, "--reason", "superseded"])).code, 0);
      const revokeMs = performance.now() - revokedAt;
      const lister = (der: Uint8Array) => lists(der, target.serial);
      const tookPart = await waitForServed(s, `${k}.crl`, lister, FRESHNESS_BOUND_MS);
      const tookFull = await waitForServed(s, "full.crl", lister, FRESHNESS_BOUND_MS);
      console.log(
        `revocation in the served partition ${k} ${(revokeMs + tookPart).toFixed(0)} ms after ` +
          `the revoke began, full CRL ${(revokeMs + tookPart + tookFull).toFixed(0)} ms ` +
          `(bound ${FRESHNESS_BOUND_MS} ms)`,
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
      await s.stop();
    }
  },
});

Deno.test({
  ignore: Deno.uid() !== 0, // the read-only folder is a mount
  name:
    "crl: a damaged index.txt and an unwritable CRL folder keep the last good CRLs served, each with a log line and a metric",
  sanitizeResources: false,
  fn: async () => {
    const s = await startCrlDaemon();
    try {
      const good = (await firstFullCrl(s)).der;
      const index = `${s.ca.dir}/index.txt`;
      const text = await Deno.readTextFile(index);
      await Deno.writeTextFile(index, text + "R\tnot a line\n");
      await logged(s.daemon, /crl: cannot read the revocation database: .*index line/);
      assert.ok(await crlFailures(s, "index") >= 1);
      const served = await getCrl(s.publicSocket, "full.crl");
      assert.equal(served.status, 200);
      assert.deepEqual(served.body, good);
      await Deno.writeTextFile(index, text);
      await logged(s.daemon, "crl: working again");

      // The CRL folder mounted read-only (root writes anywhere else): nothing can be written.
      const goodAgain = (await getCrl(s.publicSocket, "full.crl")).body;
      const target = s.certs[1];
      await mount(["--bind", s.crlDir, s.crlDir]);
      try {
        await mount(["-o", "remount,bind,ro", s.crlDir]);
        assert.equal((await s.ca.run("revoke", [target.serial, "--reason", "superseded"])).code, 0);
        await logged(s.daemon, /crl: cannot write .*crl/);
        assert.ok(await crlFailures(s, "write") >= 1);
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
      await s.stop();
    }
  },
});

Deno.test({
  name:
    'crl: a token that fails while signing a CRL: a log line and svcd_crl_failures_total{stage="sign"}; the last good CRLs served until their nextUpdate, then 503, never an empty or unsigned one; signed again once the token works',
  sanitizeResources: false,
  fn: async () => {
    // svcmod's fault hook: a `faults` file in its token folder makes C_Sign fail
    // (CKR_FUNCTION_FAILED: an operation that failed, not a dead token). A short validity lets the
    // last good CRLs pass their nextUpdate within the test.
    const s = await startCrlDaemon({ module: "svcmod", args: ["--crl-validity", "6"] });
    const faults = `${s.token.module.tokenDir}/faults`;
    try {
      await firstFullCrl(s);
      const target = s.certs[1];
      const k = s.partitionOf(target);
      await Deno.writeTextFile(faults, "C_Sign 0x6 1.0\n");
      // The revocation makes a round sign at once; it fails, and so does every round after it.
      assert.equal((await s.ca.run("revoke", [target.serial, "--reason", "superseded"])).code, 0);
      await logged(s.daemon, /crl: the token did not sign: .*CKR_FUNCTION_FAILED/);
      assert.ok(await crlFailures(s, "sign") >= 1);
      const good = new Map<string, Uint8Array>();
      for (const name of ["full.crl", `${k}.crl`]) {
        const res = await getCrl(s.publicSocket, name);
        assert.equal(res.status, 200);
        assert.ok(!lists(res.body, target.serial));
        good.set(name, res.body);
      }
      const { nextUpdate } = await checkCrl(s.ca.caPem, good.get("full.crl")!, s.work);
      // Until its nextUpdate each answer is the last good CRL; from then on 503 with a problem
      // body. Polled until a little past it (the bound of this loop is the CRL's own time).
      let refusedAfterExpiry = 0;
      while (Date.now() < nextUpdate + 1_000) {
        for (const [name, der] of good) {
          const sentAt = Date.now();
          const res = await getCrl(s.publicSocket, name);
          const receivedAt = Date.now();
          if (res.status === 200) {
            assert.deepEqual(res.body, der, `${name}: another CRL than the last good one`);
            assert.ok(sentAt < nextUpdate, `${name} served past its nextUpdate`);
          } else {
            assert.equal(res.status, 503, res.text());
            assert.match(res.header("content-type") ?? "", /application\/problem\+json/);
            assert.ok(receivedAt >= nextUpdate, `${name}: 503 before its nextUpdate`);
            refusedAfterExpiry++;
          }
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(refusedAfterExpiry > 0, "nothing was refused past the nextUpdate");
      assert.ok(await crlFailures(s, "sign") >= 2, "each failed round is counted");
      await Deno.remove(faults);
      await waitForServed(s, `${k}.crl`, (der) => lists(der, target.serial), FRESHNESS_BOUND_MS);
      await waitForServed(s, "full.crl", (der) => lists(der, target.serial), FRESHNESS_BOUND_MS);
      await logged(s.daemon, "crl: working again");
      await checkCrl(s.ca.caPem, (await getCrl(s.publicSocket, "full.crl")).body, s.work);
    } finally {
      await Deno.remove(faults).catch(() => {});
      await s.stop();
    }
  },
});
