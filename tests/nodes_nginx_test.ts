/**
 * Several nodes, as docs/operations.md "Several nodes" sets them up: two svcd processes on the same
 * SoftHSM token folder, each with its own sockets, audit folder and state folder, behind one nginx
 * upstream (the packaged example, its upstream given both sockets, `proxy_next_upstream error
 * timeout`, non_idempotent off). Sixteen clients sign through nginx; halfway one node is killed with
 * SIGKILL. Every 200 a client got is a signature node:crypto verifies, whose audit line is in one of
 * the two nodes' logs; every other answer is a 502 of a request that was in flight on the killed
 * node; no request hangs (one still unanswered at a generous bound is aborted, failing the test);
 * the survivor serves on; `svcd audit verify --audit-dir A --audit-dir B` passes (the killed
 * node's file is unclosed: its torn tail is reported, not failed); and the killed node, started
 * again, gets requests again (its audit log grows).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makePki, type Pki } from "./support/pki.ts";
import { startNginx, type TestNginx } from "./support/nginx.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./support/daemon.ts";
import { readAuditLines, runAuditVerify } from "./support/audit.ts";
import { verifyIndependently } from "./support/oracle.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const WWW_DATA = 33;
const CLIENTS = 16;
/** Requests of the first phase, the node is killed when half of them were answered. */
const REQUESTS = 192;
/**
 * A request still unanswered after this is aborted, which fails the test: a hang guard, far above
 * the proxy's and the daemon's own deadlines.
 */
const REQUEST_BOUND_MS = 20_000;
/**
 * The restarted node must get a request within this time: nginx tries a failed server again once
 * its fail_timeout (1 s) has passed.
 */
const REJOIN_MS = 20_000;
const REJOIN_POLL_MS = 100;

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx");

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** What one request got: its message, status, body and how long it took. */
interface Answer {
  message: Uint8Array;
  status: number;
  body: Uint8Array;
  ms: number;
  /** Sent after the killed node's process was gone. */
  afterDeath: boolean;
}

/** The example with its authenticated upstream over both nodes' sockets, retrying refused connects. */
async function twoNodeExample(socketB: string): Promise<string> {
  const text = await Deno.readTextFile(
    new URL("../packaging/nginx-svcd.conf", import.meta.url),
  );
  const upstream = "    server unix:/run/svcd/auth.sock;\n";
  const proxyPass = "        proxy_pass http://svcd_auth;\n";
  assert.ok(text.includes(upstream) && text.includes(proxyPass));
  return text
    .replace(
      upstream,
      "    server unix:/run/svcd/auth.sock max_fails=1 fail_timeout=1s;\n" +
        `    server unix:${socketB} max_fails=1 fail_timeout=1s;\n`,
    )
    .replace(
      proxyPass,
      proxyPass + "        proxy_next_upstream error timeout;\n" +
        "        proxy_connect_timeout 2s;\n        proxy_read_timeout 15s;\n",
    );
}

function startNode(token: TestToken, workDir: string): Promise<TestDaemon> {
  return startDaemon({
    token,
    workDir,
    proxyUid: WWW_DATA,
    policy: `${ALICE}\tk\n`,
    // One identity for all sixteen clients: the cap (workers − 1) must hold all of them on one node.
    args: ["--workers", "24", "--syslog-socket", "none"],
  });
}

async function signLines(node: TestDaemon): Promise<Map<string, string>> {
  const lines = (await readAuditLines(node.auditDir)).filter((l) => l.event === "sign");
  return new Map(lines.map((l) => [l.message_sha256 as string, l.signature_sha256 as string]));
}

