/**
 * Machine-generated PINs: 32 random bytes, base64 (44 ASCII characters), produced straight into
 * a byte array so the PIN never exists as a JS string.
 *
 * @example
 * ```ts
 * import { generatePin } from "./pin.ts";
 * const pin = generatePin(); // Uint8Array(44); pin.fill(0) when done
 * ```
 */

const ALPHABET = new TextEncoder().encode(
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
);
const PAD = 0x3d; // "="

/** Base64 of `bytes` as ASCII bytes (RFC 4648, padded). Example: `base64Bytes(Uint8Array.of(0))` → "AA==". */
export function base64Bytes(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  let o = 0;
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out[o++] = ALPHABET[(n >> 18) & 63];
    out[o++] = ALPHABET[(n >> 12) & 63];
    out[o++] = i + 1 < bytes.length ? ALPHABET[(n >> 6) & 63] : PAD;
    out[o++] = i + 2 < bytes.length ? ALPHABET[n & 63] : PAD;
  }
  return out;
}

/** A fresh PIN: base64 of 32 random bytes, 44 bytes long; the random bytes are wiped. */
export function generatePin(): Uint8Array {
  const random = crypto.getRandomValues(new Uint8Array(32));
  const pin = base64Bytes(random);
  random.fill(0);
  return pin;
}

/** Length of a PIN made by {@link generatePin}: base64 of 32 bytes. */
export const PIN_LENGTH = 44;

/**
 * Whether `pin` has the shape of a PIN {@link generatePin} makes (44 base64 characters, one "="
 * at the end), so a credential that cannot be one is refused before a login attempt is spent.
 *
 * @example
 * ```ts
 * isWellFormedPin(generatePin()); // → true
 * ```
 */
export function isWellFormedPin(pin: Uint8Array): boolean {
  if (pin.length !== PIN_LENGTH || pin[PIN_LENGTH - 1] !== PAD) return false;
  for (let i = 0; i < PIN_LENGTH - 1; i++) {
    if (!ALPHABET.includes(pin[i])) return false;
  }
  return true;
}
