/**
 * Keys and MAC secrets by label, resolved once and used cheaply: a key found by label is copied
 * into a session object (C_CopyObject with CKA_TOKEN=false; sensitive and non-extractable like the
 * original) held by a session of its own, and signs through that copy — SoftHSM re-reads and
 * decrypts a token object's file on every C_SignInit, a session object not. Where the module
 * refuses the copy, the token object is used. A key deleted or replaced on the token stops being
 * used when the daemon asks: refresh() (SIGHUP) drops every copy, dropRemoved() (/health) drops
 * those whose token object is gone. A dropped copy still in use is destroyed after its last use.
 *
 * Every thread of the process has its own Token and KeyCache, and their copies are session objects
 * of the one process: a lookup that counts objects by label, and every copy, hold the process's
 * copy lock (below, with why), so that a copy still being made is never counted as a
 * second key.
 *
 * The Token owns one KeyCache; nothing else does.
 */
import {
  type AttributeIn,
  boolBytes,
  CKA,
  CKC,
  ckmName,
  CKO,
  CKR,
  encodeTemplate,
  type Pkcs11Module,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { isStaleHandle, isTokenDead, KeyUnusableError } from "./errors.ts";
import {
  identifyKeyType,
  type KeyTypeName,
  type KeyTypeSpec,
  type PublicKey,
  readPublicKey,
  type SigningMechanism,
} from "./key_types.ts";
import { type DigestName, type MechanismCatalogue, offeredDigestNames } from "./mechanisms.ts";
import {
  copyObject,
  findObjects,
  getAttributes,
  type Handle,
  openSession,
  type SessionPool,
  utf8,
} from "./sessions.ts";
import { SignPlacement } from "./sign_placement.ts";

/** A signing key found by label. */
export interface SigningKey extends PublicKey {
  label: string;
  keyType: KeyTypeName;
  /** The mechanism it signs with, by name, e.g. "CKM_ML_DSA". */
  mechanism: string;
  /** The digest names it takes in digest mode with this module (./mechanisms.ts); may be empty. */
  digests: DigestName[];
}

/** What signing and verifying with a key use, behind the SigningKey the caller holds. */
export interface KeyInternals {
  /** What C_SignInit is given: the working copy, or the token object where no copy could be made. */
  handle: Handle;
  /** The object on the token the key was found as. */
  tokenHandle: Handle;
  publicHandle: Handle;
  spec: KeyTypeSpec;
  signing: SigningMechanism;
  /** Operations signing or verifying with it now: a dropped copy is destroyed when none is left. */
  uses: number;
  /** Dropped (SIGHUP, /health, a stale handle): new operations look the key up again. */
  retired: boolean;
  /** Which thread its signatures run on. */
  placement: SignPlacement;
  /** The private key's CKA_ID: what its certificate is found by; empty when it has none. */
  id: Uint8Array;
}

/** A MAC secret: its working copy (or the token object) and the token object. */
interface Secret {
  handle: Handle;
  tokenHandle: Handle;
}

/**
 * Lookups find token objects only: the working copies (session objects with the same label) are
 * visible to every session of this process, and one still in use must not look like a duplicate.
 */
const ON_TOKEN = { type: CKA.TOKEN, value: boolBytes(true) };

/** The resolved keys and secrets of one token, with their working copies. */
export class KeyCache {
  readonly #mod: Pkcs11Module;
  readonly #slot: number;
  readonly #offered: MechanismCatalogue;
  readonly #pool: SessionPool;
  readonly #inlineSignLimitUs: number;
  readonly #copyLock: CopyLock;
  readonly #lookups = new Map<string, Promise<SigningKey | undefined>>();
  readonly #internals = new WeakMap<SigningKey, KeyInternals>();
  readonly #secrets = new Map<string, Secret>();
  /** Resolved keys by label: what dropRemoved() checks. */
  readonly #resolved = new Map<string, KeyInternals>();
  /** The session that holds the working copies (never lent out: closing it would destroy them). */
  #copySession: Handle | undefined;

  constructor(
    mod: Pkcs11Module,
    slot: number,
    offered: MechanismCatalogue,
    pool: SessionPool,
    inlineSignLimitUs: number,
    copyLock: CopyLock,
  ) {
    this.#mod = mod;
    this.#slot = slot;
    this.#offered = offered;
    this.#pool = pool;
    this.#inlineSignLimitUs = inlineSignLimitUs;
    this.#copyLock = copyLock;
  }

  /** The private key with this label (cached), or undefined. Throws if its mechanism is not offered. */
  key(label: string): Promise<SigningKey | undefined> {
    let found = this.#lookups.get(label);
    if (!found) {
      found = this.#pool.use((s) => this.#resolveKey(s, label));
      this.#lookups.set(label, found);
      // A miss or a failure is not cached: the key may be created later.
      found.then((k) => k ?? this.#lookups.delete(label), () => this.#lookups.delete(label));
    }
    return found;
  }

  /** Forgets the cached lookup of `label` (not its working copy): the next key() looks again. */
  forgetLookup(label: string): void {
    this.#lookups.delete(label);
  }

  /**
   * The internals to use for `key`, counted in use: its own, or, once they were dropped, those of
   * the key found by its label now (a request that obtained the key just before a SIGHUP still
   * signs). The count is taken in the same synchronous step as the check, so a drop cannot come
   * between them. Pair with release().
   */
  acquire(key: SigningKey): KeyInternals | Promise<KeyInternals> {
    const k = this.#internalsOf(key);
    if (k.retired) return this.#reacquire(key);
    k.uses++;
    return k;
  }

  /** Ends a use; the last use of a dropped copy destroys it. */
  release(k: KeyInternals): void {
    k.uses--;
    if (k.retired && k.uses === 0) this.#destroyCopy(k);
  }

  /** Rethrows `err`, first dropping the key when the error says its handle is stale. */
  forgetStaleKey(key: SigningKey, err: unknown): never {
    if (isStaleHandle(err)) this.#forgetKey(key.label);
    throw err;
  }

  /** The handle to MAC with for the secret key `label`, found (and copied) on first use. */
  secretHandle(session: Handle, label: string): Handle {
    const cached = this.#secrets.get(label);
    if (cached !== undefined) return cached.handle;
    const found = this.#countable(session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.SECRET_KEY) },
      { type: CKA.LABEL, value: utf8(label) },
      ON_TOKEN,
    ]);
    if (found.length !== 1) {
      throw new Error(
        found.length === 0
          ? `no secret key labelled '${label}' on the token (svcd token init creates svc-audit)`
          : `${found.length} secret keys are labelled '${label}'; labels must be unique`,
      );
    }
    const handle = this.#workingCopy(found[0]);
    this.#secrets.set(label, { handle, tokenHandle: found[0] });
    return handle;
  }

  /** Drops the secret `label` when `err` says its handle is stale. */
  forgetStaleSecret(label: string, err: unknown): void {
    if (isStaleHandle(err)) this.#forgetSecret(label);
  }

  /** Drops every resolved key and secret with its working copy (see Token.refreshKeys). */
  refresh(): void {
    for (const label of [...this.#resolved.keys()]) this.#forgetKey(label);
    for (const label of [...this.#secrets.keys()]) this.#forgetSecret(label);
  }

  /** Drops the keys and secrets whose token object is gone; returns their labels. */
  dropRemoved(): string[] {
    const session = this.#copySession;
    if (session === undefined) return [];
    const gone: string[] = [];
    const probe = new Uint8Array(8);
    const template = encodeTemplate([{ type: CKA.CLASS, value: probe }]);
    const exists = (h: Handle) =>
      this.#mod.fn.C_GetAttributeValue(session, h, template.bytes, 1) === CKR.OK;
    for (const [label, k] of [...this.#resolved]) {
      if (!exists(k.tokenHandle)) (this.#forgetKey(label), gone.push(label));
    }
    for (const [label, k] of [...this.#secrets]) {
      if (!exists(k.tokenHandle)) (this.#forgetSecret(label), gone.push(label));
    }
    return gone;
  }

  /** The labels of the private keys on the token (duplicates included). */
  privateKeyLabels(session: Handle): string[] {
    const handles = this.#countable(session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      ON_TOKEN,
    ]);
    return handles.map((h) =>
      decodeLabel(getAttributes(this.#mod, session, h, [CKA.LABEL]).get(CKA.LABEL))
    );
  }

  /** The public key labelled `label` (not cached), or undefined when there is none. */
  publicKeyOf(
    session: Handle,
    label: string,
  ): Omit<SigningKey, "mechanism" | "digests"> | undefined {
    const pubs = findObjects(this.#mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
      { type: CKA.LABEL, value: utf8(label) },
      ON_TOKEN,
    ]);
    if (pubs.length === 0) return undefined;
    const spec = identifyKeyType(this.#mod, session, pubs[0], label);
    return {
      label,
      keyType: spec.name,
      ...readPublicKey(this.#mod, session, pubs[0], spec, label),
    };
  }

  /**
   * The DER of every X.509 certificate object on the token with the key's CKA_ID (usually one;
   * two for the moment a renewal has stored the new one and not yet destroyed the old). None when
   * the key has no CKA_ID: an empty one would match every certificate stored without one.
   */
  certificatesOf(session: Handle, key: SigningKey): Uint8Array[] {
    const id = this.idOf(key);
    if (id.length === 0) return [];
    const found = findObjects(this.#mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
      { type: CKA.CERTIFICATE_TYPE, value: ulongBytes(CKC.X_509) },
      { type: CKA.ID, value: id },
      ON_TOKEN,
    ]);
    const values: Uint8Array[] = [];
    for (const handle of found) {
      const value = getAttributes(this.#mod, session, handle, [CKA.VALUE]).get(CKA.VALUE);
      if (value && value.length > 0) values.push(value);
    }
    return values;
  }

  /** The key's CKA_ID as found on the token (empty when it has none). */
  idOf(key: SigningKey): Uint8Array {
    return this.#internalsOf(key).id;
  }

  /** Closes the session holding the working copies (which destroys them). */
  close(): void {
    if (this.#copySession !== undefined) this.#mod.fn.C_CloseSession(this.#copySession);
  }

  #internalsOf(key: SigningKey): KeyInternals {
    const k = this.#internals.get(key);
    if (!k) {
      throw new Error(`key '${key.label}' was not obtained from this token; use token.key(label)`);
    }
    return k;
  }

  async #reacquire(key: SigningKey): Promise<KeyInternals> {
    // Dropped again while it was looked up (a SIGHUP storm) at most twice more; then give up.
    for (let attempt = 0; attempt < 3; attempt++) {
      const now = await this.key(key.label);
      if (!now) break;
      const k = this.#internalsOf(now);
      if (k.retired) continue;
      k.uses++;
      return k;
    }
    throw new KeyUnusableError(key.label, "gone", `key '${key.label}' is no longer on the token`);
  }

  #forgetKey(label: string): void {
    this.#lookups.delete(label);
    const k = this.#resolved.get(label);
    this.#resolved.delete(label);
    if (k) this.#retire(k);
  }

  #retire(k: KeyInternals): void {
    if (k.retired) return;
    k.retired = true;
    if (k.uses === 0) this.#destroyCopy(k);
  }

  #forgetSecret(label: string): void {
    const k = this.#secrets.get(label);
    this.#secrets.delete(label);
    if (k) this.#destroyCopy(k);
  }

  #destroyCopy(k: Secret): void {
    if (k.handle !== k.tokenHandle && this.#copySession !== undefined) {
      this.#mod.fn.C_DestroyObject(this.#copySession, k.handle); // gone already is as good
    }
  }

  /**
   * A session object copied from `object` (CKA_TOKEN=false; the copy keeps the original's
   * CKA_SENSITIVE and CKA_EXTRACTABLE), or `object` itself where the module refuses a copy
   * (CKA_COPYABLE false, C_CopyObject not supported): correct either way, only slower.
   */
  #workingCopy(object: Handle): Handle {
    try {
      const session = this.#copySession ??= openSession(this.#mod, this.#slot);
      return this.#copyLock.hold(() =>
        copyObject(this.#mod, session, object, [{ type: CKA.TOKEN, value: boolBytes(false) }])
      );
    } catch (err) {
      if (isTokenDead(err)) throw err;
      return object;
    }
  }

  /**
   * The token objects matching `template`, found while no copy is being made in this process (the
   * copy lock): the count is what is on the token. Private keys and secrets only: they are what
   * gets copied (public keys never are).
   */
  #countable(session: Handle, template: AttributeIn[]): Handle[] {
    return this.#copyLock.hold(() => findObjects(this.#mod, session, template));
  }

  #resolveKey(session: Handle, label: string): SigningKey | undefined {
    const privs = this.#countable(session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      { type: CKA.LABEL, value: utf8(label) },
      ON_TOKEN,
    ]);
    if (privs.length === 0) return undefined;
    if (privs.length > 1) {
      throw new KeyUnusableError(
        label,
        "duplicate-label",
        `${privs.length} private keys are labelled '${label}'; labels must be unique`,
      );
    }
    const pubs = findObjects(this.#mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
      { type: CKA.LABEL, value: utf8(label) },
      ON_TOKEN,
    ]);
    if (pubs.length === 0) {
      throw new KeyUnusableError(
        label,
        "missing-public-key",
        `key '${label}' has no public key object with the same label`,
      );
    }
    const spec = identifyKeyType(this.#mod, session, pubs[0], label);
    const signing = this.#offered.signingFor(spec, label);
    const key: SigningKey = {
      label,
      keyType: spec.name,
      mechanism: ckmName(signing.mechanism),
      digests: offeredDigestNames(spec, (t, m, f) => this.#offered.offersFor(t, m, f)),
      ...readPublicKey(this.#mod, session, pubs[0], spec, label),
    };
    const internals = {
      handle: this.#workingCopy(privs[0]),
      tokenHandle: privs[0],
      publicHandle: pubs[0],
      spec,
      signing,
      uses: 0,
      retired: false,
      placement: new SignPlacement(this.#inlineSignLimitUs),
      id: getAttributes(this.#mod, session, privs[0], [CKA.ID]).get(CKA.ID) ?? new Uint8Array(),
    };
    const earlier = this.#resolved.get(label); // a lookup whose cache entry was dropped
    if (earlier) this.#retire(earlier);
    this.#internals.set(key, internals);
    this.#resolved.set(label, internals);
    return key;
  }
}

function decodeLabel(bytes: Uint8Array | null | undefined): string {
  return bytes ? new TextDecoder().decode(bytes) : "";
}

/*
 * The copy lock: one lock for the whole process, held around every C_CopyObject that makes a
 * working copy (above) and around every lookup that counts the objects with a label. Every
 * thread of the process that opens the token (the main isolate and each Worker, each with its own
 * Token) holds the same lock: it lives in a SharedArrayBuffer that the first Token makes and the
 * others are given (TokenOptions.copyLock).
 *
 * Why: a module may let a C_FindObjects of one thread see a copy that another thread's
 * C_CopyObject is still making. SoftHSM2 does: it adds the new session object to its store first,
 * copies the original's attributes into it one by one (CKA_TOKEN=true and CKA_LABEL among them)
 * and applies the template (CKA_TOKEN=false) last, so for that moment a lookup for the token
 * object with the label finds two — a second key that does not exist. Session objects belong to
 * the process, so every thread's lookups see every thread's copies. With the lock, no lookup
 * runs while a copy is being made: what a lookup counts is what is on the token (finished copies
 * are CKA_TOKEN=false and never match). A second key really made on the token with the same label
 * is still counted.
 *
 * Both are short synchronous module calls, so the lock is a word of shared memory taken with
 * Atomics (no event loop in between). A thread waits for it at most COPY_LOCK_WAIT_MS and
 * then fails the lookup or the copy: a thread ended while it held the lock (a Worker terminated in
 * the middle of a call, at a stop) must not hang every other thread.
 */

/** How long a thread waits for the copy lock before it gives up the lookup or copy. */
export const COPY_LOCK_WAIT_MS = 10_000;

const FREE = 0;
const HELD = 1;

/** The copy lock could not be taken in time: another thread held it throughout. */
export class CopyLockTimeout extends Error {
  override name = "CopyLockTimeout";
}

/**
 * One process-wide lock over a shared word; see the comment above for what it orders.
 *
 * @example
 * ```ts
 * const lock = new CopyLock();
 * const inWorker = new CopyLock(lock.buffer); // the same lock, in another thread
 * inWorker.hold(() => "one module call at a time across both");
 * ```
 */
export class CopyLock {
  /** The shared word: give it to another thread's Token to share the lock. */
  readonly buffer: SharedArrayBuffer;
  readonly #word: Int32Array;
  readonly #waitMs: number;

  /**
   * The lock held in `buffer` (another thread's {@link buffer}), or a new one. `waitMs` is a seam
   * for tests (a lock never released, without waiting the full time); the daemon never passes it.
   */
  constructor(
    buffer: SharedArrayBuffer = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT),
    waitMs: number = COPY_LOCK_WAIT_MS,
  ) {
    this.buffer = buffer;
    this.#word = new Int32Array(buffer, 0, 1);
    this.#waitMs = waitMs;
  }

  /**
   * Runs `call` (synchronous: the lock is released when it returns or throws) holding the lock.
   * Throws {@link CopyLockTimeout} when the lock stayed held for its wait ({@link COPY_LOCK_WAIT_MS}).
   */
  hold<T>(call: () => T): T {
    this.#take();
    try {
      return call();
    } finally {
      Atomics.store(this.#word, 0, FREE);
      Atomics.notify(this.#word, 0, 1);
    }
  }

  #take(): void {
    const deadline = performance.now() + this.#waitMs;
    while (Atomics.compareExchange(this.#word, 0, FREE, HELD) !== FREE) {
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new CopyLockTimeout(
          `another thread held the token's copy lock for ${this.#waitMs} ms`,
        );
      }
      Atomics.wait(this.#word, 0, HELD, left);
    }
  }
}
