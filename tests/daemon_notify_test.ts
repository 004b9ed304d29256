/**
 * Type=notify: the daemon tells the service manager READY=1 once its socket accepts,
 * so `systemctl start` returns then, and STOPPING=1 when a stop begins.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { listenNotify } from "./support/notify.ts";

const SUBJECT = "CN=client,O=Example,C=DE";

Deno.test({
  name: "notify: READY=1 when the socket accepts, STOPPING=1 at SIGTERM, over $NOTIFY_SOCKET",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    const dir = moduleTempDir("svcd-notify-");
    const notify = listenNotify(`${dir}/notify.sock`);
    try {
      const ready = notify.next();
      const daemon = await startDaemon({
        token: { ...token, env: { ...token.env, NOTIFY_SOCKET: notify.path } },
        policy: `${SUBJECT}\tk\n`,
      });
      try {
        const message = await ready;
        assert.match(message, /^READY=1$/m);
        assert.match(message, new RegExp(`^MAINPID=${daemon.pid}$`, "m"));
        assert.match(message, /^STATUS=listening on /m);
        // Readiness means the socket accepts now: a request is answered.
        const res = await request(daemon.socket, {
          path: "/health",
          headers: [["X-SVC-Client-Subject", SUBJECT]],
        });
        assert.equal(res.status, 200, res.text());
        const stopping = notify.next();
        daemon.signal("SIGTERM");
        assert.match(await stopping, /^STOPPING=1$/m);
      } finally {
        assert.equal(await daemon.stop(), 0);
      }
    } finally {
      notify.close();
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});
