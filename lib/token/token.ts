/**
 * The token as the daemon uses it: one module opening, one login, a session pool, keys by label
 * (_key_cache.ts), and sign/verify/mac through the pool with the mechanism mechanisms.ts picks;
 * a signature comes back with the name of the mechanism that made it. Operator administration
 * (key generation, the user PIN, the MAC key) is lib/token_admin, which works through
 * {@link Token.administration}. The other files of this folder are named for their job:
 * module.ts (the module and the token's slot), sessions.ts (the pool and one call on one
 * session), key_types.ts (key types and public keys), mechanisms.ts (which mechanism, digest
 * mode), sign_placement.ts (which thread signs), credential.ts (the PIN).
 *
 * @example
 * ```ts
 * import { Token } from "./token.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * const key = await token.key("web-signing");
 * const { signature, mechanism } = await token.sign(key!, new TextEncoder().encode("hello"));
 * ```
 */
import {
  check,
  CKA,
  CKF_SESSION,
  CKM,
  ckmName,
  CKR,
  CKS,
  CKU,
  decodeSessionInfo,
  type MechanismFlag,
  Pkcs11Error,
  type Pkcs11Module,
  SIZE,
} from "../../ffi/pkcs11/mod.ts";
import { CopyLock, KeyCache, type KeyInternals, type SigningKey } from "./_key_cache.ts";
import { readPinCredential } from "./credential.ts";
import { isKeyProblem, isTokenDead, loginHint } from "./errors.ts";
import type { KeyTypeName, SigningMechanism } from "./key_types.ts";
import { choiceOf, type DigestName, MechanismCatalogue, signingAndData } from "./mechanisms.ts";
import {
  acquireModule,
  describeToken,
  findSlotByLabel,
  readTokenInfo,
  releaseModule,
  type TokenInfo,
} from "./module.ts";
import {
  findObjects,
  type Handle,
  openSession,
  type PoolStats,
  SessionPool,
  signOnce,
  signOnceSync,
  utf8,
  verifyOnce,
} from "./sessions.ts";
import { HoldTimer } from "./sign_placement.ts";
import { SignThread } from "./sign_thread/sign_thread.ts";

export type { SigningKey } from "./_key_cache.ts";
export type { TokenInfo } from "./module.ts";

/** How to reach the token. */
export interface TokenOptions {
  /** Path of the PKCS#11 module (e.g. /usr/lib/softhsm/libsofthsm2.so). */
  modulePath: string;
  /** Label given at `svcd token init`; the slot is found by it, never by number. */
  tokenLabel: string;
  /** Most sessions the pool opens (default 127). */
  maxSessions?: number;
  /**
   * A key's signatures run on the calling thread while most of its recent ones held it less than
   * this many µs (CPU, or waiting when the module slept), else on a thread-pool thread (see
   * sign_placement.ts): the hop to the pool costs more than a quick signature. 0 (the default):
   * always the pool. Infinity: always the calling thread, for a Worker with nothing else to run
   * meanwhile (the public listener's).
   */
  inlineSignLimitUs?: number;
  /**
   * Quick signatures (those the calling thread would make) go to a sign thread of their own
   * (sign_thread/), for the daemon's main isolate: it serves every request and should not also
   * do their arithmetic. Default false: on the calling thread.
   */
  signThread?: boolean;
  /** Told when a key's signatures move to the thread pool because they were slow (for the log). */
  onPooled?: (label: string) => void;
  /**
   * The process's copy lock (_key_cache.ts) as an already opened Token of this process gives it
   * ({@link Token.copyLock}). Every Token a thread of the process opens must be given it; one
   * opened without it makes a new lock, which is right only for the first Token of a process.
   */
  copyLock?: SharedArrayBuffer;
}

/** A signature and the mechanism the token made it with. */
export interface Signed {
  signature: Uint8Array;
  /** The mechanism by name, e.g. "CKM_ECDSA_SHA256", or "CKM_ECDSA" for an EC key in digest mode. */
  mechanism: string;
}

