/**
 * `svcd serve` end to end over its real UNIX socket, against SoftHSM2 and against the project's
 * PKCS#11 v3.2 test module (ML-DSA and composite keys where the module offers them): the routes of
 * the authenticated socket, authentication by the proxy's header and the policy, the error statuses,
 * and the operator's checks that an owned key signs, that an unowned and a missing key get the same
 * 403, and that /verify accepts /sign's signature.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "../support/token.ts";
import { startDaemon } from "../support/daemon.ts";
import {
  type ClientResponse,
  encodeRequest,
  parseResponse,
  rawExchange,
  readAll,
  request,
} from "../support/http_client.ts";
import { daemonPublicKeys, verifyIndependently } from "../support/oracle.ts";
import { readAuditLines } from "../support/audit.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
const WANTED: Record<string, string> = {
  "k-ec": "ec-p256",
  // A UTF-8 label: it arrives in X-SVC-Key as bytes, is matched byte for byte, names a CKA_LABEL.
  "clé-ключ": "ec-p256",
  "k-ed": "ed25519",
  "k-mldsa": "ml-dsa-65",
  "k-composite": "composite-mldsa65-ed25519",
};
/** What each module must offer: SoftHSM2 2.6.1 has no post-quantum mechanisms, svcmod has all. */
const EXPECTED_KEYS: Record<string, string[]> = {
  softhsm: ["k-ec", "clé-ключ", "k-ed"],
  svcmod: ["k-ec", "clé-ключ", "k-ed", "k-mldsa", "k-composite"],
};
const te = new TextEncoder();
/** The daemon's --max-body here: not the default, so /token's max_body must come from the flag. */
const MAX_BODY = 16384;

function sign(socket: string, subject: string, key: string, body: Uint8Array | string) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", key]],
    body,
  });
}

function verify(
  socket: string,
  subject: string,
  key: string,
  sig: Uint8Array,
  msg: Uint8Array,
  len?: string,
) {
  return request(socket, {
    method: "POST",
    path: "/verify",
    headers: [
      ["X-SVC-Client-Subject", subject],
      ["X-SVC-Key", key],
      ["X-SVC-Signature-Length", len ?? String(sig.length)],
    ],
    body: new Uint8Array([...sig, ...msg]),
  });
}

function assertProblem(res: ClientResponse, status: number) {
  assert.equal(res.status, status, res.text());
  assert.equal(res.header("content-type"), "application/problem+json");
  assert.equal(res.header("connection"), "close");
  assert.equal((res.json() as { status: number }).status, status);
}

