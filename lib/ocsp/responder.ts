/**
 * The OCSP responder: one method from request bytes to response bytes, the one place that matches
 * CertIDs and assembles answers (the daemon's POST /ocsp and `svcd ca status` both call it).
 *
 * Rules, in the order they apply:
 * 1. A request that does not parse (./request.ts) → unsigned malformedRequest.
 * 2. A CertID whose issuer name and key hashes are not our CA's (or use a hash we do not support)
 *    → unsigned unauthorized for the whole request: we cannot speak for that CA.
 * 3. The database cannot be loaded → unsigned tryLater (never an answer from an older parse).
 * 4. Each CertID answered in order: V and E lines → good (E only says it expired; it was not
 *    revoked), R → revoked with its time and reason, a serial of our CA with no line → unknown
 *    (RFC 6960 §2.2: the responder does not know the certificate; saying "good" for a serial the
 *    CA may never have issued would vouch for a forgery, and "revoked" would need RFC 6960 §2.2's
 *    extended-revocation extension and a CRL reason the database does not have).
 * 5. Signing fails → unsigned internalError.
 *
 * Requests without a nonce are answered from a cache of signed responses keyed by the exact
 * CertIDs and the database version; the cache is emptied when the database changes, an entry is
 * re-signed once half its validity has passed (so what is served always has at least half its
 * validity left), and it holds at most `cacheEntries` responses and `cacheBytes` bytes of responses
 * and keys (oldest dropped first): anonymous clients choose the CertIDs, and 4096 entries of 64
 * CertIDs each would otherwise hold some 100 MB. Concurrent
 * identical requests share one signature. Nonce requests are signed live.
 *
 * @example
 * ```ts
 * import type { RevocationSource } from "./index_db.ts";
 * declare const source: RevocationSource, caDer: Uint8Array, signer: Signer;
 * declare const requestBytes: Uint8Array;
 * const responder = new Responder({ source, issuer: caDer, signer, validitySeconds: 3600 });
 * const body = await responder.answer(requestBytes);
 * ```
 */
import { createHash } from "node:crypto";
import { type KeyTypeName, type Signer, spkiAlgorithmIdentifier } from "./algorithms.ts";
import { type CertificateInfo, parseCertificate } from "./certificate.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { type RevocationSnapshot, type RevocationSource, StaleSnapshotError } from "./index_db.ts";
import {
  CERT_ID_HASHES,
  type CertId,
  type HashName,
  parseOcspRequest,
  serialHex,
} from "./request.ts";
import {
  type CertStatus,
  INTERNAL_ERROR,
  MALFORMED_REQUEST,
  responderKeyHash,
  signResponse,
  type SingleAnswer,
  TRY_LATER,
  UNAUTHORIZED,
} from "./response.ts";
import { latin1 } from "../bytes/mod.ts";

export type { Signer };

/** nextUpdate − thisUpdate when none is given: one hour. */
export const DEFAULT_VALIDITY_SECONDS = 3600;
/** Signed responses kept for requests without a nonce, when none is given. */
export const DEFAULT_CACHE_ENTRIES = 4096;
/** Bytes of cached responses (and their keys) kept at most, when none is given: 16 MiB. */
export const DEFAULT_CACHE_BYTES = 16 * 1024 * 1024;
/** Times a query asks the database again after another thread re-read it under the query. */
const STALE_RETRIES = 8;

/** What a Responder is built from. */
export interface ResponderOptions {
  /** The revocation database, checked on every answer. */
  source: RevocationSource;
  /** The CA certificate (DER) whose certificates this responder answers for. */
  issuer: Uint8Array;
  /** The key that signs: the CA's own, or the delegated responder's. */
  signer: Signer;
  /** A delegated responder certificate (DER) issued by `issuer`; carried in `certs`. */
  responderCertificate?: Uint8Array;
  /** nextUpdate − thisUpdate, seconds (default DEFAULT_VALIDITY_SECONDS). */
  validitySeconds?: number;
  /** Current time in ms (default Date.now). */
  clock?: () => number;
  /** Most cached responses (default DEFAULT_CACHE_ENTRIES); 0 disables the cache. */
  cacheEntries?: number;
  /** Most bytes of cached responses and their keys (default DEFAULT_CACHE_BYTES). */
  cacheBytes?: number;
  /** Told when signing fails (the answer is then internalError). */
  onSignError?: (error: unknown) => void;
  /** Told of each answer and each cache lookup (the daemon's metrics). */
  observer?: ResponderObserver;
}

/** RFC 6960 OCSPResponseStatus of an answer, as the observer is told it. */
export type ResponseStatusName =
  | "successful"
  | "malformed_request"
  | "internal_error"
  | "try_later"
  | "unauthorized";

/** What a Responder tells about its work; each call is cheap and must not throw. */
export interface ResponderObserver {
  /** An answer: its response status and, when successful, each CertID's status in order. */
  answered(status: ResponseStatusName, certStatuses: readonly CertStatus["status"][]): void;
  /** A request without a nonce found a fresh signed response (hit) or needed a signature. */
  cacheLookup(hit: boolean): void;
}

