import assert from "node:assert/strict";
import { CKR, Pkcs11Error } from "../../ffi/pkcs11/mod.ts";
import { type PoolBackend, SessionPool } from "./sessions.ts";

/** A module stand-in: hands out handles 1, 2, …, refuses with `refusal` once `limit` are open. */
function fakeBackend(limit: number, max = 127, refusal: number = CKR.HOST_MEMORY) {
  let next = 1;
  const open = new Set<number>();
  const backend: PoolBackend & { openAttempts: number; open: PoolBackend["open"] } = {
    max,
    openAttempts: 0,
    open() {
      backend.openAttempts++;
      if (open.size >= limit) return { rv: refusal };
      const handle = next++;
      open.add(handle);
      return { handle };
    },
    close(handle) {
      open.delete(handle);
    },
  };
  return backend;
}

/**
 * The tests' own check that the pool lends a session to one operation at a time: operations run
 * through `run` are counted as overlapping when their session is still in use by another.
 */
function exclusiveUse() {
  const inUse = new Map<number, number>();
  const seen = { overlaps: 0 };
  const done = (session: number) => inUse.set(session, inUse.get(session)! - 1);
  return {
    seen,
    run<T>(session: number, op: () => Promise<T> | T): Promise<T> {
      const already = inUse.get(session) ?? 0;
      if (already > 0) seen.overlaps++;
      inUse.set(session, already + 1);
      let result: Promise<T> | T;
      try {
        result = op();
      } catch (err) {
        done(session);
        throw err;
      }
      return Promise.resolve(result).finally(() => done(session));
    },
  };
}

/** A promise and its resolver: lets a test hold an operation open until it decides. */
function gate() {
  let release!: () => void;
  const done = new Promise<void>((r) => (release = r));
  return { done, release };
}

Deno.test("pool grows lazily: one caller at a time needs one session", async () => {
  const pool = new SessionPool(fakeBackend(10));
  for (let i = 0; i < 5; i++) await pool.use(() => {});
  assert.deepEqual(pool.stats(), { size: 1, inUse: 0, waiting: 0, cap: 127 });
});

Deno.test("pool stops growing at CKR_HOST_MEMORY and callers wait instead of failing", async () => {
  const backend = fakeBackend(3);
  const pool = new SessionPool(backend);
  const exclusive = exclusiveUse();
  const g = gate();
  const ops = Array.from(
    { length: 10 },
    (_, i) => pool.use((s) => exclusive.run(s, async () => (await g.done, [i, s]))),
  );
  assert.deepEqual(pool.stats(), { size: 3, inUse: 3, waiting: 7, cap: 3 });
  g.release();
  const results = await Promise.all(ops);
  assert.equal(results.length, 10);
  assert.equal(pool.stats().size, 3);
  assert.equal(exclusive.seen.overlaps, 0);
  // Once capped, the pool does not knock on the module's door again.
  const attempts = backend.openAttempts;
  await Promise.all(Array.from({ length: 10 }, () => pool.use(() => {})));
  assert.equal(backend.openAttempts, attempts);
});

Deno.test("pool treats CKR_SESSION_COUNT like CKR_HOST_MEMORY", async () => {
  const pool = new SessionPool(fakeBackend(2, 127, CKR.SESSION_COUNT));
  const g = gate();
  const ops = Array.from({ length: 5 }, () => pool.use(() => g.done));
  assert.equal(pool.stats().cap, 2);
  g.release();
  await Promise.all(ops);
});

Deno.test("pool honours --max-sessions without asking the module for more", async () => {
  const backend = fakeBackend(100, 4);
  const pool = new SessionPool(backend);
  const g = gate();
  const ops = Array.from({ length: 9 }, () => pool.use(() => g.done));
  assert.deepEqual(pool.stats(), { size: 4, inUse: 4, waiting: 5, cap: 4 });
  assert.equal(backend.openAttempts, 4);
  g.release();
  await Promise.all(ops);
});