// Once as the main thread serves the socket, once with two request threads (--threads 2): the
// routes, answers and audit must not depend on which thread serves.
for (const threads of [0, 2]) {
  Deno.test({
    name: `daemon: routes, identity, policy and audit over the real socket (--threads ${threads})`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async (t) => {
      const token = await makeTestToken({ keys: WANTED });
      const labels = Object.keys(WANTED).filter((l) => token.keys.includes(l));
      // A module that stopped offering a type must fail here, not drop out of the matrix quietly.
      assert.deepEqual(labels, EXPECTED_KEYS[token.module.name]);
      const crowd = Array.from({ length: 16 }, (_, i) => `CN=client${i},O=Example,C=DE`);
      const policy = [
        "# test policy",
        ...labels.map((l) => `${ALICE}\t${l}`),
        `${BOB}\tk-ec`,
        ...crowd.map((s) => `${s}\tk-ec`),
      ].join("\n") + "\n";
      const daemon = await startDaemon({
        token,
        policy,
        args: ["--threads", String(threads), "--max-body", String(MAX_BODY)],
      });
      const sock = daemon.socket;
      try {
        const publicKeys = await daemonPublicKeys(sock, ALICE);

        await t.step(
          `check 1: /sign answers a signature that verifies independently (${labels.join(", ")})`,
          async () => {
            for (const label of labels) {
              const message = te.encode(`message for ${label}`);
              const res = await sign(sock, ALICE, label, message);
              assert.equal(res.status, 200, `${label}: ${res.text()}`);
              assert.equal(res.header("connection"), "close");
              assert.ok(res.header("x-svc-mechanism"));
              const pub = publicKeys.get(label)!;
              assert.ok(await verifyIndependently(WANTED[label], pub, message, res.body), label);
              assert.equal(
                await verifyIndependently(WANTED[label], pub, te.encode("other"), res.body),
                false,
              );
            }
          },
        );

        await t.step(
          "check 4: /verify 200 for the signature from /sign, 422 when it is wrong",
          async () => {
            for (const label of labels) {
              const message = te.encode(`verify ${label}`);
              const sig = (await sign(sock, ALICE, label, message)).body;
              assert.equal((await verify(sock, ALICE, label, sig, message)).status, 200, label);
              const bad = sig.slice();
              bad[bad.length >> 1] ^= 0x40;
              assertProblem(await verify(sock, ALICE, label, bad, message), 422);
              assertProblem(await verify(sock, ALICE, label, sig, te.encode("verify other")), 422);
              // A signature shorter than the key's: CKR_SIGNATURE_LEN_RANGE is "invalid", not an error.
              assertProblem(await verify(sock, ALICE, label, sig.subarray(1), message), 422);
            }
          },
        );

        await t.step("/verify: a missing, non-decimal or too large length is 400", async () => {
          const sig = (await sign(sock, ALICE, "k-ec", "m")).body;
          for (const len of ["", "abc", "-1", "0x40", "1e2", "99999999", String(sig.length + 2)]) {
            assertProblem(await verify(sock, ALICE, "k-ec", sig, te.encode("m"), len), 400);
          }
          const noLen = await request(sock, {
            method: "POST",
            path: "/verify",
            headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ec"]],
            body: sig,
          });
          assertProblem(noLen, 400);
        });

        await t.step(
          "check 3: not owned, no such key, unknown subject: one identical 403",
          async () => {
            const notOwned = await sign(sock, BOB, "k-ed", "x");
            const noKey = await sign(sock, ALICE, "no-such-key", "x");
            const unknown = await sign(sock, "CN=mallory,O=Example,C=DE", "k-ec", "x");
            const slashForm = await sign(sock, "/C=DE/O=Example/CN=alice", "k-ec", "x");
            for (const r of [notOwned, noKey, unknown, slashForm]) assertProblem(r, 403);
            assert.deepEqual(noKey.body, notOwned.body);
            assert.deepEqual(unknown.body, notOwned.body);
            const withoutDate = (r: ClientResponse) =>
              r.headers.filter(([n]) => n.toLowerCase() !== "date");
            assert.deepEqual(withoutDate(noKey), withoutDate(notOwned));
            assert.deepEqual(withoutDate(unknown), withoutDate(notOwned));
            const notOwnedVerify = await verify(
              sock,
              BOB,
              "k-ed",
              new Uint8Array(64),
              te.encode("x"),
            );
            assert.deepEqual(notOwnedVerify.body, notOwned.body);
          },
        );

        await t.step("identity: two headers in any case → 400; none or empty → 400", async () => {
          const twice = await request(sock, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Client-Subject", ALICE], ["x-svc-client-SUBJECT", ALICE], [
              "X-SVC-Key",
              "k-ec",
            ]],
            body: "x",
          });
          assertProblem(twice, 400);
          const none = await request(sock, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Key", "k-ec"]],
            body: "x",
          });
          assertProblem(none, 400);
          const empty = await request(sock, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Client-Subject", ""], ["X-SVC-Key", "k-ec"]],
            body: "x",
          });
          assertProblem(empty, 400);
          const healthNoId = await request(sock, { path: "/health" });
          assertProblem(healthNoId, 400);
        });

        await t.step(
          "routes: public-only paths 404 with Link, unknown 404, wrong method 405 + Allow",
          async () => {
            for (
              const [method, path] of [["GET", "/certificates"], ["POST", "/ocsp"], [
                "GET",
                "/ocsp",
              ]]
            ) {
              const res = await request(sock, {
                method,
                path,
                headers: [["X-SVC-Client-Subject", ALICE]],
                body: method === "POST" ? "x" : undefined,
              });
              assertProblem(res, 404);
              assert.match(res.header("link") ?? "", /public/);
            }
            assertProblem(
              await request(sock, { path: "/nowhere", headers: [["X-SVC-Client-Subject", ALICE]] }),
              404,
            );
            const getSign = await request(sock, {
              path: "/sign",
              headers: [["X-SVC-Client-Subject", ALICE]],
            });
            assertProblem(getSign, 405);
            assert.equal(getSign.header("allow"), "POST");
          },
        );

        await t.step(
          "/health reports token, pool and audit; /token lists only the caller's keys and max_body",
          async () => {
            const health = await request(sock, {
              path: "/health",
              headers: [["X-SVC-Client-Subject", BOB]],
            });
            assert.equal(health.status, 200);
            const h = health.json() as {
              status: string;
              token: { logged_in: boolean };
              pool: { size: number };
              uptime_seconds: number;
            };
            assert.equal(h.status, "ok");
            assert.equal(h.token.logged_in, true);
            assert.ok(h.pool.size >= 1);
            const bobView =
              (await request(sock, { path: "/token", headers: [["X-SVC-Client-Subject", BOB]] }))
                .json() as { max_body: number; keys: Array<{ label: string }> };
            assert.deepEqual(bobView.keys.map((k) => k.label), ["k-ec"]);
            // max_body is the limit the listener applies: a body of that size is taken, one more
            // byte is not.
            assert.equal(bobView.max_body, MAX_BODY);
            const atLimit = await sign(sock, BOB, "k-ec", new Uint8Array(bobView.max_body));
            assert.equal(atLimit.status, 200, atLimit.text());
            assertProblem(await sign(sock, BOB, "k-ec", new Uint8Array(bobView.max_body + 1)), 413);
            // A subject the policy does not know learns nothing: the one 403, on both routes.
            for (const path of ["/token", "/health"]) {
              const stranger = await request(sock, {
                path,
                headers: [["X-SVC-Client-Subject", "CN=nobody"]],
              });
              assertProblem(stranger, 403);
            }
          },
        );

        await t.step(
          "16 concurrent signs: every client gets the signature over its own message",
          async () => {
            const pub = publicKeys.get("k-ec")!;
            for (let round = 0; round < 4; round++) {
              const messages = crowd.map((s, i) =>
                te.encode(`${s} round ${round} #${i} ${crypto.randomUUID()}`)
              );
              const answers = await Promise.all(
                crowd.map((s, i) => sign(sock, s, "k-ec", messages[i])),
              );
              for (const [i, res] of answers.entries()) {
                assert.equal(res.status, 200);
                assert.ok(
                  await verifyIndependently("ec-p256", pub, messages[i], res.body),
                  `client ${i}`,
                );
              }
            }
          },
        );

        await t.step(
          "two requests in one write: 400, no signature, no audit line (never a merge)",
          async () => {
            const before = (await readAuditLines(daemon.auditDir)).length;
            const cases = [
              // The report's request: alone the first would be signed over "AAA".
              `POST /sign? HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: ${ALICE}\r\n` +
              `X-SVC-Key: k-ec\r\nContent-Length: 3\r\n\r\nAAA` +
              `POST /zzz HTTP/1.1\r\nHost: other\r\nContent-Length: 3\r\n\r\nBBB`,
              // The second request's key would have been used when the first had none.
              `POST /sign HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: ${ALICE}\r\n` +
              `Content-Length: 3\r\n\r\nAAA` +
              `POST /sign HTTP/1.1\r\nHost: svcd\r\nX-SVC-Key: k-ed\r\nContent-Length: 3\r\n\r\nBBB`,
              // HTTP/1.0 with keep-alive.
              `POST /sign HTTP/1.0\r\nHost: svcd\r\nConnection: keep-alive\r\n` +
              `X-SVC-Client-Subject: ${ALICE}\r\nX-SVC-Key: k-ec\r\nContent-Length: 3\r\n\r\nAAA` +
              `GET /health HTTP/1.0\r\nHost: svcd\r\n\r\n`,
            ];
            for (const raw of cases) {
              const res = parseResponse(await rawExchange(sock, te.encode(raw)));
              assertProblem(res, 400);
              assert.match(res.text(), /One request per connection/);
            }
            const after = await readAuditLines(daemon.auditDir);
            assert.deepEqual(after.slice(before).filter((l) => l.event === "sign"), []);
          },
        );

        await t.step(
          "a policy reload with a broken file keeps the old grants; a good one applies",
          async () => {
            await Deno.writeTextFile(daemon.policyPath, `${ALICE}\n`); // no TAB: does not parse
            daemon.signal("SIGHUP");
            await daemon.waitForLog("policy reload failed");
            assert.equal((await sign(sock, BOB, "k-ec", "still")).status, 200);
            await Deno.writeTextFile(daemon.policyPath, `${ALICE}\tk-ec\n`);
            daemon.signal("SIGHUP");
            await daemon.waitForLog("policy reloaded");
            assertProblem(await sign(sock, BOB, "k-ec", "gone"), 403);
            assert.equal((await sign(sock, ALICE, "k-ec", "kept")).status, 200);
            const reloads = (await readAuditLines(daemon.auditDir)).filter((l) =>
              l.event === "policy_reload"
            );
            assert.deepEqual(reloads.map((l) => l.ok), [false, true]);
          },
        );

        await t.step(
          "audit: every served signature has a sign line naming the subject",
          async () => {
            const lines = await readAuditLines(daemon.auditDir);
            assert.equal(lines[0].event, "login_ok");
            const signs = lines.filter((l) => l.event === "sign");
            assert.ok(signs.length >= labels.length + 64);
            for (const l of signs) {
              assert.ok(typeof l.actor === "string" && l.actor.startsWith("CN="));
            }
            assert.ok(lines.some((l) => l.event === "listener_start"));
          },
        );

        await t.step("SIGTERM loses no request whose connection was made before it", async () => {
          const pub = publicKeys.get("k-ec")!;
          const messages = Array.from({ length: 12 }, (_, i) => te.encode(`in flight ${i}`));
          const connect = () => Deno.connect({ transport: "unix", path: sock });
          const bytes = messages.map((m) =>
            encodeRequest({
              method: "POST",
              path: "/sign",
              headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ec"]],
              body: m,
            })
          );
          // Six have sent their request; six are connected but silent (a proxy connects, then writes).
          const sent = await Promise.all(
            bytes.slice(0, 6).map(async (b) => {
              const c = await connect();
              await c.write(b);
              return c;
            }),
          );
          const silent = await Promise.all(bytes.slice(6).map(() => connect()));
          const conns = [...sent, ...silent];
          daemon.signal("SIGTERM");
          await daemon.waitForLog("stopping: signal");
          await Promise.all(silent.map((c, i) => c.write(bytes[6 + i])));
          const answers = await Promise.all(conns.map(async (c) => {
            const raw = await readAll(c);
            c.close();
            return parseResponse(raw);
          }));
          for (const [i, r] of answers.entries()) {
            assert.equal(r.status, 200, `request ${i}: ${r.text()}`);
            assert.ok(
              await verifyIndependently("ec-p256", pub, messages[i], r.body),
              `request ${i}`,
            );
          }
          const served = answers;
          assert.equal(await daemon.stop(), 0);
          const signs = (await readAuditLines(daemon.auditDir)).filter((l) => l.event === "sign");
          const logged = new Set(signs.map((l) => l.signature_sha256));
          for (const r of served) {
            const digest = new Uint8Array(
              await crypto.subtle.digest("SHA-256", r.body as BufferSource),
            ).toHex();
            assert.ok(logged.has(digest), "a served signature without its audit line");
          }
          const tail = (await readAuditLines(daemon.auditDir)).slice(-2).map((l) => l.event);
          assert.deepEqual(tail, ["shutdown", "checkpoint"]);
        });
      } finally {
        await daemon.stop();
        await token.cleanup();
      }
    },
  });
}

Deno.test({
  name: "daemon: start-up refuses clearly (missing credential, bad options, broken policy)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    try {
      const noCred = { ...token, credentialsDir: `${token.dir}/no-such-dir` };
      await assert.rejects(startDaemon({ token: noCred, policy: "" }), /svc-pin/);
      await assert.rejects(
        startDaemon({ token, policy: "", args: ["--workers", "zero"] }),
        /--workers must be a whole number/,
      );
      await assert.rejects(startDaemon({ token, policy: "CN=a\n" }), /policy .*line 1/);
      await assert.rejects(
        startDaemon({ token, policy: "", args: ["--queue-depth", "65536"] }),
        /open-file limit .* lower --queue-depth/,
      );
    } finally {
      await token.cleanup();
    }
  },
});

/** Raw bytes through the socket: the daemon answers a request whose only header is the identity. */
export async function rawSign(sock: string, head: string): Promise<Uint8Array> {
  return await rawExchange(sock, te.encode(head));
}
