/**
 * The audit keys belong to the daemon: a policy that grants `svc-audit` or
 * `svc-audit-sign` is refused at start and at reload, so no client can sign with the checkpoint key
 * and forge the checkpoints `svcd audit verify --public-key` trusts.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { readAuditLines } from "./support/audit.ts";

const SUBJECT = "CN=client,O=Example,C=DE";

Deno.test({
  name: "audit keys: a policy granting svc-audit(-sign) is refused at start and at reload",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { "k-ed": "ed25519" } });
    try {
      for (const label of ["svc-audit-sign", "svc-audit"]) {
        await t.step(`start: a grant of ${label} stops the daemon before any login`, async () => {
          const err = await startDaemon({ token, policy: `${SUBJECT}\t${label}\n` }).then(
            async (d) => {
              await d.stop();
              assert.fail(`the daemon started with ${label} granted`);
            },
            (e) => e as Error,
          );
          assert.match(err.message, new RegExp(`label '${label}' is reserved`));
          assert.doesNotMatch(err.message, /logged in/);
        });
      }

      await t.step("reload: the grant is refused, the policy in force stays", async () => {
        const daemon = await startDaemon({ token, policy: `${SUBJECT}\tk-ed\n` });
        try {
          await Deno.writeTextFile(
            daemon.policyPath,
            `${SUBJECT}\tk-ed\n${SUBJECT}\tsvc-audit-sign\n`,
          );
          daemon.signal("SIGHUP");
          await daemon.waitForLog(/policy reload failed.*svc-audit-sign' is reserved/);
          const sign = (label: string) =>
            request(daemon.socket, {
              method: "POST",
              path: "/sign",
              headers: [["X-SVC-Client-Subject", SUBJECT], ["X-SVC-Key", label]],
              body: "forged checkpoint",
            });
          assert.equal((await sign("svc-audit-sign")).status, 403);
          assert.equal((await sign("k-ed")).status, 200);
        } finally {
          assert.equal(await daemon.stop(), 0);
        }
        const reloads = (await readAuditLines(daemon.auditDir))
          .filter((l) => l.event === "policy_reload");
        assert.equal(reloads.length, 1);
        assert.equal(reloads[0].ok, false);
      });
    } finally {
      await token.cleanup();
    }
  },
});
