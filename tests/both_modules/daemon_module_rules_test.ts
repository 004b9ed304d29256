/**
 * How the daemon copes with the module's login and session rules that only the project's test module
 * (svcmod) enforces — SoftHSM2 never locks a PIN and never caps sessions: one login per start and
 * never a retry (a role locks after five failures), and a pool that stops at the module's session
 * cap and makes callers wait instead of failing.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../support/temp_dir.ts";
import { makeTestToken, type TestToken } from "../support/token.ts";
import { startDaemon, type TestDaemon } from "../support/daemon.ts";
import { request } from "../support/http_client.ts";
import { selectedModuleName } from "../support/modules.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const onSvcmod = selectedModuleName() === "svcmod";

/** A credentials folder holding a well-formed but wrong PIN. */
async function wrongPinToken(token: TestToken): Promise<TestToken> {
  const dir = moduleTempDir("svcd-wrong-pin-");
  const pin = new TextEncoder().encode(crypto.getRandomValues(new Uint8Array(32)).toBase64());
  await Deno.writeFile(`${dir}/svc-pin`, pin, { mode: 0o400 });
  return { ...token, credentialsDir: dir };
}

Deno.test({
  name:
    "module rules: a wrong PIN costs exactly one login per start; the fifth failure locks the role",
  ignore: !onSvcmod,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const wrong = await wrongPinToken(token);
    try {
      // Were the daemon to retry even once per start, the role would lock by the third start.
      for (let start = 1; start <= 5; start++) {
        await assert.rejects(
          startDaemon({ token: wrong, policy: "" }),
          (e: Error) => /CKR_PIN_INCORRECT/.test(e.message) && /does not retry/.test(e.message),
          `start ${start}`,
        );
      }
      await assert.rejects(startDaemon({ token: wrong, policy: "" }), /CKR_PIN_LOCKED/);
      // Locked for real: the right PIN is refused too, and the daemon does not try twice.
      await assert.rejects(startDaemon({ token, policy: "" }), /CKR_PIN_LOCKED/);
    } finally {
      await Deno.remove(wrong.credentialsDir, { recursive: true });
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "module rules: the pool stops at the module's session cap and requests wait, none fails",
  ignore: !onSvcmod,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    // 96 KiB of secure heap holds a handful of ~24 KiB sessions; the daemon has 16 workers.
    // Signatures go to the thread pool (--inline-sign-limit-us 0), so that 16 are made at once,
    // each in a session of its own: on the serving thread they would take turns in one session.
    const token = await makeTestToken({ keys: { k: "ec-p256" }, secureHeapKb: 96 });
    const subjects = Array.from({ length: 16 }, (_, i) => `CN=c${i},O=Example`);
    const daemon = await startDaemon({
      token,
      policy: subjects.map((s) => `${s}\tk\n`).join("") + `${ALICE}\tk\n`,
      args: ["--workers", "16", "--inline-sign-limit-us", "0"],
    });
    try {
      for (let round = 0; round < 3; round++) {
        const answers = await Promise.all(subjects.map((s) =>
          request(daemon.socket, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Client-Subject", s], ["X-SVC-Key", "k"]],
            body: `round ${round}`,
          })
        ));
        for (const r of answers) assert.equal(r.status, 200, r.text());
      }
      const health = (await request(daemon.socket, {
        path: "/health",
        headers: [["X-SVC-Client-Subject", ALICE]],
      })).json() as { pool: { size: number; cap: number } };
      // The module answered CKR_HOST_MEMORY: the pool's cap came down from 127 to what it holds.
      assert.ok(
        health.pool.cap < 16,
        `pool cap ${health.pool.cap}: the module's refusal was not seen`,
      );
      assert.equal(health.pool.size, health.pool.cap);
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

/** A daemon on a fresh svcmod token with one key, and `pullOut()` — svcmod's test hook: a file
 * named `removed` in the token directory makes every call answer CKR_DEVICE_REMOVED. */
async function withPullableToken(
  fn: (daemon: TestDaemon, pullOut: () => Promise<void>) => Promise<void>,
): Promise<void> {
  const token = await makeTestToken({ keys: { k: "ec-p256" } });
  const daemon = await startDaemon({ token, policy: `${ALICE}\tk\n` });
  try {
    await fn(daemon, () => Deno.writeTextFile(`${token.module.tokenDir!}/removed`, ""));
  } finally {
    await daemon.stop();
    await token.cleanup();
  }
}

Deno.test({
  name: "module rules: a token pulled out answers 503 and the daemon exits non-zero for a restart",
  ignore: !onSvcmod,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withPullableToken(async (daemon, pullOut) => {
      const sign = () =>
        request(daemon.socket, {
          method: "POST",
          path: "/sign",
          headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k"]],
          body: "m",
        });
      assert.equal((await sign()).status, 200);
      await pullOut();
      const dead = await sign();
      assert.equal(dead.status, 503, dead.text());
      assert.match(dead.text(), /token is unusable/);
      assert.equal((await daemon.status).code, 75);
      assert.match(daemon.stderr(), /CKR_DEVICE_REMOVED/);
    }),
});

Deno.test({
  name: "module rules: a token that dies under an audit line (policy reload) also stops the daemon",
  ignore: !onSvcmod,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withPullableToken(async (daemon, pullOut) => {
      await pullOut();
      daemon.signal("SIGHUP"); // the policy_reload line needs the token's MAC
      assert.equal((await daemon.status).code, 75);
      assert.match(daemon.stderr(), /stopping: token is dead: .*CKR_DEVICE_REMOVED/);
    }),
});
