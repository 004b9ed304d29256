/**
 * X.509 v2 CRLs (RFC 5280 §5) of a CA folder's revocations, written with lib/der straight from the
 * revocation database's revoked entries and signed by the CA's token key with lib/ocsp/algorithms.ts's
 * AlgorithmIdentifier and signature encoding — the path certificates take.
 *
 * One read of the database gives a {@link RevokedSet}: every revoked certificate encoded once as a
 * CRL entry, in file order, and split by partition (the certificate's serial modulo the partition
 * count). From it {@link signCrl} makes the full CRL (every entry, no issuingDistributionPoint: a
 * complete CRL for every certificate of the CA) and each partition's CRL (its entries and a critical
 * issuingDistributionPoint naming its URL, which is what the certificates of the partition carry in
 * their CRL Distribution Points). A set compares with the one before it partition by partition,
 * so only the CRLs whose entries changed need a new signature.
 *
 * @example
 * ```ts
 * import type { Signer } from "../ocsp/mod.ts";
 * import type { IndexFileSource } from "../ocsp/mod.ts";
 * declare const source: IndexFileSource, issuer: CrlIssuer, signer: Signer;
 * const set = new RevokedSet(16);
 * await source.forEachRevoked(set.add);
 * const now = Date.now();
 * const der = await signCrl(issuer, set, "full", { number: 1n, thisUpdate: now, nextUpdate: now + 7 * 86_400_000 }, signer);
 * ```
 */
import { SIGNATURE_ALGORITHMS, type Signer } from "../ocsp/mod.ts";
import {
  bitString,
  boolean,
  encodeDer,
  node,
  octetString,
  oid,
  sequence,
  tlv,
  x509Time,
} from "../der/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { keyIdentifier } from "./certificate.ts";
import { crlFileName, type ExtensionValue, issuingDistributionPoint } from "./urls.ts";

/** The CA a CRL is issued by. */
export interface CrlIssuer {
  /** The CA certificate's subject, DER Name. */
  name: Uint8Array;
  /** DER SubjectPublicKeyInfo of the CA key (for authorityKeyIdentifier). */
  spki: Uint8Array;
  /** The folder URL of the CRLs (partition CRLs name `URL/K.crl` in their IDP); none: no IDP. */
  crlUrl?: string;
}

/** The fields of one CRL besides its entries. */
export interface CrlTimes {
  /** cRLNumber: larger than every earlier CRL's of this CA. */
  number: bigint;
  /** ms since 1970 (whole seconds are written). */
  thisUpdate: number;
  nextUpdate: number;
}

/** Which CRL of a set: the full one, or partition K. */
export type CrlScope = "full" | number;

const OID = {
  authorityKeyIdentifier: "2.5.29.35",
  cRLNumber: "2.5.29.20",
} as const;

// Extensions [ Extension { reasonCode, OCTET STRING { ENUMERATED r } } ]: the last byte is r.
const REASON_EXTENSIONS = Uint8Array.of(
  0x30,
  0x0c,
  0x30,
  0x0a,
  0x06,
  0x03,
  0x55,
  0x1d,
  0x15,
  0x04,
  0x03,
  0x0a,
  0x01,
  0,
);

/**
 * The revoked certificates of one read of the database, each encoded once as a CRL entry
 * (`SEQUENCE { serial, revocationDate, [reasonCode] }`), in file order, and split by partition.
 */
export class RevokedSet {
  #bytes = new Uint8Array(1 << 16);
  #length = 0;
  /** Per partition: entry start and end offsets, in pairs. */
  readonly #spans: number[][];
  #count = 0;

  /** Example: `new RevokedSet(16)`. */
  constructor(readonly partitions: number) {
    this.#spans = Array.from({ length: Math.max(1, partitions) }, () => []);
  }

  /** Certificates in the set. */
  get count(): number {
    return this.#count;
  }