interface CacheEntry {
  response: Promise<Uint8Array>;
  /** After this time (ms) the entry is re-signed. */
  freshUntil: number;
  /** Bytes counted against the bound: 0 until the signature is done. */
  bytes: number;
}

/**
 * Answers OCSP requests for one CA.
 *
 * @example
 * ```ts
 * import { IndexFileSource } from "./index_source.ts";
 * declare const path: string, issuer: Uint8Array, signer: Signer, body: Uint8Array;
 * const responder = new Responder({ source: new IndexFileSource(path), issuer, signer });
 * await responder.answer(body); // a DER OCSPResponse, never a throw
 * ```
 */
export class Responder {
  readonly #source: RevocationSource;
  readonly #signer: Signer;
  readonly #issuerHashes: Record<HashName, { name: Uint8Array; key: Uint8Array }>;
  readonly #keyHash: Uint8Array;
  readonly #certs: Uint8Array[];
  readonly #validityMs: number;
  readonly #clock: () => number;
  readonly #cacheEntries: number;
  readonly #cacheByteLimit: number;
  #cacheBytes = 0;
  readonly #onSignError?: (error: unknown) => void;
  readonly #observer?: ResponderObserver;
  readonly #cache = new Map<string, CacheEntry>();
  #cacheVersion = -1;
  #signatures = 0;

  /** Throws when the certificates do not parse or do not fit the signer. */
  constructor(opts: ResponderOptions) {
    const issuer = parseCertificate(opts.issuer);
    let signingCert: CertificateInfo = issuer;
    if (opts.responderCertificate) {
      signingCert = parseCertificate(opts.responderCertificate);
      if (!bytesEqual(signingCert.issuer, issuer.subject)) {
        throw new Error("the responder certificate was not issued by the CA certificate");
      }
    }
    checkKeyType(signingCert, opts.signer.keyType);
    this.#source = opts.source;
    this.#signer = opts.signer;
    this.#issuerHashes = issuerHashes(issuer);
    this.#keyHash = responderKeyHash(signingCert);
    this.#certs = opts.responderCertificate ? [signingCert.der] : [];
    const validity = opts.validitySeconds ?? DEFAULT_VALIDITY_SECONDS;
    if (!Number.isSafeInteger(validity) || validity < 1) {
      throw new RangeError(`validity must be a whole number of seconds ≥ 1, not ${validity}`);
    }
    this.#validityMs = validity * 1000;
    this.#clock = opts.clock ?? Date.now;
    this.#cacheEntries = opts.cacheEntries ?? DEFAULT_CACHE_ENTRIES;
    this.#cacheByteLimit = opts.cacheBytes ?? DEFAULT_CACHE_BYTES;
    this.#onSignError = opts.onSignError;
    this.#observer = opts.observer;
  }

  /** Signatures made so far (cache misses and nonce requests). Example: `responder.signatures`. */
  get signatures(): number {
    return this.#signatures;
  }

  /** Bytes the cache holds now (responses and keys). Example: `responder.cachedBytes`. */
  get cachedBytes(): number {
    return this.#cacheBytes;
  }

  /** The DER OCSPResponse for a DER OCSPRequest; never throws. Example: `await responder.answer(body)`. */
  async answer(requestDer: Uint8Array): Promise<Uint8Array> {
    let certIds: CertId[], nonce: Uint8Array | null;
    try {
      ({ certIds, nonce } = parseOcspRequest(requestDer));
    } catch {
      return this.#unsigned(MALFORMED_REQUEST, "malformed_request");
    }
    if (!certIds.every((id) => this.#isOurs(id))) {
      return this.#unsigned(UNAUTHORIZED, "unauthorized");
    }
    const read = await this.#statuses(certIds);
    if (!read) return this.#unsigned(TRY_LATER, "try_later");
    const body = nonce || this.#cacheEntries === 0
      ? await this.#sign(certIds, read.statuses, nonce)
      : await this.#cached(certIds, read.version, read.statuses);
    if (body === INTERNAL_ERROR) return this.#unsigned(body, "internal_error");
    this.#observer?.answered("successful", read.statuses.map((s) => s.status));
    return body;
  }

  #unsigned(body: Uint8Array, status: ResponseStatusName): Uint8Array {
    this.#observer?.answered(status, []);
    return body;
  }

