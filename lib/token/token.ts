/**
 * The token as svcd uses it: one module opening, one login, a session pool, keys by label, and
 * sign/verify/mac through the pool with the mechanism the key-type table prescribes.
 *
 * Keys are resolved once and used cheaply: a key found by label is copied into a session object
 * (C_CopyObject with CKA_TOKEN=false; sensitive and non-extractable like the original) held by a
 * session of its own, and signs through that copy — SoftHSM re-reads and decrypts a token object's
 * file on every C_SignInit, a session object not. Where the module refuses the copy, the token
 * object is used. A key deleted or replaced on the token stops being used when the daemon asks:
 * refreshKeys() (SIGHUP) drops every copy, dropRemovedKeys() (/health) drops those whose token
 * object is gone. Its helpers
 * have files named for their job: slots.ts (finding the token by label), public_key.ts (key types
 * and public keys), mechanisms.ts (what the module offers), keygen.ts (key generation).
 *
 * @example
 * ```ts
 * import { Token } from "./token.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * const key = await token.key("web-signing");
 * const sig = await token.sign(key!, new TextEncoder().encode("hello"));
 * ```
 */
import { createHash } from "node:crypto";
import {
  boolBytes,
  check,
  CKA,
  CKF_SESSION,
  type CkInfo,
  CKM,
  ckmName,
  CKO,
  CKR,
  CKS,
  type CkTokenInfo,
  CKU,
  decodeInfo,
  decodeSessionInfo,
  decodeTokenInfo,
  encodeTemplate,
  formatVersion,
  loadedModule,
  type MechanismFlag,
  Pkcs11Error,
  type Pkcs11Module,
  SIZE,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { readPinCredential } from "./credential.ts";
import { type DigestName, digestSigning, offeredDigestNames } from "./digest_mode.ts";
import { isKeyProblem, isStaleHandle, isTokenDead, KeyUnusableError } from "./errors.ts";
import {
  generateMacSecret,
  generateSigningKeyPair,
  requireKeyGeneration,
  requireMacKeyGeneration,
} from "./keygen.ts";
import {
  KEY_TYPES,
  type KeyTypeName,
  type KeyTypeSpec,
  type SigningMechanism,
} from "./key_types.ts";
import { MechanismCatalogue } from "./mechanisms.ts";
import { acquireModule, releaseModule } from "./module_state.ts";
import { type PoolStats, SessionPool, type SessionUseStats } from "./pool.ts";
import { identifyKeyType, type PublicKey, readPublicKey } from "./public_key.ts";
import {
  copyObject,
  findObjects,
  getAttributes,
  type Handle,
  type MechanismChoice,
  openSession,
  signOnce,
  signOnceSync,
  utf8,
  verifyOnce,
} from "./session_ops.ts";
import { HoldTimer, SignPlacement } from "./sign_placement.ts";
import { findSlotByLabel } from "./slots.ts";

/** How to reach the token. */
export interface TokenOptions {
  /** Path of the PKCS#11 module (e.g. /usr/lib/softhsm/libsofthsm2.so). */
  modulePath: string;
  /** Label given at `svcd token init`; the slot is found by it, never by number. */
  tokenLabel: string;
  /** Most sessions the pool opens (default 127). */
  maxSessions?: number;
  /**
   * Tests only: the pool's C_OpenSession answers CKR_HOST_MEMORY once this many sessions are open,
   * as a module with a session cap does.
   */
  fakeSessionCap?: number;
  /**
   * A key's signatures run on the calling thread while most of its recent ones held it less than
   * this many µs (CPU, or waiting when the module slept), else on a thread-pool thread (see
   * sign_placement.ts): the hop to the pool costs more than a quick signature. 0 (the default):
   * always the pool. Infinity: always the calling thread, for a Worker with nothing else to run
   * meanwhile (the public listener's).
   */
  inlineSignLimitUs?: number;
  /** Told when a key's signatures move to the thread pool because they were slow (for the log). */
  onPooled?: (label: string) => void;
}

/** A signing key found by label. */
export interface SigningKey extends PublicKey {
  label: string;
  keyType: KeyTypeName;
  /** The mechanism it signs with, by name, e.g. "CKM_ML_DSA". */
  mechanism: string;
  /** The digest names it takes in digest mode with this module (./digest_mode.ts); may be empty. */
  digests: DigestName[];
}

/**
 * What the token and module say about themselves. Counts are null where the module withholds them.
 * A type alias (not an interface) so it is assignable to Record<string, unknown>.
 */
export type TokenInfo =
  & Pick<
    CkTokenInfo,
    | "label"
    | "manufacturerId"
    | "model"
    | "serialNumber"
    | "flags"
    | "maxSessionCount"
    | "sessionCount"
  >
  & {
    /** CK_TOKEN_INFO's versions as "major.minor". */
    hardwareVersion: string;
    firmwareVersion: string;
    /** The PKCS#11 version the module reports in C_GetInfo. */
    cryptokiVersion: string;
    /** The version stored in the function table svcd calls through. */
    functionTableVersion: string;
    libraryDescription: string;
    libraryVersion: string;
    slotId: number;
  };

interface KeyInternals {
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
}

const DEFAULT_MAX_SESSIONS = 127;
/**
 * Lookups find token objects only: the working copies (session objects with the same label) are
 * visible to every session of this process, and one still in use must not look like a duplicate.
 */
const ON_TOKEN = { type: CKA.TOKEN, value: boolBytes(true) };
const HMAC_LENGTH = 32;

/** An opened token. Create with Token.open(); close() at shutdown. */
export class Token {
  readonly #mod: Pkcs11Module;
  readonly #slot: number;
  readonly #opts: TokenOptions;
  readonly #pool: SessionPool;
  readonly #keys = new Map<string, Promise<SigningKey | undefined>>();
  readonly #internals = new WeakMap<SigningKey, KeyInternals>();
  readonly #secrets = new Map<string, { handle: Handle; tokenHandle: Handle }>();
  /** Resolved keys by label: what dropRemovedKeys() checks. */
  readonly #resolved = new Map<string, KeyInternals>();
  /** The session that holds the working copies (never lent out: closing it would destroy them). */
  #copySession: Handle | undefined;
  readonly #offered: MechanismCatalogue;
  #moduleInfo: CkInfo | undefined;
  #deadListeners: ((err: Pkcs11Error) => void)[] = [];
  #deadError: Pkcs11Error | undefined;
  #loginAttempted = false;
  #closed = false;
  /** Times signatures made on this thread (one at a time: they are synchronous). */
  readonly #holdTimer: HoldTimer;

  private constructor(mod: Pkcs11Module, slot: number, opts: TokenOptions) {
    this.#mod = mod;
    this.#slot = slot;
    this.#opts = opts;
    this.#holdTimer = new HoldTimer((opts.inlineSignLimitUs ?? 0) / 1000);
    this.#offered = new MechanismCatalogue(mod, slot);
    let opened = 0;
    this.#pool = new SessionPool({
      max: opts.maxSessions ?? DEFAULT_MAX_SESSIONS,
      open: () => {
        if (opts.fakeSessionCap !== undefined && opened >= opts.fakeSessionCap) {
          return { rv: CKR.HOST_MEMORY };
        }
        let handle: Handle;
        try {
          handle = openSession(mod, slot);
        } catch (err) {
          if (err instanceof Pkcs11Error) return { rv: err.rv };
          throw err;
        }
        opened++;
        return { handle };
      },
      close: (handle) => {
        opened--;
        mod.fn.C_CloseSession(handle);
      },
      isDead: (err) => this.#noteDead(err),
    });
  }

  /**
   * Calls `listener` once, with the first error that says the token or its login is gone (see
   * isTokenDead) — whichever operation met it: a request, an audit line, /health. The daemon
   * subscribes once and stops; nothing else needs to look for a dead token.
   *
   * @example
   * ```ts ignore
   * token.onDead((err) => stop(75, `token is dead: ${err.message}`));
   * ```
   */
  onDead(listener: (err: Pkcs11Error) => void): void {
    const dead = this.#deadError;
    if (dead) queueMicrotask(() => listener(dead));
    else this.#deadListeners.push(listener);
  }

  /** Whether `err` says the token is dead; the first such error is told to the onDead listeners. */
  #noteDead(err: unknown): boolean {
    if (!isTokenDead(err)) return false;
    if (!this.#deadError) {
      this.#deadError = err;
      for (const listener of this.#deadListeners.splice(0)) listener(err);
    }
    return true;
  }

  /**
   * Loads the module (once per process), initialises it with CKF_OS_LOCKING_OK and finds the token
   * by label. Example: `Token.open({ modulePath, tokenLabel: "svcd" })`.
   */
  static open(opts: TokenOptions): Token {
    const max = opts.maxSessions ?? DEFAULT_MAX_SESSIONS;
    if (!Number.isInteger(max) || max < 1) {
      throw new RangeError(`maxSessions must be a positive integer, got ${max}`);
    }
    const mod = acquireModule(opts.modulePath);
    try {
      return new Token(mod, findSlotByLabel(mod, opts.tokenLabel), opts);
    } catch (err) {
      releaseModule(mod);
      throw err;
    }
  }

  /** The PIN from $CREDENTIALS_DIRECTORY/svc-pin (or `dir`), as bytes. Throws CredentialError. */
  static readPinCredential(dir?: string): Uint8Array {
    return readPinCredential(dir);
  }

  /**
   * PKCS#11 calls made per function in this process for a module path (instrumentation for tests;
   * zero for a module never loaded). Example: `Token.callCount(path, "C_Login")`.
   */
  static callCount(modulePath: string, fn: string): number {
    return loadedModule(modulePath)?.calls[fn] ?? 0;
  }

  /** The slot id the token was found in (slot ids change after C_InitToken; informational). */
  get slotId(): number {
    return this.#slot;
  }

  /**
   * Logs in as user exactly once: one C_Login, never retried. The PIN buffer is zeroed when C_Login
   * returns, whatever it returned. CKR_USER_ALREADY_LOGGED_IN is accepted (it proves nothing).
   */
  async login(pin: Uint8Array): Promise<void> {
    let rv: number;
    try {
      if (this.#loginAttempted) {
        throw new Error(
          "login was already attempted; svcd logs in once per process and never retries",
        );
      }
      this.#loginAttempted = true;
      rv = await this.#pool.use((session) =>
        this.#mod.fn.C_LoginAsync(session, CKU.USER, pin, pin.byteLength)
      );
    } finally {
      pin.fill(0);
    }
    if (rv === CKR.OK || rv === CKR.USER_ALREADY_LOGGED_IN) return;
    throw new Pkcs11Error("C_Login", rv, loginHint(rv));
  }

  /** The private key with this label (cached), or undefined. Throws if its mechanism is not offered. */
  key(label: string): Promise<SigningKey | undefined> {
    let found = this.#keys.get(label);
    if (!found) {
      found = this.#pool.use((s) => this.#resolveKey(s, label));
      this.#keys.set(label, found);
      // A miss or a failure is not cached: the key may be created later.
      found.then((k) => k ?? this.#keys.delete(label), () => this.#keys.delete(label));
    }
    return found;
  }

  /**
   * Every signing key on the token. Keys svcd cannot use (unknown type, mechanism not offered) are
   * left out and reported through `onSkip`. Example: `await token.listKeys((l, why) => log(l, why))`.
   */
  async listKeys(onSkip?: (label: string, reason: string) => void): Promise<SigningKey[]> {
    const labels = await this.#pool.use((s) => {
      const handles = findObjects(this.#mod, s, [
        { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
        ON_TOKEN,
      ]);
      return handles.map((h) =>
        decodeLabel(getAttributes(this.#mod, s, h, [CKA.LABEL]).get(CKA.LABEL))
      );
    });
    const keys: SigningKey[] = [];
    for (const label of [...new Set(labels)].sort()) {
      try {
        const key = await this.key(label);
        if (key) keys.push(key);
      } catch (err) {
        if (!isKeyProblem(err)) throw err;
        onSkip?.(label, err.message);
      }
    }
    return keys;
  }

  /**
   * Signs `message` with the key's mechanism; for CKM_ECDSA the digest is computed here. With
   * `digest`, `message` is that digest of the message (digest mode, ./digest_mode.ts; the name
   * must be one of `key.digests`) and the signature is the one over the message.
   */
  async sign(key: SigningKey, message: Uint8Array, digest?: DigestName): Promise<Uint8Array> {
    const taken = this.#acquire(key);
    // Straight into the pool when the key is live: no extra turn of the event loop per request.
    const k = taken instanceof Promise ? await taken : taken;
    try {
      const [signing, data] = signingAndData(k, message, digest);
      return await this.#signWith(key.label, k, data, signing)
        .catch((err) => this.#forgetStaleKey(key, err));
    } finally {
      this.#release(k);
    }
  }

  /** One signature, on the calling thread (timed) or the pool, as the key's placement says. */
  #signWith(
    label: string,
    k: KeyInternals,
    data: Uint8Array,
    signing: SigningMechanism,
  ): Promise<Uint8Array> {
    const choice = choiceOf(signing);
    const length = k.spec.signatureLength;
    if (!k.placement.inline) {
      return this.#pool.use((s) => signOnce(this.#mod, s, k.handle, choice, data, length));
    }
    return this.#pool.use((s) => {
      this.#holdTimer.start();
      try {
        return signOnceSync(this.#mod, s, k.handle, choice, data, length);
      } finally {
        if (k.placement.record(this.#holdTimer.heldMs())) this.#opts.onPooled?.(label);
      }
    });
  }

  /**
   * Verifies in the module: false on CKR_SIGNATURE_INVALID or CKR_SIGNATURE_LEN_RANGE. With
   * `digest`, `message` is that digest of the message, as for {@link sign}.
   */
  async verify(
    key: SigningKey,
    message: Uint8Array,
    signature: Uint8Array,
    digest?: DigestName,
  ): Promise<boolean> {
    const taken = this.#acquire(key);
    // Straight into the pool when the key is live: no extra turn of the event loop per request.
    const k = taken instanceof Promise ? await taken : taken;
    try {
      const [signing, data] = signingAndData(k, message, digest);
      return await this.#pool.use((s) =>
        verifyOnce(this.#mod, s, k.publicHandle, choiceOf(signing), data, signature)
      ).catch((err) => this.#forgetStaleKey(key, err));
    } finally {
      this.#release(k);
    }
  }

  /** HMAC-SHA256 (CKM_SHA256_HMAC) with the CKK_GENERIC_SECRET key of that label (32 bytes out). */
  mac(secretLabel: string, data: Uint8Array): Promise<Uint8Array> {
    return this.#pool.use((s) => {
      const handle = this.#secretHandle(s, secretLabel);
      try {
        return signOnceSync(
          this.#mod,
          s,
          handle,
          { mechanism: CKM.SHA256_HMAC },
          data,
          HMAC_LENGTH,
        );
      } catch (err) {
        if (isStaleHandle(err)) this.#forgetSecret(secretLabel);
        throw err;
      }
    });
  }

  /**
   * Drops every resolved key and secret with its working copy: the next use finds each on the
   * token again by label (a key deleted there is then not found; a replaced one is the new one).
   * An operation already running with a dropped copy finishes with it (the copy is destroyed
   * after it); one that starts later with a key obtained before looks the key up again.
   *
   * @example
   * ```ts ignore
   * Deno.addSignalListener("SIGHUP", () => token.refreshKeys());
   * ```
   */
  refreshKeys(): void {
    for (const label of [...this.#resolved.keys()]) this.#forgetKey(label);
    for (const label of [...this.#secrets.keys()]) this.#forgetSecret(label);
  }

  /**
   * Drops the resolved keys and secrets whose token object is gone (deleted, or deleted and
   * replaced); returns their labels. One C_GetAttributeValue per key, on the main thread.
   *
   * @example
   * ```ts ignore
   * const gone = token.dropRemovedKeys(); // e.g. ["k-old"]
   * ```
   */
  dropRemovedKeys(): string[] {
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

  /** Token and module facts (fresh C_GetTokenInfo each call). */
  info(): TokenInfo {
    const buf = new Uint8Array(SIZE.CK_TOKEN_INFO);
    try {
      check("C_GetTokenInfo", this.#mod.fn.C_GetTokenInfo(this.#slot, buf));
    } catch (err) {
      this.#noteDead(err);
      throw err;
    }
    const t: CkTokenInfo = decodeTokenInfo(buf);
    const m = this.#moduleInfoCached();
    return {
      label: t.label,
      manufacturerId: t.manufacturerId,
      model: t.model,
      serialNumber: t.serialNumber,
      flags: t.flags,
      maxSessionCount: t.maxSessionCount,
      sessionCount: t.sessionCount,
      hardwareVersion: formatVersion(t.hardwareVersion),
      firmwareVersion: formatVersion(t.firmwareVersion),
      cryptokiVersion: formatVersion(m.cryptokiVersion),
      functionTableVersion: formatVersion(this.#mod.tableVersion),
      libraryDescription: m.libraryDescription,
      libraryVersion: formatVersion(m.libraryVersion),
      slotId: this.#slot,
    };
  }

  /**
   * Whether a pooled session is in a user state (C_GetSessionInfo): the live answer to "still
   * logged in?" for /health. Throws Pkcs11Error when the module cannot answer (e.g. a dead token).
   *
   * @example
   * ```ts ignore
   * if (!(await token.loggedIn())) console.error("login lost");
   * ```
   */
  async loggedIn(): Promise<boolean> {
    return await this.#pool.use((s) => {
      const buf = new Uint8Array(SIZE.CK_SESSION_INFO);
      check("C_GetSessionInfo", this.#mod.fn.C_GetSessionInfo(s, buf));
      const { state } = decodeSessionInfo(buf);
      return state === CKS.RO_USER_FUNCTIONS || state === CKS.RW_USER_FUNCTIONS;
    });
  }

  /**
   * Resolves true once no pooled session is in use, false after `timeoutMs`.
   * @example if (await token.whenIdle(5000)) token.close();
   */
  whenIdle(timeoutMs: number): Promise<boolean> {
    return this.#pool.whenIdle(timeoutMs);
  }

  /** Pool figures: sessions open, lent out, callers waiting, and the cap in force. */
  poolStats(): PoolStats {
    return this.#pool.stats();
  }

  /** Evidence that no session served two operations at once (instrumentation for tests). */
  sessionUseStats(): SessionUseStats {
    return this.#pool.useStats();
  }

  /**
   * Whether the module offers a mechanism for an operation (C_GetMechanismInfo, cached).
   * Example: `token.offers(CKM.ML_DSA, CKF_MECHANISM.SIGN)`.
   */
  offers(mechanism: number, flag: MechanismFlag): boolean {
    return this.#offered.offers(mechanism, flag);
  }

  /** Whether the module offers everything a key type needs: generation and signing. */
  offersKeyType(type: KeyTypeName): boolean {
    return this.#offered.offersKeyType(type);
  }

  /** Key types this module can generate and sign with. Example: `["ec-p256", "ed25519", …]`. */
  offeredKeyTypes(): KeyTypeName[] {
    return this.#offered.keyTypes();
  }

  /**
   * Generates a key pair on the token (operator tooling; needs a login): private key sensitive and
   * non-extractable. Throws MechanismUnavailableError before any attempt if the module lacks it.
   */
  async generateKeyPair(label: string, type: KeyTypeName): Promise<SigningKey> {
    const spec = KEY_TYPES[type];
    requireKeyGeneration(this.#offered, spec);
    this.#offered.signingFor(spec, label); // refuse a key we could not sign with
    if (await this.#labelTaken(label)) {
      throw new Error(
        `a key labelled '${label}' already exists on the token; choose another label`,
      );
    }
    await this.#withReadWriteSession((s) => generateSigningKeyPair(this.#mod, s, spec, label));
    this.#keys.delete(label);
    const key = await this.key(label);
    if (!key) {
      throw new Error(
        `generated key '${label}' cannot be found again; the module did not store it`,
      );
    }
    return key;
  }

  /**
   * Changes the user PIN from `oldPin` to `newPin` (C_SetPIN in a read-write session that is not
   * logged in, which changes the user's PIN). Both buffers are zeroed when the call returns.
   * Operator tooling (`svcd token rotate-pin`); the daemon never calls it.
   */
  async setUserPin(oldPin: Uint8Array, newPin: Uint8Array): Promise<void> {
    try {
      await this.#withReadWriteSession((s) =>
        check(
          "C_SetPIN",
          this.#mod.fn.C_SetPIN(s, oldPin, oldPin.byteLength, newPin, newPin.byteLength),
        )
      );
    } finally {
      oldPin.fill(0);
      newPin.fill(0);
    }
  }

  /**
   * Generates the sensitive, non-extractable 32-byte CKK_GENERIC_SECRET HMAC key `label`
   * (CKA_SIGN/CKA_VERIFY) with CKM_GENERIC_SECRET_KEY_GEN. Operator tooling; needs a login.
   */
  async generateMacKey(label: string): Promise<void> {
    requireMacKeyGeneration(this.#offered);
    await this.#withReadWriteSession((s) => generateMacSecret(this.#mod, s, label));
  }

  /**
   * The public key of a key pair by label, without a login when the public object is public.
   * Example: `(await token.publicKey("svc-audit-sign"))?.publicKeySpki`.
   */
  publicKey(label: string): Promise<Omit<SigningKey, "mechanism" | "digests"> | undefined> {
    return this.#pool.use((s) => {
      const pubs = findObjects(this.#mod, s, [
        { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
        { type: CKA.LABEL, value: utf8(label) },
        ON_TOKEN,
      ]);
      if (pubs.length === 0) return undefined;
      const spec = identifyKeyType(this.#mod, s, pubs[0], label);
      return { label, keyType: spec.name, ...readPublicKey(this.#mod, s, pubs[0], spec, label) };
    });
  }

  /** Closes the pool's sessions and releases the module (finalised if this process initialised it). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pool.close();
    if (this.#copySession !== undefined) this.#mod.fn.C_CloseSession(this.#copySession);
    releaseModule(this.#mod);
  }

  #internalsOf(key: SigningKey): KeyInternals {
    const k = this.#internals.get(key);
    if (!k) {
      throw new Error(`key '${key.label}' was not obtained from this token; use token.key(label)`);
    }
    return k;
  }

  /**
   * The internals to use for `key`, counted in use: its own, or, once they were dropped, those of
   * the key found by its label now (a request that obtained the key just before a SIGHUP still
   * signs). The count is taken in the same synchronous step as the check, so a drop cannot come
   * between them.
   */
  #acquire(key: SigningKey): KeyInternals | Promise<KeyInternals> {
    const k = this.#internalsOf(key);
    if (k.retired) return this.#reacquire(key);
    k.uses++;
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

  /** Ends a use; the last use of a dropped copy destroys it. */
  #release(k: KeyInternals): void {
    k.uses--;
    if (k.retired && k.uses === 0) this.#destroyCopy(k);
  }

  #forgetStaleKey(key: SigningKey, err: unknown): never {
    if (isStaleHandle(err)) this.#forgetKey(key.label);
    throw err;
  }

  #forgetKey(label: string): void {
    this.#keys.delete(label);
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

  #destroyCopy(k: { handle: Handle; tokenHandle: Handle }): void {
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
      this.#copySession ??= openSession(this.#mod, this.#slot);
      return copyObject(this.#mod, this.#copySession, object, [
        { type: CKA.TOKEN, value: boolBytes(false) },
      ]);
    } catch (err) {
      if (isTokenDead(err)) throw err;
      return object;
    }
  }

  #resolveKey(session: Handle, label: string): SigningKey | undefined {
    const privs = findObjects(this.#mod, session, [
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
      placement: new SignPlacement(this.#opts.inlineSignLimitUs ?? 0),
    };
    const earlier = this.#resolved.get(label); // a lookup whose cache entry was dropped
    if (earlier) this.#retire(earlier);
    this.#internals.set(key, internals);
    this.#resolved.set(label, internals);
    return key;
  }

  #secretHandle(session: Handle, label: string): Handle {
    const cached = this.#secrets.get(label);
    if (cached !== undefined) return cached.handle;
    const found = findObjects(this.#mod, session, [
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

  async #labelTaken(label: string): Promise<boolean> {
    return await this.#pool.use((s) =>
      findObjects(this.#mod, s, [{ type: CKA.LABEL, value: utf8(label) }]).length > 0
    );
  }

  async #withReadWriteSession<T>(fn: (session: Handle) => Promise<T> | T): Promise<T> {
    const session = openSession(this.#mod, this.#slot, CKF_SESSION.RW_SESSION);
    try {
      return await fn(session);
    } finally {
      this.#mod.fn.C_CloseSession(session);
    }
  }

  #moduleInfoCached(): CkInfo {
    if (!this.#moduleInfo) {
      const buf = new Uint8Array(SIZE.CK_INFO);
      check("C_GetInfo", this.#mod.fn.C_GetInfo(buf));
      this.#moduleInfo = decodeInfo(buf);
    }
    return this.#moduleInfo;
  }
}

/** The mechanism and a fresh parameter (its buffers live for one call) of a signing choice. */
function choiceOf(signing: SigningMechanism): MechanismChoice {
  return { mechanism: signing.mechanism, parameter: signing.parameter?.() };
}

/**
 * The signing choice and the data for C_Sign/C_Verify: the key's mechanism over the message, or in
 * digest mode the digest's mechanism over the digest as sent.
 */
function signingAndData(
  k: KeyInternals,
  message: Uint8Array,
  digest: DigestName | undefined,
): [SigningMechanism, Uint8Array] {
  if (digest === undefined) return [k.signing, prepareData(k.signing, message)];
  const signing = digestSigning(k.spec, digest);
  if (!signing) throw new RangeError(`${k.spec.name} keys take no ${digest} digest mode`);
  return [signing, message];
}

function prepareData(signing: SigningMechanism, message: Uint8Array): Uint8Array {
  return signing.prehash ? createHash(signing.prehash).update(message).digest() : message;
}

function loginHint(rv: number): string | undefined {
  switch (rv) {
    case CKR.PIN_INCORRECT:
      return "the PIN in the credential does not match the token's user PIN; not retried " +
        "(the role locks after five failures) — recreate the credential with the token it belongs to";
    case CKR.PIN_LOCKED:
      return "the user PIN is locked after repeated failures; the token must be re-initialised " +
        "(svcd token init) and its keys re-created";
    case CKR.USER_PIN_NOT_INITIALIZED:
      return "the token has no user PIN yet; run svcd token init";
    default:
      return undefined;
  }
}

function decodeLabel(bytes: Uint8Array | null | undefined): string {
  return bytes ? new TextDecoder().decode(bytes) : "";
}
