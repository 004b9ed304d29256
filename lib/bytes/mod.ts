/**
 * Byte-string helpers shared by the HTTP, policy, audit and token layers (none of which should
 * depend on another for them): latin1 both ways, concatenation, comparison. Hex is the platform's
 * (`Uint8Array.prototype.toHex`, `Uint8Array.fromHex`).
 *
 * @example
 * ```ts
 * import { concat, latin1 } from "../bytes/mod.ts";
 * latin1(concat([Uint8Array.of(0x43), Uint8Array.of(0xff)])); // → "C\xFF"
 * ```
 */

import { Buffer } from "node:buffer";

// String.fromCharCode takes its bytes as arguments: chunks keep under the engine's argument limit.
const CHUNK = 8192;
/** From this size on, node:buffer's native latin1 decoder is faster than String.fromCharCode. */
const NATIVE_FROM = 4096;

/**
 * Decodes bytes one char per byte (ISO-8859-1). Not TextDecoder("latin1"): that is windows-1252,
 * which turns 0x80–0x9F into other code points and would break byte-for-byte matching.
 *
 * @example
 * ```ts
 * latin1(new Uint8Array([0x43, 0xc3, 0xbc])); // → "C\xC3\xBC"
 * ```
 */
export function latin1(bytes: Uint8Array): string {
  if (bytes.length >= NATIVE_FROM) {
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("latin1");
  }
  let out = "";
  for (let i = 0; i < bytes.length; i += CHUNK) {
    out += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  }
  return out;
}

/**
 * Encodes a latin1 string (every char below U+0100, as header values and `latin1()` give) as one
 * byte per char; the inverse of {@link latin1}.
 *
 * @example
 * ```ts
 * latin1Bytes("GET / HTTP/1.1\r\n"); // → the request line's bytes
 * ```
 */
export function latin1Bytes(text: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

/**
 * Same bytes? In time that depends on the length only, never on where they differ: safe for
 * MACs and other secrets as well as for plain comparisons.
 *
 * @example
 * ```ts
 * bytesEqual(Uint8Array.of(1, 2), Uint8Array.of(1, 2)); // → true
 * ```
 */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

/**
 * The parts one after another, in a buffer from `alloc` (default a fresh one). A single part is
 * returned as it is, not copied: the caller must not rely on owning the result.
 *
 * @example
 * ```ts
 * concat([Uint8Array.of(1), Uint8Array.of(2, 3)]); // → Uint8Array [1, 2, 3]
 * ```
 */
export function concat<B extends ArrayBufferLike = ArrayBuffer>(
  parts: readonly Uint8Array<B>[],
  alloc: (n: number) => Uint8Array<B> = freshBytes as (n: number) => Uint8Array<B>,
): Uint8Array<B> {
  if (parts.length === 1) return parts[0];
  let n = 0;
  for (const p of parts) n += p.length;
  const out = alloc(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function freshBytes(n: number): Uint8Array<ArrayBuffer> {
  return new Uint8Array(n);
}
