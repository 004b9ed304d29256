/**
 * The audit barrier seen from a client of `svcd serve` (SoftHSM2):
 * - SIGKILL under a /sign load at c=16, several rounds: every signature a client received has its
 *   `sign` line, and `svcd audit verify` passes (torn tails allowed);
 * - a full audit directory (64 KiB tmpfs): /sign answers 503 with no signature, /health says the
 *   log is not writable, and signing resumes on its own when space returns.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { fillFs, mountSmallTmpfs, smallTmpfsAvailable } from "./support/mounts.ts";
import {
  assertLoggedAfterOutage,
  readAuditLines,
  runAuditVerify,
  sha256Hex,
} from "./support/audit.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { makeTestToken } from "./support/token.ts";

const SUBJECT = "CN=load,O=Example,C=DE";
// Four identities share the load: one identity may hold at most --workers − 1 requests (the
// concurrency cap).
const LOADERS = [0, 1, 2, 3].map((i) => `CN=load${i},O=Example,C=DE`);
const POLICY = [SUBJECT, ...LOADERS].map((s) => `${s}\tk-ec\n`).join("");

function sign(socket: string, message: Uint8Array, subject = SUBJECT) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k-ec"]],
    body: message,
  });
}

function health(socket: string) {
  return request(socket, {
    method: "GET",
    path: "/health",
    headers: [["X-SVC-Client-Subject", SUBJECT]],
  });
}

// The main thread serving the socket, and two request threads whose lines the main isolate writes.
for (const threads of [0, 2]) {
  Deno.test({
    name:
      `daemon (--threads ${threads}): SIGKILL under /sign load, 4 rounds — every received signature has its line, verify passes`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
      const workDir = moduleTempDir("audit-daemon-crash-");
      const received: string[] = [];
      try {
        for (let round = 0; round < 4; round++) {
          const daemon = await startDaemon({
            token,
            policy: POLICY,
            workDir,
            args: ["--threads", String(threads)],
          });
          const target = 40 + Math.floor(Math.random() * 300);
          let inRound = 0;
          let killed = false;
          const client = async (c: number) => {
            for (let i = 0; !killed; i++) {
              const message = new TextEncoder().encode(`r${round} c${c} m${i}`);
              const res = await sign(daemon.socket, message, LOADERS[c % 4]).catch(() => undefined);
              if (res?.status === 200) {
                received.push(await sha256Hex(res.body));
                inRound++;
              } else if (!killed) {
                assert.fail(`status ${res?.status} before the kill:\n${daemon.stderr()}`);
              }
              if (inRound >= target && !killed) {
                killed = true;
                daemon.signal("SIGKILL");
              }
            }
          };
          await Promise.all(Array.from({ length: 16 }, (_, c) => client(c)));
          assert.equal((await daemon.status).signal, "SIGKILL");
        }
        const logged = new Set(
          (await readAuditLines(`${workDir}/audit`)).filter((l) => l.event === "sign").map((l) =>
            l.signature_sha256
          ),
        );
        const missing = received.filter((d) => !logged.has(d));
        assert.deepEqual(missing, [], "a signature reached a client without its audit line");
        assert.ok(received.length >= 160);
        console.log(
          `4 SIGKILL rounds: ${received.length} signatures received, ${missing.length} without a line`,
        );
        const v = await runAuditVerify(token, `${workDir}/audit`);
        assert.equal(v.code, 0, v.text);
        assert.match(v.text, /^audit\.log\.000004: ok/m);
        assert.match(v.text, /^verified: 4 file\(s\)/m);
      } finally {
        await Deno.remove(workDir, { recursive: true }).catch(() => {});
        await token.cleanup();
      }
    },
  });
}

const canMount = await smallTmpfsAvailable();

// With request threads, the log's health reaches every thread from the main isolate's log.
for (const threads of [0, 2]) {
  Deno.test({
    name:
      `daemon (--threads ${threads}): a full audit directory gives 503 with no signature; signing resumes when space returns`,
    ignore: !canMount,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
      const workDir = moduleTempDir("audit-daemon-full-");
      const auditDir = `${workDir}/audit`;
      await Deno.mkdir(auditDir);
      const small = await mountSmallTmpfs(auditDir);
      assert.ok(small);
      const daemon = await startDaemon({
        token,
        policy: POLICY,
        workDir,
        args: ["--threads", String(threads)],
      });
      const served: string[] = [];
      try {
        const first = await sign(daemon.socket, new TextEncoder().encode("before"));
        assert.equal(first.status, 200);
        served.push(await sha256Hex(first.body));

        const filler = await fillFs(auditDir);
        // The file's last page may still hold a line or two; after that every /sign is refused.
        let refused;
        for (let i = 0; i < 100 && !refused; i++) {
          const r = await sign(daemon.socket, new TextEncoder().encode(`full ${i}`));
          if (r.status === 200) served.push(await sha256Hex(r.body));
          else refused = r;
        }
        assert.equal(refused?.status, 503);
        assert.match(refused!.header("content-type") ?? "", /problem\+json/);
        assert.match(refused!.text(), /audit log cannot be written/);
        const sick = await health(daemon.socket);
        assert.equal(sick.status, 503);
        const report = sick.json() as { audit: { writable: boolean; error: string } };
        assert.equal(report.audit.writable, false);
        assert.match(report.audit.error, /space/i);
        assert.equal(
          (await sign(daemon.socket, new TextEncoder().encode("still full"))).status,
          503,
        );
        await daemon.waitForLog("signing stops until it can");

        await Deno.remove(filler);
        const deadline = Date.now() + 30_000; // failure guard: the retry timer runs every second
        while ((await health(daemon.socket)).status !== 200) {
          assert.ok(Date.now() < deadline, `audit never recovered:\n${daemon.stderr()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
        await daemon.waitForLog("signing resumes");
        const after = await sign(daemon.socket, new TextEncoder().encode("after"));
        assert.equal(after.status, 200);
        served.push(await sha256Hex(after.body));
        assert.equal(await daemon.stop(), 0);

        await assertLoggedAfterOutage(token, auditDir, served);
      } finally {
        await daemon.stop();
        await small.unmount();
        await Deno.remove(workDir, { recursive: true }).catch(() => {});
        await token.cleanup();
      }
    },
  });
}
