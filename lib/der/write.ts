/**
 * The DER writer svcd builds with: the token layer's public keys (SubjectPublicKeyInfo, EC
 * parameters), the OCSP responses and the CA's certificates and CRLs. Small encodings are
 * functions returning bytes; a large structure is a tree of DerNode written into one buffer by
 * encodeDer. Not a general ASN.1 codec.
 *
 * @example
 * ```ts
 * import { oid, spki } from "./write.ts";
 * const der = spki([oid("1.3.101.112")], new Uint8Array(32)); // an Ed25519 SPKI
 * ```
 */
import { concat } from "../bytes/mod.ts";
import { ctx, TAG } from "./tags.ts";

function length(n: number): Uint8Array {
  if (n < 0x80) return Uint8Array.of(n);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Uint8Array.of(0x80 | bytes.length, ...bytes);
}

/** One TLV. Example: `tlv(0x04, bytes)` is an OCTET STRING. */
export function tlv(tag: number, content: Uint8Array): Uint8Array {
  const len = length(content.byteLength);
  const out = new Uint8Array(1 + len.byteLength + content.byteLength);
  out[0] = tag;
  out.set(len, 1);
  out.set(content, 1 + len.byteLength);
  return out;
}

/** SEQUENCE of the given encodings. Example: `sequence(oid("1.2.3"), nullValue())`. */
export function sequence(...items: Uint8Array[]): Uint8Array {
  return tlv(0x30, concat(items));
}

/** NULL. */
export function nullValue(): Uint8Array {
  return Uint8Array.of(0x05, 0x00);
}

/** OBJECT IDENTIFIER from dotted text. Example: `oid("1.2.840.10045.3.1.7")` → `06 08 2a 86 48 ce 3d 03 01 07`. */
export function oid(dotted: string): Uint8Array {
  const arcs = dotted.split(".").map(Number);
  const body: number[] = [];
  const push = (v: number) => {
    const chunk = [v & 0x7f];
    for (let x = Math.floor(v / 128); x > 0; x = Math.floor(x / 128)) {
      chunk.unshift(0x80 | (x & 0x7f));
    }
    body.push(...chunk);
  };
  push(arcs[0] * 40 + arcs[1]);
  arcs.slice(2).forEach(push);
  return tlv(0x06, Uint8Array.from(body));
}

/** INTEGER from unsigned big-endian bytes (adds the sign byte when needed). */
export function unsignedInteger(bytes: Uint8Array): Uint8Array {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = bytes.subarray(start);
  return tlv(0x02, trimmed[0] & 0x80 ? concat([Uint8Array.of(0), trimmed]) : trimmed);
}

/** BIT STRING with no unused bits. */
export function bitString(bytes: Uint8Array): Uint8Array {
  return tlv(0x03, concat([Uint8Array.of(0), bytes]));
}

/** SubjectPublicKeyInfo: SEQUENCE { SEQUENCE { algorithm… }, BIT STRING key }. */
export function spki(algorithm: Uint8Array[], key: Uint8Array): Uint8Array {
  return sequence(sequence(...algorithm), bitString(key));
}

/** Content bytes of an OID given as dotted text. Example: `oidContent("1.3.101.112")` → `2b 65 70`. */
export function oidContent(dotted: string): Uint8Array {
  return oid(dotted).subarray(2);
}

/** Something to write: finished DER bytes, or a DerNode over parts. */
export type DerPart = Uint8Array | DerNode;

/**
 * An element to be written: a tag over parts, with its encoded size known up front, so a whole
 * structure is written into one buffer by `encodeDer` (the response path allocates once instead
 * of once per element).
 *
 * @example
 * ```ts
 * import { TAG } from "./tags.ts";
 * encodeDer(node(TAG.SEQUENCE, node(TAG.OCTET_STRING, Uint8Array.of(1)))); // 30 03 04 01 01
 * ```
 */
export class DerNode {
  /** Encoded size, header included. */
  readonly length: number;
  /** Size of the content. */
  readonly contentLength: number;
  /** Example: `new DerNode(TAG.SEQUENCE, [a, b])`. */
  constructor(readonly tag: number, readonly parts: readonly DerPart[]) {
    let n = 0;
    for (const p of parts) n += p.length;
    this.contentLength = n;
    this.length = 1 + lengthOfLength(n) + n;
  }
}

/** A DerNode. Example: `node(TAG.SEQUENCE, oidDer, nullDer)`. */
export function node(tag: number, ...parts: DerPart[]): DerNode {
  return new DerNode(tag, parts);
}

