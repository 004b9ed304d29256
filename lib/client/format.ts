/**
 * Signature file formats: `raw` (the bytes svcd returns; ECDSA as r ‖ s), `der` (ECDSA only: the
 * X9.62 Ecdsa-Sig-Value SEQUENCE { r INTEGER, s INTEGER } that `openssl dgst -verify` takes) and
 * `base64` (of the raw bytes, one line); and the names of the containers (`cms`, `jws`), which
 * lib/client/containers makes.
 *
 * @example
 * ```ts
 * import { decodeSignature, encodeSignature } from "./format.ts";
 * const der = encodeSignature(new Uint8Array(64).fill(1), "der", "ec-p256");
 * decodeSignature(der, "der", "ec-p256").length; // 64
 * ```
 */
import { ClientError } from "./errors.ts";

/** The formats of a bare signature. */
export const RAW_FORMATS = ["raw", "der", "base64"] as const;
/** One of them. */
export type RawFormat = typeof RAW_FORMATS[number];
/** The containers (lib/client/containers): a CMS SignedData (DER), a compact JWS. */
export const CONTAINER_FORMATS = ["cms", "jws"] as const;
/** One of them. */
export type ContainerFormat = typeof CONTAINER_FORMATS[number];
/** The formats of --format. */
export const SIGNATURE_FORMATS = [...RAW_FORMATS, ...CONTAINER_FORMATS] as const;
/** One of them. */
export type SignatureFormat = RawFormat | ContainerFormat;

const ECDSA_FIELD_BYTES: Record<string, number> = { "ec-p256": 32, "ec-p384": 48 };

/** Type guard for --format. */
export function isSignatureFormat(value: string): value is SignatureFormat {
  return (SIGNATURE_FORMATS as readonly string[]).includes(value);
}

/** Type guard: a container format. */
export function isContainerFormat(format: SignatureFormat): format is ContainerFormat {
  return (CONTAINER_FORMATS as readonly string[]).includes(format);
}

/** Throws a usage error when `format` does not apply to `keyType` (der: ECDSA only). */
export function checkFormatFor(format: RawFormat, keyType: string): void {
  if (format === "der" && !(keyType in ECDSA_FIELD_BYTES)) {
    throw new ClientError(
      `--format der is the ECDSA signature form; a ${keyType} signature has one form: use ` +
        "--format raw (or base64)",
      { usage: true },
    );
  }
}

/** The file bytes of a raw signature in `format`. */
export function encodeSignature(
  raw: Uint8Array,
  format: RawFormat,
  keyType: string,
): Uint8Array {
  switch (format) {
    case "raw":
      return raw;
    case "base64":
      return new TextEncoder().encode(raw.toBase64() + "\n");
    case "der":
      checkFormatFor(format, keyType);
      return ecdsaDer(raw);
  }
}

/**
 * A signature file that does not parse in its --format: like a signature that does not verify it
 * is not a valid signature (exit 1, as `openssl dgst -verify`), not a mistake in the command line.
 */
export class MalformedSignature extends ClientError {
  constructor(message: string) {
    super(message);
    this.name = "MalformedSignature";
  }
}

/**
 * The raw signature from the bytes of the file `name` in `format`: MalformedSignature when they
 * are not that format, a usage ClientError when the format does not apply to the key type.
 */
export function decodeSignature(
  bytes: Uint8Array,
  format: RawFormat,
  keyType: string,
  name = "the signature file",
): Uint8Array {
  switch (format) {
    case "raw":
      return bytes;
    case "base64":
      try {
        return Uint8Array.fromBase64(new TextDecoder().decode(bytes).trim());
      } catch {
        throw new MalformedSignature(
          `${name} is not base64 (--format base64): the signature is not valid`,
        );
      }
    case "der": {
      checkFormatFor(format, keyType);
      const raw = ecdsaRaw(bytes, ECDSA_FIELD_BYTES[keyType]);
      if (!raw) {
        throw new MalformedSignature(
          `${name} is not a DER ${keyType} ECDSA signature (--format der): the signature is ` +
            "not valid",
        );
      }
      return raw;
    }
  }
}

/** r ‖ s → DER SEQUENCE { INTEGER r, INTEGER s }. */
export function ecdsaDer(raw: Uint8Array): Uint8Array {
  const half = raw.length / 2;
  const r = derInteger(raw.subarray(0, half));
  const s = derInteger(raw.subarray(half));
  return Uint8Array.of(0x30, ...derLength(r.length + s.length), ...r, ...s);
}

function derInteger(value: Uint8Array): Uint8Array {
  let start = 0;
  while (start < value.length - 1 && value[start] === 0) start++;
  const body = value.subarray(start);
  const padded = body[0] & 0x80 ? Uint8Array.of(0, ...body) : body;
  return Uint8Array.of(0x02, ...derLength(padded.length), ...padded);
}

function derLength(n: number): number[] {
  return n < 0x80 ? [n] : n < 0x100 ? [0x81, n] : [0x82, n >> 8, n & 0xff];
}

/** DER SEQUENCE { INTEGER r, INTEGER s } → r ‖ s of `field` bytes each, or undefined. */
export function ecdsaRaw(der: Uint8Array, field: number): Uint8Array | undefined {
  let at = 0;
  const read = (): { tag: number; body: Uint8Array } | undefined => {
    if (at + 2 > der.length) return undefined;
    const tag = der[at++];
    let len = der[at++];
    if (len & 0x80) {
      const count = len & 0x7f;
      if (count === 0 || count > 2 || at + count > der.length) return undefined;
      len = 0;
      for (let i = 0; i < count; i++) len = (len << 8) | der[at++];
    }
    if (at + len > der.length) return undefined;
    const body = der.subarray(at, at + len);
    at += len;
    return { tag, body };
  };
  const seq = read();
  if (!seq || seq.tag !== 0x30 || at !== der.length) return undefined;
  der = seq.body;
  at = 0;
  const out = new Uint8Array(field * 2);
  for (const offset of [0, field]) {
    const int = read();
    if (!int || int.tag !== 0x02 || int.body.length === 0 || int.body[0] & 0x80) return undefined;
    let v = int.body;
    while (v.length > 1 && v[0] === 0) v = v.subarray(1);
    if (v.length > field) return undefined;
    out.set(v, offset + field - v.length);
  }
  return at === der.length ? out : undefined;
}