  /**
   * Every CertID's status from one version of the database, or null when it cannot be loaded. A
   * database shared with other threads may be re-read between taking a snapshot and reading it:
   * the snapshot then refuses (StaleSnapshotError) and the current version is asked again.
   */
  async #statuses(
    certIds: CertId[],
  ): Promise<{ version: number; statuses: CertStatus[] } | null> {
    for (let attempt = 0; attempt < STALE_RETRIES; attempt++) {
      let snapshot: RevocationSnapshot | null;
      try {
        snapshot = await this.#source.current();
      } catch {
        return null;
      }
      if (!snapshot) return null;
      try {
        return {
          version: snapshot.version,
          statuses: certIds.map((id) => statusOf(snapshot, id.serial)),
        };
      } catch (e) {
        if (!(e instanceof StaleSnapshotError)) return null;
      }
    }
    return null;
  }

  #isOurs(id: CertId): boolean {
    if (!id.hash) return false;
    const h = this.#issuerHashes[id.hash];
    return bytesEqual(h.name, id.issuerNameHash) && bytesEqual(h.key, id.issuerKeyHash);
  }

  async #cached(certIds: CertId[], version: number, statuses: CertStatus[]): Promise<Uint8Array> {
    if (version !== this.#cacheVersion) {
      this.#cache.clear();
      this.#cacheBytes = 0;
      this.#cacheVersion = version;
    }
    const key = certIds.length === 1
      ? latin1(certIds[0].der)
      : certIds.map((c) => latin1(c.der)).join("\n");
    const now = this.#clock();
    const hit = this.#cache.get(key);
    this.#observer?.cacheLookup(hit !== undefined && now < hit.freshUntil);
    if (hit && now < hit.freshUntil) return await hit.response;
    if (hit) this.#drop(key);
    const response = this.#sign(certIds, statuses, null, now);
    const entry: CacheEntry = { response, freshUntil: now + this.#validityMs / 2, bytes: 0 };
    while (this.#cache.size >= this.#cacheEntries) this.#drop(this.#cache.keys().next().value!);
    this.#cache.set(key, entry);
    const body = await response;
    if (this.#cache.get(key) !== entry) return body; // dropped or replaced meanwhile
    // A failed signature is not kept: the next request tries again.
    if (body === INTERNAL_ERROR) {
      this.#drop(key);
      return body;
    }
    entry.bytes = body.length + key.length;
    this.#cacheBytes += entry.bytes;
    while (this.#cacheBytes > this.#cacheByteLimit) this.#drop(this.#cache.keys().next().value!);
    return body;
  }

  #drop(key: string): void {
    this.#cacheBytes -= this.#cache.get(key)?.bytes ?? 0;
    this.#cache.delete(key);
  }

  async #sign(
    certIds: CertId[],
    statuses: CertStatus[],
    nonce: Uint8Array | null,
    now = this.#clock(),
  ): Promise<Uint8Array> {
    const nextUpdate = now + this.#validityMs;
    const answers: SingleAnswer[] = certIds.map((id, i) => ({
      certId: id.der,
      certStatus: statuses[i],
      thisUpdate: now,
      nextUpdate,
    }));
    try {
      this.#signatures++;
      return await signResponse(this.#signer, {
        responderKeyHash: this.#keyHash,
        producedAt: now,
        answers,
        nonce,
        certs: this.#certs,
      });
    } catch (e) {
      this.#onSignError?.(e);
      return INTERNAL_ERROR;
    }
  }
}

/**
 * The status the database gives a serial (INTEGER content) of our CA.
 *
 * @example
 * ```ts
 * import type { RevocationSnapshot } from "./index_db.ts";
 * declare const snapshot: RevocationSnapshot;
 * statusOf(snapshot, Uint8Array.of(0x1a)); // { status: "good" }
 * ```
 */
export function statusOf(snapshot: RevocationSnapshot, serial: Uint8Array): CertStatus {
  const hex = serialHex(serial);
  const entry = hex === null ? undefined : snapshot.lookup(hex);
  if (!entry) return { status: "unknown" };
  if (entry.status !== "R") return { status: "good" };
  return entry.reason === undefined
    ? { status: "revoked", revokedAt: entry.revokedAt! }
    : { status: "revoked", revokedAt: entry.revokedAt!, reason: entry.reason };
}

/**
 * The CA's name and key hashes under every CertID hash algorithm.
 *
 * @example
 * ```ts
 * import { parseCertificate } from "./certificate.ts";
 * declare const caDer: Uint8Array;
 * issuerHashes(parseCertificate(caDer)).sha256.key; // SHA-256 of the CA's key bits
 * ```
 */
export function issuerHashes(
  issuer: CertificateInfo,
): Record<HashName, { name: Uint8Array; key: Uint8Array }> {
  const out = {} as Record<HashName, { name: Uint8Array; key: Uint8Array }>;
  for (const hash of Object.keys(CERT_ID_HASHES) as HashName[]) {
    out[hash] = {
      name: createHash(hash).update(issuer.subject).digest(),
      key: createHash(hash).update(issuer.publicKey).digest(),
    };
  }
  return out;
}

// A signer whose key type is not the certificate's would make responses nobody can verify.
function checkKeyType(cert: CertificateInfo, keyType: KeyTypeName): void {
  if (!bytesEqual(cert.spkiAlgorithm, spkiAlgorithmIdentifier(keyType))) {
    throw new Error(`the responder certificate's key is not a ${keyType} key`);
  }
}
