/**
 * OCSPRequest (RFC 6960 §4.1) read strictly and bounded, and written (for `svcd ca status`, the
 * benches and the tests). Choices where the RFC leaves room:
 *
 * - A signed request (optionalSignature) is accepted and its signature is not checked: the
 *   answers are public, so a signature would authorise nothing (openssl ocsp does the same unless
 *   told otherwise). Its structure must still be strict DER: an AlgorithmIdentifier (OID, then
 *   nothing or one element), a BIT STRING, and certificates that parse as X.509 with every nested
 *   element DER.
 * - requestorName must be a GeneralName (RFC 5280 §4.2.1.6) in strict DER, at least as strict as
 *   Python cryptography reads it: the nine alternatives only, IA5 strings ASCII, an IP address of 4
 *   or 16 bytes, a directoryName a Name whose SET OFs are in DER order.
 * - Nonce (RFC 9654): extnValue must be exactly one OCTET STRING of 1–128 bytes; anything else
 *   under the nonce OID is malformedRequest.
 * - Any other extension is ignored unless marked critical, which is malformedRequest (we cannot
 *   honour it). The same extension twice is malformedRequest (RFC 5280 §4.2).
 * - CertID hash algorithms SHA-1/224/256/384/512 with parameters NULL or absent; the hashes must
 *   have that algorithm's length. Another algorithm parses (the responder cannot match it).
 * - An explicit version field is refused: v1 is the DEFAULT, which DER omits, and no other
 *   version exists.
 *
 * @example
 * ```ts
 * declare const certId: Uint8Array, nonce: Uint8Array;
 * const req = parseOcspRequest(encodeOcspRequest({ certIds: [certId], nonce }));
 * req.certIds[0].serial; // INTEGER content
 * ```
 */
import { createHash } from "node:crypto";
import { type CertificateInfo, parseCertificate } from "./certificate.ts";
import {
  boolean,
  ctx,
  ctxPrimitive,
  DerError,
  DerReader,
  explicit,
  nullValue,
  octetString,
  oid,
  oidContent,
  sequence,
  TAG,
  tlv,
} from "../der/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";

/** Largest request read: 16 KiB (a one-certificate request is under 200 bytes). */
export const MAX_REQUEST_BYTES = 16 * 1024;
/** Most single requests in one OCSPRequest. */
export const MAX_SINGLE_REQUESTS = 64;
/** Longest serial INTEGER content (RFC 5280 allows 20 octets; some CAs add a sign byte). */
export const MAX_SERIAL_BYTES = 32;
/** Nonce length bounds of RFC 9654 §2.1. */
export const NONCE_MIN = 1;
/** Example: `nonce.length <= NONCE_MAX`. */
export const NONCE_MAX = 128;

/** CertID hash algorithms. Example: `"sha256"`. */
export type HashName = "sha1" | "sha224" | "sha256" | "sha384" | "sha512";

/** OID and output length of each CertID hash. Example: `CERT_ID_HASHES.sha1.length === 20`. */
export const CERT_ID_HASHES: Readonly<Record<HashName, { oid: string; length: number }>> = {
  sha1: { oid: "1.3.14.3.2.26", length: 20 },
  sha224: { oid: "2.16.840.1.101.3.4.2.4", length: 28 },
  sha256: { oid: "2.16.840.1.101.3.4.2.1", length: 32 },
  sha384: { oid: "2.16.840.1.101.3.4.2.2", length: 48 },
  sha512: { oid: "2.16.840.1.101.3.4.2.3", length: 64 },
};
const HASH_BY_OID = Object.entries(CERT_ID_HASHES).map(([name, h]) => ({
  name: name as HashName,
  oid: oidContent(h.oid),
  length: h.length,
}));

/** id-pkix-ocsp-nonce. Example: `oid(OCSP_NONCE_OID)`. */
export const OCSP_NONCE_OID = "1.3.6.1.5.5.7.48.1.2";
const NONCE_OID = oidContent(OCSP_NONCE_OID);
const NONCE_OID_DER = oid(OCSP_NONCE_OID);

/** One CertID as the client sent it. */
export interface CertId {
  /** The whole CertID encoding: answered back byte for byte. */
  der: Uint8Array;
  /** Its hash algorithm, or null for one we do not support. */
  hash: HashName | null;
  issuerNameHash: Uint8Array;
  issuerKeyHash: Uint8Array;
  /** serialNumber INTEGER content (two's complement, minimal). */
  serial: Uint8Array;
}

/** A parsed OCSPRequest. */
export interface OcspRequest {
  certIds: CertId[];
  /** The nonce's bytes (1–128), or null when the request has none. */
  nonce: Uint8Array | null;
  /** Whether optionalSignature was present (it is not checked). */
  signed: boolean;
}

