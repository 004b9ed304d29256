/**
 * PEM armour for DER (RFC 7468): base64 in 64-character lines between BEGIN and END lines.
 *
 * @example
 * ```ts
 * import { pem } from "./pem.ts";
 * pem("PUBLIC KEY", Uint8Array.of(0x30, 0x00)); // → "-----BEGIN PUBLIC KEY-----\nMAA=\n-----END PUBLIC KEY-----\n"
 * ```
 */

/** PEM armour. Example: `pem("PUBLIC KEY", spkiDer)`. */
export function pem(label: string, der: Uint8Array): string {
  const b64 = (der as Uint8Array<ArrayBuffer>).toBase64();
  const lines = b64.match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${label}-----\n${lines.join("\n")}\n-----END ${label}-----\n`;
}