Deno.test("pool: a refusal with no session open, or another error, is reported", async () => {
  await assert.rejects(
    new SessionPool(fakeBackend(0)).acquire(),
    (e: Pkcs11Error) => e.code === "CKR_HOST_MEMORY",
  );
  await assert.rejects(
    new SessionPool(fakeBackend(0, 127, CKR.TOKEN_NOT_PRESENT)).acquire(),
    /C_OpenSession: CKR_TOKEN_NOT_PRESENT/,
  );
});

Deno.test("pool: waiters are served in arrival order", async () => {
  const pool = new SessionPool(fakeBackend(1));
  const order: number[] = [];
  const g = gate();
  const first = pool.use(() => g.done);
  const rest = [1, 2, 3].map((i) => pool.use(() => void order.push(i)));
  g.release();
  await Promise.all([first, ...rest]);
  assert.deepEqual(order, [1, 2, 3]);
});

const sessionGone = (e: unknown) => e instanceof Pkcs11Error && e.rv === CKR.SESSION_HANDLE_INVALID;

Deno.test("pool: a session whose operation says the token is dead is closed, not reused", async () => {
  const backend = { ...fakeBackend(5), isDead: sessionGone };
  const pool = new SessionPool(backend);
  let seen = -1;
  await assert.rejects(
    pool.use((s) => {
      seen = s;
      throw new Pkcs11Error("C_Sign", CKR.SESSION_HANDLE_INVALID);
    }),
  );
  assert.equal(pool.stats().size, 0);
  await pool.use((s) => assert.notEqual(s, seen));
});

Deno.test("pool: when the last session dies and no new one opens, waiters are told, not left waiting", async () => {
  let deviceGone = false;
  const backend = fakeBackend(5, 1);
  const pool = new SessionPool({
    ...backend,
    open: () => deviceGone ? { rv: CKR.DEVICE_REMOVED } : backend.open(),
    isDead: sessionGone,
  });
  const g = gate();
  const holder = pool.use(async () => {
    await g.done;
    throw new Pkcs11Error("C_Sign", CKR.SESSION_HANDLE_INVALID);
  });
  const waiters = [pool.use(() => "first"), pool.use(() => "second")];
  assert.equal(pool.stats().waiting, 2);
  deviceGone = true;
  g.release();
  await assert.rejects(holder, /CKR_SESSION_HANDLE_INVALID/);
  for (const waiter of waiters) await assert.rejects(waiter, /C_OpenSession: CKR_DEVICE_REMOVED/);
  assert.deepEqual(pool.stats(), { size: 0, inUse: 0, waiting: 0, cap: 1 });
});

Deno.test("the exclusive-use check counts an operation that overlaps another on one session", async () => {
  // The detector must be able to fail: drive the same handle twice by releasing it early.
  const pool = new SessionPool(fakeBackend(1));
  const exclusive = exclusiveUse();
  const g = gate();
  const held = pool.use((s) =>
    exclusive.run(s, async () => {
      pool.release(s); // a bug of this kind: handing the session back while still using it
      await g.done;
    })
  );
  const second = pool.use((s) => exclusive.run(s, () => g.done));
  g.release();
  await Promise.all([held, second]);
  assert.equal(exclusive.seen.overlaps, 1);
});

Deno.test("pool.whenIdle waits for lent-out sessions (a stop never closes one under an operation)", async () => {
  const pool = new SessionPool(fakeBackend(10));
  assert.equal(await pool.whenIdle(1000), true);
  const g = gate();
  const running = pool.use(() => g.done);
  let idle: boolean | undefined;
  const waiting = pool.whenIdle(60_000).then((v) => (idle = v));
  await Promise.resolve();
  assert.equal(idle, undefined, "resolved while an operation still held its session");
  g.release();
  await running;
  await waiting;
  assert.equal(idle, true);
});

Deno.test("pool.whenIdle gives up after its timeout and reports it", async () => {
  const pool = new SessionPool(fakeBackend(10));
  const g = gate();
  const running = pool.use(() => g.done);
  assert.equal(await pool.whenIdle(10), false);
  g.release();
  await running;
});