/**
 * What operator administration (lib/token_admin: key generation, the user PIN, the audit MAC key)
 * works with beyond the daemon's operations: read-write sessions of its own, outside the pool;
 * what the module offers; whether a label is taken; and a key looked up afresh once made. The
 * daemon never uses it. Obtained with {@link Token.administration}.
 */
export interface TokenAdministration {
  /** What the module offers (generation, signing), asked once per mechanism. */
  readonly offered: MechanismCatalogue;
  /**
   * Runs `work` in a read-write session of its own (C_OpenSession with CKF_RW_SESSION; it shares
   * the token's login), closed when `work` settles.
   */
  inReadWriteSession<T>(
    work: (mod: Pkcs11Module, session: Handle) => Promise<T> | T,
  ): Promise<T>;
  /** Whether any object on the token or in this process's sessions has the label. */
  labelTaken(label: string): Promise<boolean>;
  /** The key labelled `label`, looked up on the token again (not from the cache): one just made. */
  freshKey(label: string): Promise<SigningKey | undefined>;
  /** The key's CKA_ID (what its certificate object is found by); empty when it has none. */
  keyId(key: SigningKey): Uint8Array;
}

const DEFAULT_MAX_SESSIONS = 127;
const HMAC_LENGTH = 32;

/** An opened token. Create with Token.open(); close() at shutdown. */
export class Token {
  readonly #mod: Pkcs11Module;
  readonly #slot: number;
  readonly #opts: TokenOptions;
  readonly #pool: SessionPool;
  readonly #keys: KeyCache;
  readonly #offered: MechanismCatalogue;
  readonly #copyLock: CopyLock;
  #deadListeners: ((err: Pkcs11Error) => void)[] = [];
  #deadError: Pkcs11Error | undefined;
  #loginAttempted = false;
  #closed = false;
  /** Times signatures made on this thread (one at a time: they are synchronous). */
  readonly #holdTimer: HoldTimer;
  readonly #signThread: SignThread | undefined;
  #signThreadWanted: () => boolean = () => true;

