/**
 * Keys are resolved once and signed with through a session copy (C_CopyObject, CKA_TOKEN=false);
 * a key deleted on the token (pkcs11-tool, while the daemon runs) stops being used at the next
 * SIGHUP, which drops every copy, or the next /health, which drops the copies of keys gone from
 * the token: /sign then answers 403 as for any key that does not exist, and no signature with the
 * deleted key is made after that moment. (SoftHSM2 only: whether a module lets a key be copied is
 * its own choice; where it refuses, the token object is used and a deletion shows at once.)
 */
import assert from "node:assert/strict";
import { createPublicKey, verify as nodeVerify } from "node:crypto";
import { readAuditLines } from "./support/audit.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { deleteKeyWithPkcs11Tool, makeTestToken } from "./support/token.ts";

const SUBJECT = "CN=alice,O=Example";

function sign(socket: string, key: string, body: string) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", SUBJECT], ["X-SVC-Key", key]],
    body,
  });
}

Deno.test({
  name:
    "a key deleted on the token: used until the next SIGHUP or /health, then 403 and no signature",
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken({ keys: { k1: "ec-p256", k2: "ec-p256", k3: "ec-p256" } });
    // One thread: the copy made by the warm-up request is the one the next request uses. (With
    // request threads, a thread that made no copy yet looks the key up and finds it gone at once;
    // tests/daemon_threads_test.ts checks that SIGHUP and /health reach every thread.)
    const d = await startDaemon({
      token: t,
      policy: `${SUBJECT}\tk1\n${SUBJECT}\tk2\n${SUBJECT}\tk3\n`,
      args: ["--threads", "0"],
    });
    try {
      for (const k of ["k1", "k2", "k3"]) {
        assert.equal((await sign(d.socket, k, "warm")).status, 200);
      }

      // Deleted on the token: the working copy signs on until the daemon is asked to look again.
      await deleteKeyWithPkcs11Tool(t, "k1");
      const before = await sign(d.socket, "k1", "still");
      assert.equal(before.status, 200, "the session copy signs until SIGHUP or /health");

      d.signal("SIGHUP");
      await d.waitForLog(/policy reloaded/);
      assert.match(d.stderr(), /keys: working copies dropped/);
      const after = await sign(d.socket, "k1", "after the reload");
      assert.equal(after.status, 403, after.text());
      assert.equal((await sign(d.socket, "k2", "other key")).status, 200, "other keys still sign");

      // /health drops the copy of a key gone from the token, without a reload.
      await deleteKeyWithPkcs11Tool(t, "k2");
      const health = await request(d.socket, {
        method: "GET",
        path: "/health",
        headers: [["X-SVC-Client-Subject", SUBJECT]],
      });
      assert.equal(health.status, 200, health.text());
      await d.waitForLog(/keys: k2 no longer on the token/);
      assert.equal((await sign(d.socket, "k2", "after /health")).status, 403);

      // k3 still signs, and its signature verifies with its public key (the copy is the same key).
      const k3 = await sign(d.socket, "k3", "message");
      assert.equal(k3.status, 200);
      const pub = await request(d.socket, {
        method: "GET",
        path: "/token",
        headers: [["X-SVC-Client-Subject", SUBJECT]],
      });
      const entry = (pub.json() as { keys: { label: string; public_key: string | null }[] }).keys
        .find((k) => k.label === "k3");
      const spki = createPublicKey({
        key: Buffer.from(entry!.public_key!, "base64"),
        format: "der",
        type: "spki",
      });
      assert.ok(
        nodeVerify(
          "sha256",
          Buffer.from("message"),
          { key: spki, dsaEncoding: "ieee-p1363" },
          k3.body,
        ),
        "the copy signs as the key on the token",
      );

      // The audit log: no sign line for k1 after the reload, none for k2 after /health.
      const lines = await readAuditLines(d.auditDir);
      const reload = lines.findIndex((l) => l.event === "policy_reload");
      assert.ok(reload > 0);
      const signs = (key: string) => lines.filter((l) => l.event === "sign" && l.key === key);
      assert.equal(signs("k1").length, 2, "warm-up and 'still': nothing after the reload");
      assert.ok(lines.slice(reload).every((l) => !(l.event === "sign" && l.key === "k1")));
      assert.equal(signs("k2").length, 2, "warm-up and 'other key': nothing after /health");
    } finally {
      await d.stop();
      await t.cleanup();
    }
  },
});