/** A request the rules refuse: answered with malformedRequest. */
export class MalformedRequest extends Error {
  /** Example: `new MalformedRequest("nonce of 0 bytes")`. */
  constructor(message: string) {
    super(message);
    this.name = "MalformedRequest";
  }
}

/**
 * Parses an OCSPRequest. Throws MalformedRequest (with the reason) on anything the rules refuse.
 *
 * @example
 * ```ts
 * declare const body: Uint8Array;
 * const { certIds, nonce } = parseOcspRequest(body);
 * ```
 */
export function parseOcspRequest(der: Uint8Array): OcspRequest {
  if (der.length > MAX_REQUEST_BYTES) {
    throw new MalformedRequest(`request over ${MAX_REQUEST_BYTES} bytes`);
  }
  try {
    return readRequest(der);
  } catch (e) {
    if (e instanceof DerError) throw new MalformedRequest(e.message);
    throw e;
  }
}

function readRequest(der: Uint8Array): OcspRequest {
  const top = new DerReader(der);
  const ocspRequest = top.enter(TAG.SEQUENCE, "OCSPRequest");
  top.finish("OCSPRequest");
  const tbs = ocspRequest.enter(TAG.SEQUENCE, "TBSRequest");
  if (tbs.peekTag() === ctx(0)) throw new MalformedRequest("explicit version (v1 is the DEFAULT)");
  const requestor = tbs.enterOptional(ctx(1));
  if (requestor) {
    readGeneralName(requestor);
    requestor.finish("requestorName");
  }
  const list = tbs.enter(TAG.SEQUENCE, "requestList");
  const certIds: CertId[] = [];
  while (!list.done) {
    if (certIds.length === MAX_SINGLE_REQUESTS) {
      throw new MalformedRequest(`more than ${MAX_SINGLE_REQUESTS} single requests`);
    }
    const single = list.enter(TAG.SEQUENCE, "Request");
    certIds.push(readCertId(single));
    const exts = single.enterOptional(ctx(0));
    if (exts) {
      readExtensions(exts);
      exts.finish();
    }
    single.finish("Request field");
  }
  if (certIds.length === 0) throw new MalformedRequest("empty requestList");
  let nonce: Uint8Array | null = null;
  const exts = tbs.enterOptional(ctx(2));
  if (exts) {
    nonce = readExtensions(exts);
    exts.finish();
  }
  tbs.finish("TBSRequest field");
  const signature = ocspRequest.enterOptional(ctx(0));
  if (signature) readSignature(signature);
  ocspRequest.finish("OCSPRequest field");
  return { certIds, nonce, signed: signature !== null };
}

function readCertId(single: DerReader): CertId {
  const t = single.expect(TAG.SEQUENCE, "CertID");
  const r = new DerReader(single.bytes, t.contentStart, t.end, single.depth + 1);
  const alg = r.enter(TAG.SEQUENCE, "hashAlgorithm");
  const algOid = alg.readOid();
  if (!alg.done) alg.readNull();
  alg.finish("hashAlgorithm field");
  const issuerNameHash = r.readOctetString();
  const issuerKeyHash = r.readOctetString();
  const serial = r.readIntegerBytes(MAX_SERIAL_BYTES);
  r.finish("CertID field");
  const known = HASH_BY_OID.find((h) => bytesEqual(h.oid, algOid));
  if (known && (issuerNameHash.length !== known.length || issuerKeyHash.length !== known.length)) {
    throw new MalformedRequest(`CertID hashes are not ${known.name} lengths`);
  }
  return { der: single.raw(t), hash: known?.name ?? null, issuerNameHash, issuerKeyHash, serial };
}

// Returns the nonce when present; refuses duplicates, critical unknowns and bad nonces.
function readExtensions(r: DerReader): Uint8Array | null {
  const list = r.enter(TAG.SEQUENCE, "Extensions");
  const seen: Uint8Array[] = [];
  let nonce: Uint8Array | null = null;
  if (list.done) throw new MalformedRequest("empty Extensions");
  while (!list.done) {
    const ext = list.enter(TAG.SEQUENCE, "Extension");
    const id = ext.readOid();
    let critical = false;
    if (ext.peekTag() === TAG.BOOLEAN) {
      critical = ext.readBoolean();
      if (!critical) {
        throw new MalformedRequest("critical FALSE written out (DER omits the DEFAULT)");
      }
    }
    const value = ext.readOctetString();
    ext.finish("Extension field");
    if (seen.some((s) => bytesEqual(s, id))) {
      throw new MalformedRequest("an extension appears twice");
    }
    seen.push(id);
    if (bytesEqual(id, NONCE_OID)) nonce = readNonce(value);
    else if (critical) throw new MalformedRequest("unsupported critical extension");
  }
  return nonce;
}