function sha256(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

Deno.test({
  name:
    "nodes: two nodes behind one nginx upstream, one killed halfway under load; every 200 is verified and audited, the node rejoins",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const dir = moduleTempDir("svcd-nodes-");
    await Deno.chmod(dir, 0o711);
    let a: TestDaemon | undefined, b: TestDaemon | undefined;
    let nginx: TestNginx | undefined;
    let client: Deno.HttpClient | undefined;
    try {
      const pki: Pki = await makePki(dir, [ALICE]);
      const dirA = await makeProxyWorkDir(`${dir}/a`, WWW_DATA);
      const dirB = await makeProxyWorkDir(`${dir}/b`, WWW_DATA);
      // One after the other: two processes logging in to one SoftHSM token folder at the same
      // instant can see C_Login fail (CKR_GENERAL_ERROR); an HSM cluster serialises that itself.
      a = await startNode(token, dirA);
      b = await startNode(token, dirB);
      nginx = await startNginx(
        dir,
        pki,
        { authSocket: a.socket },
        await twoNodeExample(b.socket),
      );
      const alice = pki.clients[0];
      client = Deno.createHttpClient({
        caCerts: [await Deno.readTextFile(pki.caCert)],
        cert: await Deno.readTextFile(alice.cert),
        key: await Deno.readTextFile(alice.key),
      });
      const base = `https://localhost:${nginx.port}`;
      const http = client;
      let killRequested = false, dead = false;
      const ask = async (message: Uint8Array): Promise<Answer> => {
        const start = performance.now();
        const afterDeath = dead;
        const res = await fetch(`${base}/sign`, {
          method: "POST",
          client: http,
          headers: { "X-SVC-Key": "k" },
          body: message as Uint8Array<ArrayBuffer>,
          signal: AbortSignal.timeout(REQUEST_BOUND_MS),
        });
        const body = new Uint8Array(await res.arrayBuffer());
        return { message, status: res.status, body, ms: performance.now() - start, afterDeath };
      };
      const tokenRes = await fetch(`${base}/token`, { client: http });
      assert.equal(tokenRes.status, 200);
      const spki = Uint8Array.fromBase64((await tokenRes.json()).keys[0].public_key);

      // Phase 1: sixteen clients, REQUESTS in all; B is killed once half were answered.
      const answers: Answer[] = [];
      let next = 0;
      let killed: Promise<Deno.CommandStatus> | undefined;
      const nodeB = b;
      const clientLoop = async () => {
        while (next < REQUESTS) {
          const message = new TextEncoder().encode(`request ${next++} ${crypto.randomUUID()}`);
          answers.push(await ask(message));
          if (answers.length >= REQUESTS / 2 && !killRequested) {
            killRequested = true;
            nodeB.signal("SIGKILL");
            killed = nodeB.status.finally(() => dead = true);
          }
        }
      };
      await Promise.all(Array.from({ length: CLIENTS }, clientLoop));
      assert.equal((await killed!).signal, "SIGKILL");

      const others = answers.filter((x) => x.status !== 200);
      // Only a request already sent to B when it died may fail (502: not retried, it may have been
      // signed there); at most one per client. Once B is gone, its refused connects are retried
      // on A: every request sent then is signed.
      for (const x of others) {
        assert.equal(x.status, 502, new TextDecoder().decode(x.body));
        assert.ok(!x.afterDeath, "a request sent after the kill failed");
      }
      assert.ok(others.length <= CLIENTS, `${others.length} failed`);
      // The survivor serves on: a round sent once B's death was seen is answered by A alone (how
      // many of phase 1's requests were sent after that depends on how soon the exit is reaped).
      const afterKill = await Promise.all(
        Array.from(
          { length: CLIENTS },
          (_, i) => ask(new TextEncoder().encode(`survivor ${i} ${crypto.randomUUID()}`)),
        ),
      );
      for (const x of afterKill) {
        assert.ok(x.afterDeath);
        assert.equal(x.status, 200, new TextDecoder().decode(x.body));
      }
      answers.push(...afterKill);

      // Phase 2: B again, with its folders; requests reach it again (its audit log grows).
      const beforeRestart = (await signLines(b)).size;
      b = await startNode(token, dirB);
      let grew = false;
      const rejoinBy = Date.now() + REJOIN_MS;
      for (let round = 0; Date.now() < rejoinBy && !grew; round++) {
        const batch = await Promise.all(
          Array.from(
            { length: CLIENTS },
            (_, i) => ask(new TextEncoder().encode(`rejoin ${round} ${i} ${crypto.randomUUID()}`)),
          ),
        );
        for (const x of batch) assert.equal(x.status, 200, new TextDecoder().decode(x.body));
        answers.push(...batch);
        grew = (await signLines(b)).size > beforeRestart;
        // A round every REJOIN_POLL_MS at most: nginx retries B on time, not on a request count.
        if (!grew) await new Promise((r) => setTimeout(r, REJOIN_POLL_MS));
      }
      assert.ok(grew, `the restarted node got no request in ${REJOIN_MS} ms`);

      console.log(`slowest request: ${Math.round(Math.max(...answers.map((x) => x.ms)))} ms`);
      const [linesA, linesB] = [await signLines(a), await signLines(b)];
      for (const x of answers.filter((x) => x.status === 200)) {
        assert.ok(await verifyIndependently("ec-p256", { spki }, x.message, x.body));
        const digest = sha256(x.message);
        const logged = linesA.get(digest) ?? linesB.get(digest);
        assert.equal(logged, sha256(x.body), `no audit line for ${digest}`);
      }

      await Promise.all([a.stop(), b.stop()]);
      // B's first file was never closed (no shutdown line): it is valid up to its last sealed line,
      // and what followed (a torn tail, if the kill cut a write) is reported, not failed.
      const killedFile = await Deno.readTextFile(`${b.auditDir}/audit.log.000001`);
      assert.ok(!killedFile.trimEnd().split("\n").at(-1)!.includes('"event":"shutdown"'));
      assert.ok(
        (await Deno.readTextFile(`${a.auditDir}/audit.log.000001`)).includes('"event":"shutdown"'),
      );
      const verified = await runAuditVerify(token, [a.auditDir, b.auditDir]);
      assert.equal(verified.code, 0, verified.text);
      assert.match(verified.text, /\/a\/audit:\naudit\.log\.000001: ok, /, verified.text);
      assert.match(
        verified.text,
        /\/b\/audit:\naudit\.log\.000001: ok, .*\naudit\.log\.000002: ok, /,
        verified.text,
      );
    } finally {
      client?.close();
      await nginx?.stop();
      await Promise.all([a?.stop(), b?.stop()]);
      await token.cleanup();
    }
  },
});
