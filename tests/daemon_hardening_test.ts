/**
 * Over the real daemon: `100 Continue` only for a request the daemon would take (an
 * ungranted key gets its 403 before the body is sent), `HEAD /health` is GET without a body, and a
 * reload of the largest policy file lets requests through while it is parsed.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { parseResponse, readAll, request } from "./support/http_client.ts";
import { daemonPublicKeys, verifyIndependently } from "./support/oracle.ts";
import { readAtMost } from "./support/raw_http.ts";
import { MAX_POLICY_GRANTS } from "../lib/policy/mod.ts";
import { policyOfGrants } from "./support/policy.ts";

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
  name: "daemon: a policy of --policy-max-grants (1 000 000) grants loads at start and at a " +
    "reload served in slices, with --threads 0 and 2; one grant more is refused and the policy stays",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ed": "ed25519", "k-two": "ed25519" } });
    const signAs = (daemon: TestDaemon, subject: string) =>
      request(daemon.socket, {
        method: "POST",
        path: "/sign",
        headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k-ed"]],
        body: "m",
      });
    try {
      for (const threads of ["0", "2"]) {
        const start = policyOfGrants(MAX_POLICY_GRANTS, "k-ed", [`${ALICE}\tk-ed`]);
        const daemon = await startDaemon({
          token,
          policy: start.bytes,
          args: ["--threads", threads],
        });
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
          const first = await signAs(daemon, start.lastSubject);
          assert.equal(first.status, 200, `the millionth grant's subject: ${first.text()}`);
          assert.equal(await keysInForce(), 1);

          const next = policyOfGrants(MAX_POLICY_GRANTS, "k-ed", [
            `${ALICE}\tk-ed`,
            `${ALICE}\tk-two`,
          ]);
          await Deno.writeFile(daemon.policyPath, next.bytes);
          daemon.signal("SIGHUP");
          await daemon.waitForLog("policy reload: reading");
          // Answers under the old policy after the reload began were served while it was parsed.
          let servedDuringReload = 0;
          while (await keysInForce() === 1) {
            servedDuringReload++;
            const signed = await signAs(daemon, ALICE);
            assert.equal(signed.status, 200, signed.text());
          }
          await daemon.waitForLog(`policy reloaded: ${MAX_POLICY_GRANTS} grants`);
          assert.ok(
            servedDuringReload >= 2,
            `${servedDuringReload} request(s) served during the reload (--threads ${threads})`,
          );
          assert.equal((await signAs(daemon, next.lastSubject)).status, 200);
          assert.equal((await signAs(daemon, start.lastSubject)).status, 403, "revoked");

          const over = policyOfGrants(MAX_POLICY_GRANTS + 1, "k-ed", [`${ALICE}\tk-ed`]);
          await Deno.writeFile(daemon.policyPath, over.bytes);
          daemon.signal("SIGHUP");
          await daemon.waitForLog(
            /policy reload failed.*more than 1000000 grants.*keeping the policy in force \(1000000 grants\)/,
          );
          assert.equal(await keysInForce(), 2, "the policy in force stays");
          assert.equal((await signAs(daemon, next.lastSubject)).status, 200);
          assert.equal((await signAs(daemon, over.lastSubject)).status, 403);
        } finally {
          await daemon.stop();
        }
      }
    } finally {
      await token.cleanup();
    }
  },
});