  /**
   * Adds one revoked certificate (the visitor of IndexFileSource.forEachRevoked): its serial's
   * unsigned bytes `key[from..to)`, the time in seconds since 1970, the reason (-1: none).
   * Unspecified (0) is left out too, as RFC 5280 §5.3.1 asks.
   */
  readonly add = (
    key: Uint8Array,
    from: number,
    to: number,
    revokedAtSeconds: number,
    reason: number,
  ): void => {
    while (from < to - 1 && key[from] === 0) from++;
    const serialLength = to - from;
    const sign = key[from] & 0x80 ? 1 : 0;
    const withReason = reason > 0;
    const content = 2 + sign + serialLength + 15 + (withReason ? REASON_EXTENSIONS.length : 0);
    this.#reserve(2 + content);
    const out = this.#bytes;
    let at = this.#length;
    const start = at;
    out[at++] = 0x30;
    out[at++] = content; // < 128 while a serial has at most 80 bytes
    out[at++] = 0x02;
    out[at++] = serialLength + sign;
    if (sign) out[at++] = 0;
    out.set(key.subarray(from, to), at);
    at += serialLength;
    at = writeUtcTime(out, at, revokedAtSeconds);
    if (withReason) {
      out.set(REASON_EXTENSIONS, at);
      at += REASON_EXTENSIONS.length;
      out[at - 1] = reason;
    }
    this.#length = at;
    this.#spans[partitionOfKey(key, from, to, this.partitions)].push(start, at);
    this.#count++;
  };

