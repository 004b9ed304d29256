/**
 * EIO on the audit directory, from a real block device: the audit folder is an ext4 file system on
 * a loop device that the test shrinks under it (tests/support/loop_device.ts), so the kernel fails
 * the log's writes and fdatasync answers EIO — the error a dying disk gives, which a full disk
 * (audit_daemon_test.ts) does not. /sign must answer 503 with no signature, /health must say the
 * log is not writable and why, and signing must resume by itself once the device answers again;
 * read back from the device after a remount, the log holds exactly the served signatures and
 * `svcd audit verify` passes.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { assertLoggedAfterOutage, sha256Hex } from "./support/audit.ts";
import { startDaemon } from "./support/daemon.ts";
import { type ClientResponse, request } from "./support/http_client.ts";
import { loopDeviceUnavailable, LoopDisk } from "./support/loop_device.ts";
import { makeTestToken } from "./support/token.ts";

const SUBJECT = "CN=eio,O=Example,C=DE";
const POLICY = `${SUBJECT}\tk-ec\n`;
/** Failure guard only: the retry timer runs every second. */
const RECOVERY_GUARD_MS = 30_000;

function sign(socket: string, text: string): Promise<ClientResponse> {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", SUBJECT], ["X-SVC-Key", "k-ec"]],
    body: new TextEncoder().encode(text),
  });
}

function health(socket: string): Promise<ClientResponse> {
  return request(socket, {
    method: "GET",
    path: "/health",
    headers: [["X-SVC-Client-Subject", SUBJECT]],
  });
}

const unavailable = await loopDeviceUnavailable();
if (unavailable) {
  console.log(`audit_eio_test: skipped — no loop device here (${unavailable})`);
}

Deno.test({
  name:
    "daemon: EIO from the audit directory's disk gives 503 with no signature; signing resumes when the disk answers",
  ignore: unavailable !== undefined,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    const workDir = moduleTempDir("audit-eio-");
    const auditDir = `${workDir}/audit`;
    const disk = await LoopDisk.mount(auditDir);
    const daemon = await startDaemon({ token, policy: POLICY, workDir });
    const served: string[] = [];
    try {
      const first = await sign(daemon.socket, "before");
      assert.equal(first.status, 200);
      served.push(await sha256Hex(first.body));

      disk.failWrites();
      const refused = await sign(daemon.socket, "while the disk fails");
      assert.equal(refused.status, 503, refused.text());
      assert.match(refused.header("content-type") ?? "", /problem\+json/);
      assert.match(refused.text(), /audit log cannot be written/);
      assert.equal(refused.header("x-svc-mechanism"), undefined);
      const sick = await health(daemon.socket);
      assert.equal(sick.status, 503);
      const report = sick.json() as { audit: { writable: boolean; error: string } };
      assert.equal(report.audit.writable, false);
      assert.match(report.audit.error, /Input\/output error|EIO/i);
      assert.equal((await sign(daemon.socket, "still failing")).status, 503);
      await daemon.waitForLog("signing stops until it can");

      disk.heal();
      const deadline = Date.now() + RECOVERY_GUARD_MS;
      while ((await health(daemon.socket)).status !== 200) {
        assert.ok(Date.now() < deadline, `audit never recovered:\n${daemon.stderr()}`);
        await daemon.waitForLog("signing resumes");
      }
      const after = await sign(daemon.socket, "after");
      assert.equal(after.status, 200);
      served.push(await sha256Hex(after.body));
      assert.equal(await daemon.stop(), 0);

      // What the device holds, not what the page cache still remembers.
      await disk.remount();
      await assertLoggedAfterOutage(token, auditDir, served);
    } finally {
      await daemon.stop();
      await disk.unmount();
      await Deno.remove(workDir, { recursive: true }).catch(() => {});
      await token.cleanup();
    }
  },
});
