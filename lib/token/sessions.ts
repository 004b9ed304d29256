/**
 * Sessions: opening one, the pool that lends them, and single PKCS#11 operations on one session.
 *
 * - The pool opens sessions lazily up to a cap and lends each to one operation at a time. When the
 *   module refuses another session (CKR_HOST_MEMORY or CKR_SESSION_COUNT) the pool stops growing
 *   at its current size and later callers wait for a session to be returned.
 * - The single operations run on a session the caller holds exclusively: find objects, read
 *   attributes, copy, sign, verify. They turn return codes into Pkcs11Error and own the buffers
 *   they hand to the module for the whole call.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import { isTokenDead } from "./errors.ts";
 * import { type Handle, type MechanismChoice, openSession, SessionPool, signOnce } from "./sessions.ts";
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
import {
  type AttributeIn,
  check,
  CKF_SESSION,
  CKR,
  type Encoded,
  encodeMechanism,
  encodeTemplate,
  Pkcs11Error,
  type Pkcs11Module,
  readTemplateLengths,
  type SessionFlag,
} from "../../ffi/pkcs11/mod.ts";

/** A session or object handle (CK_ULONG). */
export type Handle = number;

/** UTF-8 bytes of a label. Example: `utf8("svcd")`. */
export function utf8(text: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(text);
}

/**
 * C_OpenSession on `slot` with `flags` (CKF_SERIAL_SESSION is always added); Pkcs11Error on refusal.
 * Pair with `mod.fn.C_CloseSession(session)`.
 * Example: `const s = openSession(mod, token.slotId, CKF_SESSION.RW_SESSION)`.
 */
export function openSession(
  mod: Pkcs11Module,
  slot: number,
  flags: SessionFlag | 0 = 0,
): Handle {
  const out = new BigUint64Array(1);
  check(
    "C_OpenSession",
    mod.fn.C_OpenSession(
      slot,
      CKF_SESSION.SERIAL_SESSION | flags,
      null,
      null,
      new Uint8Array(out.buffer),
    ),
  );
  return Number(out[0]);
}

/** Handles of the objects matching a template (C_FindObjectsInit/C_FindObjects/C_FindObjectsFinal). */
export function findObjects(mod: Pkcs11Module, session: Handle, template: AttributeIn[]): Handle[] {
  const tmpl = encodeTemplate(template);
  check("C_FindObjectsInit", mod.fn.C_FindObjectsInit(session, tmpl.bytes, template.length));
  const found: Handle[] = [];
  try {
    const batch = new BigUint64Array(32);
    const count = new BigUint64Array(1);
    for (;;) {
      check(
        "C_FindObjects",
        mod.fn.C_FindObjects(
          session,
          new Uint8Array(batch.buffer),
          batch.length,
          new Uint8Array(count.buffer),
        ),
      );
      const n = Number(count[0]);
      for (let i = 0; i < n; i++) found.push(Number(batch[i]));
      if (n < batch.length) break;
    }
  } finally {
    mod.fn.C_FindObjectsFinal(session);
  }
  return found;
}

/**
 * C_CopyObject: a new object with `object`'s attributes, those in `template` changed; its handle.
 * Example: `copyObject(mod, session, key, [{ type: CKA.TOKEN, value: boolBytes(false) }])`.
 */
export function copyObject(
  mod: Pkcs11Module,
  session: Handle,
  object: Handle,
  template: AttributeIn[],
): Handle {
  const tmpl = encodeTemplate(template);
  const out = new BigUint64Array(1);
  check(
    "C_CopyObject",
    mod.fn.C_CopyObject(session, object, tmpl.bytes, template.length, new Uint8Array(out.buffer)),
  );
  return Number(out[0]);
}

/**
 * C_CreateObject: a new object with the attributes of `template`; its handle.
 * Example: `createObject(mod, session, [{ type: CKA.CLASS, value: ulongBytes(CKO.DATA) }])`.
 */
export function createObject(mod: Pkcs11Module, session: Handle, template: AttributeIn[]): Handle {
  const tmpl = encodeTemplate(template);
  const out = new BigUint64Array(1);
  check(
    "C_CreateObject",
    mod.fn.C_CreateObject(session, tmpl.bytes, template.length, new Uint8Array(out.buffer)),
  );
  return Number(out[0]);
}

