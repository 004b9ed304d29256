/**
 * The few DER encodings the token layer needs: object identifiers (EC curve parameters, SPKI
 * algorithm ids), octet strings (CKA_EC_POINT) and SubjectPublicKeyInfo. Not a general ASN.1 codec.
 *
 * @example
 * ```ts
 * import { oid, spki } from "./der.ts";
 * const der = spki([oid("1.3.101.112")], new Uint8Array(32)); // an Ed25519 SPKI
 * ```
 */
import { concat } from "../bytes/mod.ts";

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

/**
 * The content of a single DER OCTET STRING, or null when `der` is not exactly one. Example:
 * `unwrapOctetString(Uint8Array.of(4, 1, 7))` → `[7]`.
 */
export function unwrapOctetString(der: Uint8Array): Uint8Array | null {
  if (der.length < 2 || der[0] !== 0x04) return null;
  let len = der[1];
  let at = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 3 || der.length < 2 + n) return null;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[2 + i];
    at = 2 + n;
  }
  return at + len === der.length ? der.subarray(at) : null;
}

/** PEM armour. Example: `pem("PUBLIC KEY", spkiDer)`. */
export function pem(label: string, der: Uint8Array): string {
  const b64 = (der as Uint8Array<ArrayBuffer>).toBase64();
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
