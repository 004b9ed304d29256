/**
 * The session pool: sessions are opened lazily up to a cap, each lent to one operation at a time.
 * When the module refuses another session (CKR_HOST_MEMORY or CKR_SESSION_COUNT) the pool stops
 * growing at its current size and later callers wait for a session to be returned.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import { isTokenDead } from "./errors.ts";
 * import { type Handle, type MechanismChoice, openSession, signOnce } from "./session_ops.ts";
 * declare const mod: Pkcs11Module, slot: number, key: Handle, mechanism: MechanismChoice;
 * declare const data: Uint8Array;
 * const pool = new SessionPool({
 *   open: () => ({ handle: openSession(mod, slot) }),
 *   close: (handle) => mod.fn.C_CloseSession(handle),
 *   isDead: isTokenDead,
 *   max: 127,
 * });
 * const sig = await pool.use((session) => signOnce(mod, session, key, mechanism, data, 64));
 * ```
 */
import { CKR, Pkcs11Error } from "../../ffi/pkcs11/mod.ts";
import type { Handle } from "./session_ops.ts";

/** What the pool needs from the module. `open` returns a handle or the CK_RV of a refusal. */
export interface PoolBackend {
  open(): { handle: Handle } | { rv: number };
  close(handle: Handle): void;
  /** Whether an operation's error means its session is dead: it is closed, never lent again. */
  isDead?(err: unknown): boolean;
  max: number;
}

/** A caller waiting for a session. */
interface Waiter {
  resolve(handle: Handle): void;
  reject(err: unknown): void;
}

/** Pool figures. Example: `{ size: 3, inUse: 3, waiting: 61, cap: 3 }`. */
export interface PoolStats {
  /** Sessions open. */
  size: number;
  /** Sessions lent out now. */
  inUse: number;
  /** Callers waiting for a session. */
  waiting: number;
  /** The most sessions the pool will open: --max-sessions, or the size at which the module refused. */
  cap: number;
}

/** Evidence that no session served two operations at once (tests read it). */
export interface SessionUseStats {
  /** Operations run through the pool. */
  operations: number;
  /** Times an operation started on a session that already had one in progress (must stay 0). */
  overlaps: number;
  /** Most operations in progress at one moment, over all sessions. */
  maxConcurrent: number;
  /** Distinct sessions that served an operation. */
  sessionsUsed: number;
}

const REFUSALS = new Set<number>([CKR.HOST_MEMORY, CKR.SESSION_COUNT]);

/** A lazily grown, capped pool of sessions with exclusive use. */
export class SessionPool {
  #backend: PoolBackend;
  #idle: Handle[] = [];
  #all = new Set<Handle>();
  #waiters: Waiter[] = [];
  #idleWaiters: (() => void)[] = [];
  #cap: number;
  #closed = false;
  // Instrumentation, independent of the free list: which sessions have an operation in progress.
  #active = new Map<Handle, number>();
  #inFlight = 0;
  #used = new Set<Handle>();
  #use: SessionUseStats = { operations: 0, overlaps: 0, maxConcurrent: 0, sessionsUsed: 0 };

  constructor(backend: PoolBackend) {
    this.#backend = backend;
    this.#cap = backend.max;
  }

  /**
   * Runs `fn` with a session of its own; the session returns to the pool afterwards, or is closed
   * when the backend calls the error dead.
   */
  use<T>(fn: (session: Handle) => Promise<T> | T): Promise<T> {
    // An idle session is lent at once: no promise turn before a synchronous fn (the audit MAC).
    const idle = this.#closed ? undefined : this.#idle.pop();
    if (idle !== undefined) return this.#run(idle, fn);
    return this.acquire().then((session) => this.#run(session, fn));
  }

  #run<T>(session: Handle, fn: (session: Handle) => Promise<T> | T): Promise<T> {
    this.#enter(session);
    let result: Promise<T> | T;
    try {
      result = fn(session);
    } catch (err) {
      this.#finish(session, this.#backend.isDead?.(err));
      return Promise.reject(err);
    }
    if (!(result instanceof Promise)) {
      this.#finish(session, false);
      return Promise.resolve(result);
    }
    return result.then(
      (value) => {
        this.#finish(session, false);
        return value;
      },
      (err) => {
        this.#finish(session, this.#backend.isDead?.(err));
        throw err;
      },
    );
  }