/**
 * Values of the requested attributes of an object; null for one the module marks unavailable
 * (absent or sensitive). Two calls: lengths first, then values.
 */
export function getAttributes(
  mod: Pkcs11Module,
  session: Handle,
  object: Handle,
  types: number[],
): Map<number, Uint8Array | null> {
  const query = encodeTemplate(types.map((type) => ({ type, value: null })));
  let rv = mod.fn.C_GetAttributeValue(session, object, query.bytes, types.length);
  if (!attributeRvUsable(rv)) throw new Pkcs11Error("C_GetAttributeValue", rv);
  const lengths = readTemplateLengths(query.bytes, types.length);
  const values = lengths.map((len) => (len === null ? null : new Uint8Array(len)));
  const fetch = encodeTemplate(types.map((type, i) => ({ type, value: values[i] })));
  rv = mod.fn.C_GetAttributeValue(session, object, fetch.bytes, types.length);
  if (!attributeRvUsable(rv)) throw new Pkcs11Error("C_GetAttributeValue", rv);
  const finalLengths = readTemplateLengths(fetch.bytes, types.length);
  const out = new Map<number, Uint8Array | null>();
  types.forEach((type, i) => {
    const len = finalLengths[i];
    out.set(type, len === null || values[i] === null ? null : values[i]!.subarray(0, len));
  });
  return out;
}

// These codes still fill every attribute that is available and mark the others unavailable.
function attributeRvUsable(rv: number): boolean {
  return rv === CKR.OK || rv === CKR.ATTRIBUTE_SENSITIVE || rv === CKR.ATTRIBUTE_TYPE_INVALID;
}

// A zero-length message still needs a valid pointer: some modules reject NULL pData.
const EMPTY = new Uint8Array(1);

function dataPointer(data: Uint8Array): Uint8Array {
  return data.byteLength === 0 ? EMPTY : data;
}

/** How the signing operations below pick a mechanism and (optional) parameter. */
export interface MechanismChoice {
  mechanism: number;
  parameter?: Encoded;
}

/** What signOnce and signOnceSync take: the key, its mechanism, the data and a first buffer size. */
export type SignArguments = [
  mod: Pkcs11Module,
  session: Handle,
  key: Handle,
  choice: MechanismChoice,
  data: Uint8Array,
  maxLength: number,
];

/**
 * C_SignInit + C_Sign (nonblocking), with a first buffer of `maxLength` bytes; grows it once on
 * CKR_BUFFER_TOO_SMALL. Example: `await signOnce(mod, s, key, { mechanism: CKM.EDDSA }, msg, 64)`.
 */
export async function signOnce(...args: SignArguments): Promise<Uint8Array> {
  const [mod] = args;
  const call = new SignCall(...args);
  let rv = await mod.fn.C_SignAsync(...call.args);
  if (call.out.grown(rv)) rv = await mod.fn.C_SignAsync(...call.args);
  return call.result(rv);
}

/**
 * The C_Sign that finishes an operation C_SignInit began elsewhere and C_Sign left active with
 * CKR_BUFFER_TOO_SMALL, into a buffer of the `length` it asked for; Pkcs11Error on failure.
 */
export function finishSign(
  mod: Pkcs11Module,
  session: Handle,
  data: Uint8Array,
  length: number,
): Uint8Array {
  const out = new SignatureOut(length);
  const rv = mod.fn.C_Sign(session, dataPointer(data), data.byteLength, out.sig, out.lenBytes);
  return out.result(rv);
}

/** As signOnce, but synchronous: for quick mechanisms such as HMAC where a thread hop costs more. */
export function signOnceSync(...args: SignArguments): Uint8Array {
  const [mod] = args;
  const call = new SignCall(...args);
  let rv = mod.fn.C_Sign(...call.args);
  if (call.out.grown(rv)) rv = mod.fn.C_Sign(...call.args);
  return call.result(rv);
}

/**
 * One C_Sign after its C_SignInit: the arguments C_Sign takes (the same for the nonblocking and
 * the synchronous call), and the mechanism's encoding kept alive until the result is read.
 */
class SignCall {
  readonly out: SignatureOut;
  readonly #session: Handle;
  readonly #input: Uint8Array;
  readonly #length: number;
  readonly #mech: Encoded;

  constructor(...[mod, session, key, choice, data, maxLength]: SignArguments) {
    this.#mech = signInit(mod, session, key, choice);
    this.#session = session;
    this.#input = dataPointer(data);
    this.#length = data.byteLength;
    this.out = new SignatureOut(maxLength);
  }

