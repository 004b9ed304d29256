/**
 * The session pool against SoftHSM2: 64 concurrent signatures never share a session (watched at
 * the module's function table), and a module that refuses sessions (a fake cap answering
 * CKR_HOST_MEMORY) stops the pool growing while callers wait.
 */
import assert from "node:assert/strict";
import {
  CKA,
  CKM,
  CKO,
  CKR,
  ckrName,
  encodeMechanism,
  loadModule,
  type Pkcs11Module,
  SIZE,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { findObjects, openSession, utf8 } from "./sessions.ts";
import { verifyIndependently } from "../token_admin/mod.ts";
import type { SigningKey, Token } from "./mod.ts";
import { refuseSessionsBeyond, watchSessionUse } from "../../tests/support/pkcs11_sessions.ts";
import {
  type openTestToken,
  type TestToken,
  withLoggedInToken,
} from "../../tests/support/token.ts";

const te = new TextEncoder();

function withToken(
  opts: Parameters<typeof openTestToken>[1],
  fn: (token: Token, made: TestToken) => Promise<void>,
): Promise<void> {
  return withLoggedInToken({ "k-ec": "ec-p256", "k-ed": "ed25519" }, fn, opts);
}

/**
 * Runs `fn` on a session of its own opened through the raw binding, with `signInit` starting an
 * Ed25519 signature with k-ed on it; the session is closed afterwards.
 */
async function withSigningSession(
  token: Token,
  made: TestToken,
  fn: (mod: Pkcs11Module, session: number, signInit: () => number) => Promise<void>,
): Promise<void> {
  const mod = loadModule(made.modulePath);
  const session = openSession(mod, token.slotId);
  try {
    const [key] = findObjects(mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      { type: CKA.LABEL, value: utf8("k-ed") },
    ]);
    const mech = encodeMechanism(CKM.EDDSA);
    await fn(mod, session, () => mod.fn.C_SignInit(session, mech.bytes, key));
  } finally {
    mod.fn.C_CloseSession(session);
  }
}

/** Fires n signatures at once, each over its own message; checks each independently. */
async function signConcurrently(token: Token, key: SigningKey, n: number) {
  const messages = Array.from(
    { length: n },
    (_, i) => te.encode(`message ${i} ${crypto.randomUUID()}`),
  );
  const pending = messages.map((m) => token.sign(key, m));
  const statsWhileQueued = token.poolStats();
  const signatures = await Promise.all(pending);
  for (const [i, { signature: sig }] of signatures.entries()) {
    assert.ok(
      (await verifyIndependently(key, messages[i], sig)).ok,
      `signature ${i} is not over message ${i}`,
    );
  }
  return statsWhileQueued;
}

Deno.test({
  name: "pool: 64 concurrent signs never use one session twice at once",
  sanitizeResources: false,
  fn: () =>
    withToken({}, async (token, made) => {
      const watch = watchSessionUse(made.modulePath);
      for (const label of ["k-ec", "k-ed"]) {
        const key = (await token.key(label))!;
        const before = watch.stats();
        await signConcurrently(token, key, 64);
        const after = watch.stats();
        assert.equal(after.overlaps, 0, "a session served two operations at once");
        assert.equal(after.operations - before.operations, 64);
        // The signatures really ran side by side on several sessions (not one after another).
        assert.ok(after.maxConcurrent > 1, `max concurrent ${after.maxConcurrent}`);
        assert.ok(after.sessionsUsed > 1);
        const stats = token.poolStats();
        assert.ok(stats.size <= 64 && stats.size === after.sessionsUsed, JSON.stringify(stats));
        assert.equal(stats.inUse, 0);
      }
    }),
});

Deno.test({
  name:
    "pool: a session cap (fake CKR_HOST_MEMORY at 3) stops growth; callers wait and all succeed",
  sanitizeResources: false,
  fn: () =>
    withToken({}, async (token, made) => {
      const key = (await token.key("k-ec"))!;
      const watch = watchSessionUse(made.modulePath);
      // The module refuses every session past the pool's third, as one with a cap of 3 would.
      const lift = refuseSessionsBeyond(made.modulePath, 3 - token.poolStats().size);
      try {
        const queued = await signConcurrently(token, key, 64);
        assert.equal(queued.size, 3);
        assert.equal(queued.cap, 3);
        assert.equal(queued.inUse, 3);
        assert.ok(queued.waiting >= 60, `waiting ${queued.waiting}`);
        assert.deepEqual(token.poolStats(), { size: 3, inUse: 0, waiting: 0, cap: 3 });
        assert.equal(watch.stats().overlaps, 0);
      } finally {
        lift();
      }
    }),
});

Deno.test({
  name: "pool: --max-sessions caps the pool the same way",
  sanitizeResources: false,
  fn: () =>
    withToken({ maxSessions: 2 }, async (token) => {
      const key = (await token.key("k-ed"))!;
      const queued = await signConcurrently(token, key, 16);
      assert.equal(queued.size, 2);
      assert.equal(queued.waiting, 14);
      assert.equal(token.poolStats().cap, 2);
    }),
});

Deno.test({
  name:
    "SoftHSM refuses a second operation on a busy session (why the pool lends sessions exclusively)",
  sanitizeResources: false,
  fn: () =>
    withToken({}, (token, made) => {
      // Through the raw binding: two C_SignInit on one session, as two requests sharing it would do.
      return withSigningSession(token, made, (_mod, _session, signInit) => {
        assert.equal(signInit(), CKR.OK);
        assert.equal(ckrName(signInit()), "CKR_OPERATION_ACTIVE");
        return Promise.resolve();
      });
    }),
});

Deno.test({
  name: "the session watch counts a call on a session while a nonblocking call on it still runs",
  sanitizeResources: false,
  fn: () =>
    withToken({}, async (token, made) => {
      // The watch must be able to fail: a second call on a session whose C_Sign is running.
      const watch = watchSessionUse(made.modulePath);
      await withSigningSession(token, made, async (mod, session, signInit) => {
        assert.equal(signInit(), CKR.OK);
        const data = utf8("overlap");
        const length = new BigUint64Array([64n]);
        const signing = mod.fn.C_SignAsync(
          session,
          data,
          data.length,
          new Uint8Array(64),
          new Uint8Array(length.buffer),
        );
        mod.fn.C_GetSessionInfo(session, new Uint8Array(SIZE.CK_SESSION_INFO));
        assert.equal(await signing, CKR.OK);
        assert.equal(watch.stats().overlaps, 1);
        assert.equal(watch.stats().operations, 1);
      });
    }),
});
