/**
 * Over the real daemon: `100 Continue` only for a request the daemon would take (an
 * ungranted key gets its 403 before the body is sent), `HEAD /health` is GET without a body, and a
 * reload of the largest policy file lets requests through while it is parsed.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { parseResponse, readAll, request } from "./support/http_client.ts";
import { daemonPublicKeys, verifyIndependently } from "./support/oracle.ts";
import { readAtMost } from "./support/raw_http.ts";
import { MAX_POLICY_BYTES } from "../lib/policy/mod.ts";
import { policyOfSize } from "./support/policy.ts";

const ALICE = "CN=alice,O=Example";
const te = new TextEncoder();

/** Sends a /sign head with `Expect: 100-continue`; returns the connection and the first bytes. */
async function expectContinue(socket: string, subject: string, key: string, length: number) {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  await conn.write(te.encode(
    `POST /sign HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: ${subject}\r\nX-SVC-Key: ${key}\r\n` +
      `Expect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`,
  ));
  return { conn, first: new TextDecoder().decode(await readAtMost(conn, 25)) };
}

Deno.test({
  name: "daemon: 100 Continue only after route, identity and grant; HEAD /health has no body",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ed": "ed25519" } });
    const daemon = await startDaemon({ token, policy: `${ALICE}\tk-ed\n` });
    try {
      // Not granted: the final 403 comes without the body ever being sent, then the close.
      const refused = await expectContinue(daemon.socket, ALICE, "k-other", 5);
      const rest = await readAll(refused.conn);
      refused.conn.close();
      const answer = parseResponse(new Uint8Array([...te.encode(refused.first), ...rest]));
      assert.equal(answer.status, 403, refused.first);

      // Granted: 100 Continue, then the body, then a signature over exactly that body.
      const granted = await expectContinue(daemon.socket, ALICE, "k-ed", 5);
      assert.equal(granted.first, "HTTP/1.1 100 Continue\r\n\r\n");
      await granted.conn.write(te.encode("hello"));
      const signed = parseResponse(await readAll(granted.conn));
      granted.conn.close();
      assert.equal(signed.status, 200, signed.text());
      const key = (await daemonPublicKeys(daemon.socket, ALICE)).get("k-ed")!;
      assert.ok(
        await verifyIndependently(
          "ed25519",
          key,
          te.encode("hello"),
          signed.body,
        ),
      );

      const get = await request(daemon.socket, {
        path: "/health",
        headers: [["X-SVC-Client-Subject", ALICE]],
      });
      const head = await request(daemon.socket, {
        method: "HEAD",
        path: "/health",
        headers: [["X-SVC-Client-Subject", ALICE]],
      });
      assert.equal(get.status, 200);
      assert.equal(head.status, 200);
      assert.equal(head.body.length, 0, "HEAD has no body");
      assert.equal(head.header("content-type"), "application/json");
      assert.ok(Number(head.header("content-length")) > 0, "the length GET's body would have");
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

Deno.test({
  name:
    "daemon: requests are served while the largest policy file is reloaded; a larger one is refused",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ed": "ed25519", "k-two": "ed25519" } });
    const daemon = await startDaemon({ token, policy: `${ALICE}\tk-ed\n` });
    // Alice's /token answer says which policy is in force: one key under the old, two under the new.
    const keysInForce = async () => {
      const res = await request(daemon.socket, {
        path: "/token",
        headers: [["X-SVC-Client-Subject", ALICE]],
      });
      assert.equal(res.status, 200, res.text());
      return (res.json() as { keys: unknown[] }).keys.length;
    };
    try {
      const largest = policyOfSize(MAX_POLICY_BYTES, [`${ALICE}\tk-ed`, `${ALICE}\tk-two`]);
      await Deno.writeTextFile(daemon.policyPath, largest);
      assert.equal(await keysInForce(), 1);
      daemon.signal("SIGHUP");
      await daemon.waitForLog("policy reload: reading");
      // Answers under the old policy after the reload began were served while the file was parsed.
      let servedDuringReload = 0;
      while (await keysInForce() === 1) {
        servedDuringReload++;
        const signed = await request(daemon.socket, {
          method: "POST",
          path: "/sign",
          headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ed"]],
          body: "during",
        });
        assert.equal(signed.status, 200, signed.text());
      }
      await daemon.waitForLog(/policy reloaded: \d+ grants/);
      assert.ok(
        servedDuringReload >= 2,
        `${servedDuringReload} request(s) served during the reload`,
      );

      await Deno.writeTextFile(daemon.policyPath, largest + "#");
      daemon.signal("SIGHUP");
      await daemon.waitForLog(/policy reload failed.*at most 1048576 bytes.*keeping the policy/);
      assert.equal(await keysInForce(), 2, "the policy in force stays");
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});