/** The DER bytes of a part, written into one new buffer. Example: `encodeDer(node(0x30))` → `30 00`. */
export function encodeDer(part: DerPart): Uint8Array {
  if (part instanceof Uint8Array) return part;
  const out = new Uint8Array(part.length);
  writePart(out, 0, part);
  return out;
}

function lengthOfLength(n: number): number {
  return n < 0x80 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : n < 0x1000000 ? 4 : 5;
}

function writePart(out: Uint8Array, at: number, part: DerPart): number {
  if (part instanceof Uint8Array) {
    out.set(part, at);
    return at + part.length;
  }
  out[at++] = part.tag;
  const n = part.contentLength;
  const extra = lengthOfLength(n) - 1;
  if (extra === 0) out[at++] = n;
  else {
    out[at++] = 0x80 | extra;
    for (let i = extra - 1; i >= 0; i--) out[at++] = (n / 2 ** (8 * i)) & 0xff;
  }
  for (const p of part.parts) at = writePart(out, at, p);
  return at;
}

/** OCTET STRING. Example: `octetString(Uint8Array.of(1))` → `04 01 01`. */
export function octetString(content: Uint8Array): Uint8Array {
  return tlv(TAG.OCTET_STRING, content);
}

/** [n] EXPLICIT wrapping of one encoding. Example: `explicit(0, integer)` → `a0 …`. */
export function explicit(n: number, ...inner: Uint8Array[]): Uint8Array {
  return tlv(ctx(n), concat(inner));
}

/** ENUMERATED with a small value. Example: `enumerated(1)` → `0a 01 01`. */
export function enumerated(value: number): Uint8Array {
  return tlv(TAG.ENUMERATED, smallIntegerContent(value));
}

/** INTEGER from a small non-negative number. Example: `integer(2)` → `02 01 02`. */
export function integer(value: number): Uint8Array {
  return tlv(TAG.INTEGER, smallIntegerContent(value));
}

function smallIntegerContent(value: number): Uint8Array {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`not a small integer: ${value}`);
  }
  const out: number[] = [];
  for (let v = value; v > 0; v = Math.floor(v / 256)) out.unshift(v & 0xff);
  if (out.length === 0 || out[0] & 0x80) out.unshift(0);
  return Uint8Array.from(out);
}

/** BOOLEAN. Example: `boolean(true)` → `01 01 ff`. */
export function boolean(value: boolean): Uint8Array {
  return Uint8Array.of(TAG.BOOLEAN, 1, value ? 0xff : 0);
}

/**
 * GeneralizedTime YYYYMMDDHHMMSSZ, whole seconds (fractions dropped, as DER profiles want).
 * Example: `generalizedTime(0)` → `18 0f "19700101000000Z"`.
 */
export function generalizedTime(ms: number): Uint8Array {
  const second = Math.floor(ms / 1000);
  if (second !== lastTime.second) {
    lastTime = { second, der: tlv(TAG.GENERALIZED_TIME, ascii(timeDigits(ms, 4))) };
  }
  return lastTime.der.slice();
}

// Responses made in the same second share producedAt/thisUpdate: the digits are made once.
let lastTime: { second: number; der: Uint8Array } = { second: NaN, der: new Uint8Array(0) };

/**
 * The X.509 validity form: UTCTime through 2049, GeneralizedTime from 2050 (RFC 5280 §4.1.2.5).
 * Example: `x509Time(Date.UTC(2030, 0, 1))` → `17 0d "300101000000Z"`.
 */
export function x509Time(ms: number): Uint8Array {
  const year = new Date(ms).getUTCFullYear();
  return year < 2050 && year >= 1950
    ? tlv(TAG.UTC_TIME, ascii(timeDigits(ms, 2)))
    : generalizedTime(ms);
}

function timeDigits(ms: number, yearDigits: 2 | 4): string {
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  if (year < 0 || year > 9999) throw new RangeError(`time outside years 0000–9999: ${ms}`);
  const two = (n: number) => (n < 10 ? "0" : "") + n;
  const y = String(year).padStart(4, "0");
  return (yearDigits === 2 ? y.slice(2) : y) + two(d.getUTCMonth() + 1) + two(d.getUTCDate()) +
    two(d.getUTCHours()) + two(d.getUTCMinutes()) + two(d.getUTCSeconds()) + "Z";
}

function ascii(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}