function readNonce(extnValue: Uint8Array): Uint8Array {
  const r = new DerReader(extnValue);
  const nonce = r.readOctetString();
  r.finish("nonce");
  if (nonce.length < NONCE_MIN || nonce.length > NONCE_MAX) {
    throw new MalformedRequest(`nonce of ${nonce.length} bytes (RFC 9654: 1–128)`);
  }
  return nonce;
}

function readSignature(r: DerReader): void {
  const sig = r.enter(TAG.SEQUENCE, "Signature");
  r.finish();
  const alg = sig.enter(TAG.SEQUENCE, "signatureAlgorithm");
  alg.readOid();
  if (!alg.done) alg.skipStrict();
  alg.finish("signatureAlgorithm field");
  sig.readBitStringBytes();
  const certs = sig.enterOptional(ctx(0));
  if (certs) {
    const list = certs.enter(TAG.SEQUENCE, "certs");
    certs.finish();
    while (!list.done) {
      const t = list.skipStrict();
      if (t.tag !== TAG.SEQUENCE) throw new MalformedRequest("a certificate is not a SEQUENCE");
      parseCertificate(list.raw(t));
    }
  }
  sig.finish("Signature field");
}

// GeneralName alternatives (RFC 5280 §4.2.1.6): IMPLICIT tags but directoryName, which is
// EXPLICIT because Name is a CHOICE.
const GN = {
  otherName: ctx(0),
  rfc822Name: ctxPrimitive(1),
  dNSName: ctxPrimitive(2),
  x400Address: ctx(3),
  directoryName: ctx(4),
  ediPartyName: ctx(5),
  uri: ctxPrimitive(6),
  iPAddress: ctxPrimitive(7),
  registeredID: ctxPrimitive(8),
} as const;

function readGeneralName(r: DerReader): void {
  const tag = r.peekTag();
  if (tag === GN.registeredID) {
    r.readOid(tag);
    return;
  }
  const t = r.next();
  const content = r.content(t);
  const inner = new DerReader(r.bytes, t.contentStart, t.end, r.depth + 1);
  switch (tag) {
    case GN.otherName: {
      inner.readOid();
      const value = inner.enter(ctx(0), "otherName value");
      value.skipStrict();
      value.finish("otherName value");
      break;
    }
    case GN.rfc822Name:
    case GN.dNSName:
    case GN.uri:
      if (content.some((b) => b > 0x7f)) throw new MalformedRequest("IA5String not ASCII");
      return;
    case GN.iPAddress:
      if (content.length !== 4 && content.length !== 16) {
        throw new MalformedRequest(`iPAddress of ${content.length} bytes`);
      }
      return;
    case GN.x400Address:
    case GN.ediPartyName:
      while (!inner.done) inner.skipStrict();
      break;
    case GN.directoryName:
      readName(inner);
      break;
    default:
      throw new MalformedRequest("requestorName is not a GeneralName");
  }
  inner.finish("GeneralName field");
}

// Name ::= SEQUENCE OF SET OF AttributeTypeAndValue; each SET OF in DER order (X.690 §11.6).
function readName(r: DerReader): void {
  const rdns = r.enter(TAG.SEQUENCE, "Name");
  while (!rdns.done) {
    const rdn = rdns.enter(TAG.SET, "RelativeDistinguishedName");
    if (rdn.done) throw new MalformedRequest("empty RelativeDistinguishedName");
    let previous: Uint8Array | null = null;
    while (!rdn.done) {
      const t = rdn.expect(TAG.SEQUENCE, "AttributeTypeAndValue");
      const atv = new DerReader(rdn.bytes, t.contentStart, t.end, rdn.depth + 1);
      atv.readOid();
      readAttributeValue(atv);
      atv.finish("AttributeTypeAndValue field");
      const encoding = rdn.raw(t);
      if (previous && compareDer(previous, encoding) > 0) {
        throw new MalformedRequest("SET OF not in DER order");
      }
      previous = encoding;
    }
  }
}

const BMP_STRING = 0x1e;
const UNIVERSAL_STRING = 0x1c;

// Any value; BMPString and UniversalString must hold whole UTF-16 / UTF-32 characters.
function readAttributeValue(r: DerReader): void {
  const t = r.skipStrict();
  const c = r.content(t);
  if (t.tag === BMP_STRING) {
    if (c.length % 2) throw new MalformedRequest("BMPString of an odd length");
    const units = Array.from({ length: c.length / 2 }, (_, i) => c[2 * i] << 8 | c[2 * i + 1]);
    if (!String.fromCharCode(...units).isWellFormed()) {
      throw new MalformedRequest("BMPString not UTF-16");
    }
  } else if (t.tag === UNIVERSAL_STRING) {
    if (c.length % 4) throw new MalformedRequest("UniversalString length not a multiple of 4");
    for (let i = 0; i < c.length; i += 4) {
      const cp = ((c[i] << 24) | (c[i + 1] << 16) | (c[i + 2] << 8) | c[i + 3]) >>> 0;
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
        throw new MalformedRequest("UniversalString not UTF-32");
      }
    }
  }
}