  private constructor(mod: Pkcs11Module, slot: number, opts: TokenOptions) {
    this.#mod = mod;
    this.#slot = slot;
    this.#opts = opts;
    this.#holdTimer = new HoldTimer((opts.inlineSignLimitUs ?? 0) / 1000);
    this.#offered = new MechanismCatalogue(mod, slot);
    this.#pool = new SessionPool({
      max: opts.maxSessions ?? DEFAULT_MAX_SESSIONS,
      open: () => {
        try {
          return { handle: openSession(mod, slot) };
        } catch (err) {
          if (err instanceof Pkcs11Error) return { rv: err.rv };
          throw err;
        }
      },
      close: (handle) => mod.fn.C_CloseSession(handle),
      isDead: (err) => this.#noteDead(err),
    });
    this.#copyLock = new CopyLock(opts.copyLock);
    this.#keys = new KeyCache(
      mod,
      slot,
      this.#offered,
      this.#pool,
      opts.inlineSignLimitUs ?? 0,
      this.#copyLock,
    );
    // Last: nothing after it may throw and leave its Worker running.
    this.#signThread = opts.signThread
      ? SignThread.start(mod, (opts.inlineSignLimitUs ?? 0) / 1000)
      : undefined;
  }

  /**
   * Calls `listener` once, with the first error that says the token or its login is gone (see
   * isTokenDead) — whichever operation met it: a request, an audit line, /health. The daemon
   * subscribes once and stops; nothing else needs to look for a dead token.
   *
   * @example
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token;
   * token.onDead((err) => {
   *   console.error(`token is dead: ${err.message}`);
   *   Deno.exit(75);
   * });
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
   * The copy lock this Token holds around its copies and counted lookups (_key_cache.ts), to give
   * to every other Token of the process (TokenOptions.copyLock), e.g. a Worker's.
   */
  get copyLock(): SharedArrayBuffer {
    return this.#copyLock.buffer;
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
    return this.#keys.key(label);
  }

  /**
   * Every signing key on the token. Keys svcd cannot use (unknown type, mechanism not offered) are
   * left out and reported through `onSkip`. Example: `await token.listKeys((l, why) => log(l, why))`.
   */
  async listKeys(onSkip?: (label: string, reason: string) => void): Promise<SigningKey[]> {
    const labels = await this.#pool.use((s) => this.#keys.privateKeyLabels(s));
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
   * The DER of the X.509 certificate objects stored for the key (CKO_CERTIFICATE with the key's
   * CKA_ID), read afresh each call so that a renewal shows at once; usually one, none when the key
   * has no certificate. Whether one belongs to the key is the caller's to check (its public key).
   */
  certificates(key: SigningKey): Promise<Uint8Array[]> {
    return this.#pool.use((s) => this.#keys.certificatesOf(s, key));
  }

  /**
   * Signs `message` with the key's mechanism; for CKM_ECDSA the digest is computed here. With
   * `digest`, `message` is that digest of the message (digest mode, ./mechanisms.ts; the name
   * must be one of `key.digests`) and the signature is the one over the message. Resolves with
   * the signature and the mechanism that made it.
   */
  async sign(key: SigningKey, message: Uint8Array, digest?: DigestName): Promise<Signed> {
    const taken = this.#keys.acquire(key);
    // Straight into the pool when the key is live: no extra turn of the event loop per request.
    const k = taken instanceof Promise ? await taken : taken;
    try {
      const [signing, data] = signingAndData(k.spec, k.signing, message, digest);
      const signature = await this.#signWith(key.label, k, data, signing)
        .catch((err) => this.#keys.forgetStaleKey(key, err));
      return { signature, mechanism: ckmName(signing.mechanism) };
    } finally {
      this.#keys.release(k);
    }
  }

  /**
   * One signature, on the calling thread or the sign thread (timed), or the pool, as the key's
   * placement says.
   */
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
      const onThread = this.#signThreadWanted()
        ? this.#signThread?.sign(s, k.handle, choice, data)
        : undefined;
      if (onThread) {
        return onThread.then(({ signature, heldMs }) => {
          if (k.placement.record(heldMs)) this.#opts.onPooled?.(label);
          return signature;
        });
      }
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
    const taken = this.#keys.acquire(key);
    // Straight into the pool when the key is live: no extra turn of the event loop per request.
    const k = taken instanceof Promise ? await taken : taken;
    try {
      const [signing, data] = signingAndData(k.spec, k.signing, message, digest);
      return await this.#pool.use((s) =>
        verifyOnce(this.#mod, s, k.publicHandle, choiceOf(signing), data, signature)
      ).catch((err) => this.#keys.forgetStaleKey(key, err));
    } finally {
      this.#keys.release(k);
    }
  }

  /** HMAC-SHA256 (CKM_SHA256_HMAC) with the CKK_GENERIC_SECRET key of that label (32 bytes out). */
  mac(secretLabel: string, data: Uint8Array): Promise<Uint8Array> {
    return this.#pool.use((s) => {
      const handle = this.#keys.secretHandle(s, secretLabel);
      try {
        const hmac = { mechanism: CKM.SHA256_HMAC };
        return signOnceSync(this.#mod, s, handle, hmac, data, HMAC_LENGTH);
      } catch (err) {
        this.#keys.forgetStaleSecret(secretLabel, err);
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
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token;
   * Deno.addSignalListener("SIGHUP", () => token.refreshKeys());
   * ```
   */
  refreshKeys(): void {
    this.#keys.refresh();
  }

  /**
   * Drops the resolved keys and secrets whose token object is gone (deleted, or deleted and
   * replaced); returns their labels. One C_GetAttributeValue per key, on the main thread.
   *
   * @example
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token;
   * const gone = token.dropRemovedKeys(); // e.g. ["k-old"]
   * ```
   */
  dropRemovedKeys(): string[] {
    return this.#keys.dropRemoved();
  }

  /** Token and module facts (fresh C_GetTokenInfo each call). */
  info(): TokenInfo {
    let t;
    try {
      t = readTokenInfo(this.#mod, this.#slot);
    } catch (err) {
      this.#noteDead(err);
      throw err;
    }
    return describeToken(this.#mod, this.#slot, t);
  }

  /**
   * Whether a pooled session is in a user state (C_GetSessionInfo): the live answer to "still
   * logged in?" for /health. Throws Pkcs11Error when the module cannot answer (e.g. a dead token).
   *
   * @example
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token;
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
   */
  whenIdle(timeoutMs: number): Promise<boolean> {
    return this.#pool.whenIdle(timeoutMs);
  }

  /**
   * Quick signatures go to the sign thread only while `wanted` says so (until this is called:
   * always): a caller with one request in hand gains nothing from the thread and waits for its
   * hand-off, one with others serves them meanwhile.
   *
   * @example
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token, listener: { othersInHand: boolean };
   * token.signOnThreadWhile(() => listener.othersInHand);
   * ```
   */
  signOnThreadWhile(wanted: () => boolean): void {
    this.#signThreadWanted = wanted;
  }

  /**
   * Settles once the sign thread runs (at once without one); rejects when it could not start, and
   * signatures are then made on the calling thread.
   */
  signThreadStarted(): Promise<void> {
    return this.#signThread?.started ?? Promise.resolve();
  }

  /** Signatures the sign thread made (0 without one; TokenOptions.signThread): for tests and benches. */
  get signedOnThread(): number {
    return this.#signThread?.signed ?? 0;
  }

  /** Pool figures: sessions open, lent out, callers waiting, and the cap in force. */
  poolStats(): PoolStats {
    return this.#pool.stats();
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
   * The public key of a key pair by label, without a login when the public object is public.
   * Example: `(await token.publicKey("svc-audit-sign"))?.publicKeySpki`.
   */
  publicKey(label: string): Promise<Omit<SigningKey, "mechanism" | "digests"> | undefined> {
    return this.#pool.use((s) => this.#keys.publicKeyOf(s, label));
  }

  /**
   * What operator administration works with (see TokenAdministration); the daemon never calls it.
   *
   * @example
   * ```ts
   * import { Token } from "./token.ts";
   * declare const token: Token;
   * const admin = token.administration();
   * if (!(await admin.labelTaken("web"))) console.log(admin.offered.keyTypes());
   * ```
   */
  administration(): TokenAdministration {
    const mod = this.#mod;
    const slot = this.#slot;
    return {
      offered: this.#offered,
      inReadWriteSession: async (work) => {
        const session = openSession(mod, slot, CKF_SESSION.RW_SESSION);
        try {
          return await work(mod, session);
        } finally {
          mod.fn.C_CloseSession(session);
        }
      },
      labelTaken: (label) =>
        this.#pool.use((s) => findObjects(mod, s, [{ type: CKA.LABEL, value: utf8(label) }]))
          .then((found) => found.length > 0),
      freshKey: (label) => {
        this.#keys.forgetLookup(label);
        return this.key(label);
      },
      keyId: (key) => this.#keys.idOf(key),
    };
  }

  /** Closes the pool's sessions and releases the module (finalised if this process initialised it). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // A signature still running on the sign thread uses a session and a key copy of the module:
    // the module is then left to the process exit rather than finalised under it.
    if (this.#signThread && !this.#signThread.close()) return;
    this.#pool.close();
    this.#keys.close();
    releaseModule(this.#mod);
  }
}
