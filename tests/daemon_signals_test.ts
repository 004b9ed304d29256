/**
 * Signals during a stop: a repeated SIGTERM (an impatient operator, a service manager) must not
 * fall back to the default action and kill the daemon with 143 while it finishes its stop.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { readAuditLines } from "./support/audit.ts";

Deno.test({
  name:
    "signals: SIGTERM sent again and again during the stop still ends with exit 0 and a shutdown line",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    const daemon = await startDaemon({ token, policy: "" });
    let exited = false;
    daemon.status.then(() => (exited = true));
    try {
      // Keep signalling until the process is gone, so a signal lands in every phase of the stop.
      while (!exited) {
        try {
          daemon.signal("SIGTERM");
        } catch {
          break; // already gone
        }
        await new Promise((r) => setTimeout(r, 1));
      }
      assert.equal((await daemon.status).code, 0, daemon.stderr());
      const tail = (await readAuditLines(daemon.auditDir)).slice(-2).map((l) => l.event);
      assert.deepEqual(tail, ["shutdown", "checkpoint"]);
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});