// X.690 §11.6: encodings compared as octet strings, the shorter padded with trailing zeros.
function compareDer(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The hex the index uses for a serial INTEGER's content, or null for a negative serial (which no
 * index line can hold).
 *
 * @example
 * ```ts
 * serialHex(Uint8Array.of(0x00, 0x98)) === "98";
 * ```
 */
export function serialHex(serial: Uint8Array): string | null {
  if (serial[0] & 0x80) return null;
  let s = "";
  for (const b of serial) s += HEX[b];
  return s.replace(/^(00)+(?=.)/, "").toUpperCase();
}
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/**
 * INTEGER content (minimal two's complement) of a non-negative serial given as hex, as CertID
 * and certificates carry it. Throws on anything but hex digits.
 *
 * @example
 * ```ts
 * serialContent("98") // → 00 98
 * ```
 */
export function serialContent(hex: string): Uint8Array {
  if (!/^[0-9a-fA-F]+$/.test(hex)) throw new Error(`serial must be hex: ${JSON.stringify(hex)}`);
  const digits = hex.replace(/^0+(?=.)/, "");
  const even = digits.length % 2 ? `0${digits}` : digits;
  const bytes = Uint8Array.fromHex(even);
  return bytes[0] & 0x80 ? Uint8Array.of(0, ...bytes) : bytes;
}

/** What one CertID is made of, for the encoder. */
export interface CertIdFields {
  hash: HashName;
  issuerNameHash: Uint8Array;
  issuerKeyHash: Uint8Array;
  /** INTEGER content (two's complement). */
  serial: Uint8Array;
  /** Write the hash AlgorithmIdentifier's parameters as NULL (OpenSSL's habit; default true). */
  nullParameters?: boolean;
}

/**
 * A CertID (DER) for a certificate with `serial` issued by `issuer`.
 *
 * @example
 * ```ts
 * import type { CertificateInfo } from "./certificate.ts";
 * declare const ca: CertificateInfo;
 * const id = certIdFor(ca, Uint8Array.of(0x1a), "sha256");
 * ```
 */
export function certIdFor(
  issuer: CertificateInfo,
  serial: Uint8Array,
  hash: HashName = "sha1",
): Uint8Array {
  return encodeCertId({
    hash,
    issuerNameHash: createHash(hash).update(issuer.subject).digest(),
    issuerKeyHash: createHash(hash).update(issuer.publicKey).digest(),
    serial,
  });
}

/**
 * Encodes one CertID.
 *
 * @example
 * ```ts
 * declare const issuerNameHash: Uint8Array, issuerKeyHash: Uint8Array;
 * encodeCertId({ hash: "sha1", issuerNameHash, issuerKeyHash, serial: Uint8Array.of(1) });
 * ```
 */
export function encodeCertId(f: CertIdFields): Uint8Array {
  const alg = f.nullParameters === false
    ? sequence(oid(CERT_ID_HASHES[f.hash].oid))
    : sequence(oid(CERT_ID_HASHES[f.hash].oid), nullValue());
  return sequence(
    alg,
    octetString(f.issuerNameHash),
    octetString(f.issuerKeyHash),
    tlv(TAG.INTEGER, f.serial),
  );
}

/**
 * Encodes an unsigned OCSPRequest over CertIDs (DER, from certIdFor/encodeCertId) and an
 * optional nonce.
 *
 * @example
 * ```ts
 * import type { CertificateInfo } from "./certificate.ts";
 * declare const ca: CertificateInfo, serial: Uint8Array;
 * const body = encodeOcspRequest({ certIds: [certIdFor(ca, serial)], nonce: crypto.getRandomValues(new Uint8Array(16)) });
 * ```
 */
export function encodeOcspRequest(
  opts: { certIds: Uint8Array[]; nonce?: Uint8Array | null },
): Uint8Array {
  const list = sequence(...opts.certIds.map((id) => sequence(id)));
  const parts = [list];
  if (opts.nonce) parts.push(explicit(2, sequence(nonceExtension(opts.nonce))));
  return sequence(sequence(...parts));
}

/**
 * The nonce Extension (DER), as requests and responses carry it.
 *
 * @example
 * ```ts
 * nonceExtension(Uint8Array.of(1, 2)); // 30 0f 06 09 … 04 04 04 02 01 02
 * ```
 */
export function nonceExtension(nonce: Uint8Array, critical = false): Uint8Array {
  const parts = [NONCE_OID_DER];
  if (critical) parts.push(boolean(true));
  parts.push(octetString(octetString(nonce)));
  return sequence(...parts);
}