  /** Gives the session back, or closes it when the operation's error says it is dead. */
  #finish(session: Handle, dead: boolean | undefined): void {
    this.#exit(session);
    if (dead) this.#discard(session);
    else this.release(session);
  }

  /** A session for exclusive use; waits when the pool is at its cap. Pair with release(). */
  acquire(): Promise<Handle> {
    if (this.#closed) return Promise.reject(new Error("the token is closed"));
    const idle = this.#idle.pop();
    if (idle !== undefined) return Promise.resolve(idle);
    if (this.#all.size < this.#cap) {
      const opened = this.#backend.open();
      if ("handle" in opened) {
        this.#all.add(opened.handle);
        return Promise.resolve(opened.handle);
      }
      if (!REFUSALS.has(opened.rv) || this.#all.size === 0) {
        return Promise.reject(new Pkcs11Error("C_OpenSession", opened.rv));
      }
      // The module's own limit: stop growing here and wait like any caller past the cap.
      this.#cap = this.#all.size;
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Returns a session: to the next waiter if any, else to the idle list. */
  release(session: Handle): void {
    if (this.#closed || !this.#all.has(session)) return;
    const next = this.#waiters.shift();
    if (next) next.resolve(session);
    else this.#idle.push(session);
    this.#notifyIfIdle();
  }

  /**
   * Resolves true once no session is lent out, or false after `timeoutMs` — for a stop that must
   * not close sessions under a running operation.
   */
  whenIdle(timeoutMs: number): Promise<boolean> {
    if (this.#all.size === this.#idle.length) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.#idleWaiters = this.#idleWaiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs);
      this.#idleWaiters.push(done);
    });
  }

  #notifyIfIdle(): void {
    if (this.#idleWaiters.length > 0 && this.#all.size === this.#idle.length) {
      for (const w of this.#idleWaiters.splice(0)) w();
    }
  }

  /** Figures for /health and tests. */
  stats(): PoolStats {
    return {
      size: this.#all.size,
      inUse: this.#all.size - this.#idle.length,
      waiting: this.#waiters.length,
      cap: this.#cap,
    };
  }

  /** Session-use evidence (see SessionUseStats). */
  useStats(): SessionUseStats {
    return { ...this.#use, sessionsUsed: this.#used.size };
  }

  /** Closes every session; waiting callers are left pending forever, so close only at shutdown. */
  close(): void {
    this.#closed = true;
    for (const handle of this.#all) this.#backend.close(handle);
    this.#all.clear();
    this.#idle = [];
  }

  #discard(session: Handle): void {
    this.#all.delete(session);
    this.#backend.close(session);
    this.#notifyIfIdle();
    // A waiter may now be served by a fresh session.
    const next = this.#waiters.shift();
    if (next) this.acquire().then(next.resolve, (err) => this.#openFailed(next, err));
  }

  /**
   * No session could be opened for a waiter. While sessions remain lent out, a release serves it;
   * with none left, nothing ever will: every waiter is told why instead of waiting forever.
   */
  #openFailed(waiter: Waiter, err: unknown): void {
    if (this.#all.size > 0) {
      this.#waiters.unshift(waiter);
      return;
    }
    waiter.reject(err);
    for (const other of this.#waiters.splice(0)) other.reject(err);
  }

  #enter(session: Handle): void {
    this.#use.operations++;
    const already = this.#active.get(session) ?? 0;
    if (already > 0) this.#use.overlaps++;
    this.#active.set(session, already + 1);
    this.#used.add(session);
    this.#inFlight++;
    this.#use.maxConcurrent = Math.max(this.#use.maxConcurrent, this.#inFlight);
  }

  #exit(session: Handle): void {
    this.#inFlight--;
    const left = (this.#active.get(session) ?? 1) - 1;
    if (left > 0) this.#active.set(session, left);
    else this.#active.delete(session);
  }
}