  /** C_Sign's arguments, read anew for each call: a grown buffer replaces the first one. */
  get args(): Parameters<Pkcs11Module["fn"]["C_Sign"]> {
    return [this.#session, this.#input, this.#length, this.out.sig, this.out.lenBytes];
  }

  result(rv: number): Uint8Array {
    keepAlive(this.#mech);
    return this.out.result(rv);
  }
}

/** C_SignInit; returns the mechanism encoding, which must stay alive until C_Sign returns. */
function signInit(
  mod: Pkcs11Module,
  session: Handle,
  key: Handle,
  choice: MechanismChoice,
): Encoded {
  const mech = mechanismBytes(choice);
  check("C_SignInit", mod.fn.C_SignInit(session, mech.bytes, key));
  return mech;
}

/**
 * C_Sign's output: a buffer and its CK_ULONG in/out length cell. CKR_BUFFER_TOO_SMALL leaves the
 * operation active and the needed length in the cell, so one more call with a buffer that size works.
 */
class SignatureOut {
  sig: Uint8Array;
  readonly #len: BigUint64Array<ArrayBuffer>;
  readonly lenBytes: Uint8Array;

  constructor(maxLength: number) {
    this.sig = new Uint8Array(maxLength);
    this.#len = lengthCell(maxLength);
    this.lenBytes = new Uint8Array(this.#len.buffer);
  }

  /** True (with a buffer of the asked-for size) when `rv` says the first one was too small. */
  grown(rv: number): boolean {
    if (rv !== CKR.BUFFER_TOO_SMALL) return false;
    this.sig = new Uint8Array(Number(this.#len[0]));
    return true;
  }

  /** The signature, or Pkcs11Error for a failed C_Sign. */
  result(rv: number): Uint8Array {
    check("C_Sign", rv);
    return trimmed(this.sig, Number(this.#len[0]));
  }
}

// A mechanism without a parameter is plain bytes (no pointer inside), the same for every call:
// encode it once. The module only reads it during C_SignInit.
const plainMechanisms = new Map<number, Encoded>();

function mechanismBytes(choice: MechanismChoice): Encoded {
  if (choice.parameter) return encodeMechanism(choice.mechanism, choice.parameter);
  let mech = plainMechanisms.get(choice.mechanism);
  if (!mech) {
    mech = encodeMechanism(choice.mechanism);
    plainMechanisms.set(choice.mechanism, mech);
  }
  return mech;
}

/** A CK_ULONG in/out length cell holding `n` (filling it is cheaper than building it from a list). */
function lengthCell(n: number): BigUint64Array<ArrayBuffer> {
  const cell = new BigUint64Array(1);
  cell[0] = BigInt(n);
  return cell;
}

/** The first `n` bytes of a fresh output buffer: the buffer itself when the module filled it all. */
function trimmed(out: Uint8Array, n: number): Uint8Array {
  return n === out.length ? out : out.slice(0, n);
}

/**
 * C_VerifyInit + C_Verify (nonblocking): true when valid, false on CKR_SIGNATURE_INVALID or
 * CKR_SIGNATURE_LEN_RANGE, Pkcs11Error otherwise.
 */
export async function verifyOnce(
  mod: Pkcs11Module,
  session: Handle,
  key: Handle,
  choice: MechanismChoice,
  data: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  const mech = mechanismBytes(choice);
  check("C_VerifyInit", mod.fn.C_VerifyInit(session, mech.bytes, key));
  const rv = await mod.fn.C_VerifyAsync(
    session,
    dataPointer(data),
    data.byteLength,
    dataPointer(signature),
    signature.byteLength,
  );
  keepAlive(mech);
  if (rv === CKR.OK) return true;
  if (rv === CKR.SIGNATURE_INVALID || rv === CKR.SIGNATURE_LEN_RANGE) return false;
  throw new Pkcs11Error("C_Verify", rv);
}

const retained: unknown[] = [];

/**
 * Referencing the encodings after an awaited call keeps the buffers they point into alive until
 * the module is done with them (the GC cannot see pointers stored inside byte arrays): call it
 * with them once the call has returned. Example: `keepAlive(mech, template)`.
 */
export function keepAlive(...items: unknown[]): void {
  retained.push(items);
  retained.length = 0;
}

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
}