  /** The DER entries of a scope, concatenated (the content of revokedCertificates). */
  entries(scope: CrlScope): Uint8Array {
    if (scope === "full") return this.#bytes.subarray(0, this.#length);
    const spans = this.#spans[scope];
    let size = 0;
    for (let i = 0; i < spans.length; i += 2) size += spans[i + 1] - spans[i];
    const out = new Uint8Array(size);
    let at = 0;
    for (let i = 0; i < spans.length; i += 2) {
      out.set(this.#bytes.subarray(spans[i], spans[i + 1]), at);
      at += spans[i + 1] - spans[i];
    }
    return out;
  }

  /** Certificates of a scope. */
  countOf(scope: CrlScope): number {
    return scope === "full" ? this.#count : this.#spans[scope].length / 2;
  }

  /**
   * The scopes whose entries differ from `before`'s (every scope when there is no set before, or
   * its partitions differ); the full CRL is among them whenever a partition is.
   */
  changedSince(before: RevokedSet | undefined): CrlScope[] {
    const all = this.scopes();
    if (!before || before.partitions !== this.partitions) return all;
    // A partition's entries are those of the full list whose serial falls in it, in the same
    // order: equal full lists mean equal partitions, and no partition needs a look.
    if (bytesEqual(this.entries("full"), before.entries("full"))) return [];
    return all.filter((scope) => scope === "full" || !this.#sameEntries(scope, before));
  }

  /**
   * Whether partition `k` lists the same entries as in `before`, compared byte by byte where they
   * lie (no copy, no view per entry: a partition of a large CRL has thousands).
   */
  #sameEntries(k: number, before: RevokedSet): boolean {
    const mine = this.#spans[k], theirs = before.#spans[k];
    if (mine.length !== theirs.length) return false;
    const a = this.#bytes, b = before.#bytes;
    for (let i = 0; i < mine.length; i += 2) {
      const length = mine[i + 1] - mine[i];
      if (theirs[i + 1] - theirs[i] !== length) return false;
      for (let j = 0, x = mine[i], y = theirs[i]; j < length; j++) {
        if (a[x + j] !== b[y + j]) return false;
      }
    }
    return true;
  }

  /** The full CRL, then each partition (none when there is one partition). */
  scopes(): CrlScope[] {
    const out: CrlScope[] = ["full"];
    if (this.partitions > 1) { for (let k = 0; k < this.partitions; k++) out.push(k); }
    return out;
  }

  #reserve(n: number): void {
    if (this.#length + n <= this.#bytes.length) return;
    const more = new Uint8Array(Math.max(this.#bytes.length * 2, this.#length + n));
    more.set(this.#bytes.subarray(0, this.#length));
    this.#bytes = more;
  }
}

/** A serial's partition from its unsigned bytes (as lib/ca/urls.ts `partitionOf`). */
function partitionOfKey(key: Uint8Array, from: number, to: number, partitions: number): number {
  if (partitions <= 1) return 0;
  let r = 0;
  for (let i = from; i < to; i++) r = (r * 256 + key[i]) % partitions;
  return r;
}

const DAY_S = 86_400;
let dayCache = { day: NaN, digits: new Uint8Array(6) };

/**
 * UTCTime YYMMDDHHMMSSZ of a time in seconds since 1970 (index.txt's revocation times are UTCTime,
 * 1950–2049); the date's digits are kept for the next call (revocations cluster in days).
 */
function writeUtcTime(out: Uint8Array, at: number, seconds: number): number {
  const day = Math.floor(seconds / DAY_S);
  if (day !== dayCache.day) {
    const d = new Date(day * DAY_S * 1000);
    const digits = new Uint8Array(6);
    const put = (i: number, n: number) => {
      digits[i] = 0x30 + Math.floor(n / 10);
      digits[i + 1] = 0x30 + (n % 10);
    };
    put(0, d.getUTCFullYear() % 100);
    put(2, d.getUTCMonth() + 1);
    put(4, d.getUTCDate());
    dayCache = { day, digits };
  }
  out[at++] = 0x17;
  out[at++] = 13;
  out.set(dayCache.digits, at);
  at += 6;
  let rest = seconds - day * DAY_S;
  for (const unit of [3600, 60, 1]) {
    const n = Math.floor(rest / unit);
    rest -= n * unit;
    out[at++] = 0x30 + Math.floor(n / 10);
    out[at++] = 0x30 + (n % 10);
  }
  out[at++] = 0x5a;
  return at;
}

/** One Extension's DER (criticality written only when TRUE, as DER wants). */
export function extensionDer(e: ExtensionValue): Uint8Array {
  return sequence(
    oid(e.oid),
    ...(e.critical ? [boolean(true)] : []),
    octetString(e.value),
  );
}

/** DER INTEGER content of a non-negative number (0 is one zero byte). */
function integerOf(n: bigint): Uint8Array {
  if (n < 0n) throw new RangeError("a cRLNumber is not negative");
  let hex = n.toString(16);
  if (hex.length % 2) hex = "0" + hex;
  if (parseInt(hex.slice(0, 2), 16) & 0x80) hex = "00" + hex;
  return tlv(0x02, Uint8Array.fromHex(hex));
}

/**
 * Builds and signs one CRL of a set; returns its DER. No revokedCertificates field when the scope
 * lists nothing (RFC 5280 §5.1.2.6: an empty list is absent). A partition's CRL carries a critical
 * issuingDistributionPoint naming `crlUrl/K.crl`.
 *
 * @example
 * ```ts
 * import type { Signer } from "../ocsp/mod.ts";
 * declare const issuer: CrlIssuer, set: RevokedSet, times: CrlTimes, signer: Signer;
 * const der = await signCrl(issuer, set, 3, times, signer);
 * ```
 */
export async function signCrl(
  issuer: CrlIssuer,
  set: RevokedSet,
  scope: CrlScope,
  times: CrlTimes,
  signer: Signer,
): Promise<Uint8Array> {
  const { algorithmIdentifier, encodeSignature } = SIGNATURE_ALGORITHMS[signer.keyType];
  const extensions = [
    extensionDer({
      oid: OID.authorityKeyIdentifier,
      critical: false,
      value: sequence(tlv(0x80, keyIdentifier(issuer.spki))),
    }),
    extensionDer({ oid: OID.cRLNumber, critical: false, value: integerOf(times.number) }),
  ];
  if (scope !== "full") {
    if (!issuer.crlUrl) throw new Error("a partition CRL needs the CRL URL");
    extensions.push(
      extensionDer(issuingDistributionPoint(`${issuer.crlUrl}/${crlFileName(scope)}`)),
    );
  }
  const entries = set.entries(scope);
  const tbs = encodeDer(
    node(
      0x30,
      Uint8Array.of(0x02, 0x01, 0x01), // v2
      algorithmIdentifier,
      issuer.name,
      x509Time(times.thisUpdate),
      x509Time(times.nextUpdate),
      ...(entries.length > 0 ? [node(0x30, entries)] : []),
      tlv(0xa0, sequence(...extensions)),
    ),
  );
  const signature = encodeSignature(await signer.sign(tbs));
  return encodeDer(node(0x30, tbs, algorithmIdentifier, bitString(signature)));
}
