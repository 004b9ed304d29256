/**
 * JWS compact serialisation (RFC 7515 §7.1): BASE64URL(header) "." BASE64URL(payload) "."
 * BASE64URL(signature), the signature over the ASCII of the first two parts. The payload is the
 * file; detached (appendix F) leaves the middle part empty, but the signature still covers the
 * payload's base64url. The header names `alg` and either `x5c` (the certificate, then its chain:
 * standard base64 DER, RFC 7515 §4.1.6) or `kid` (the key label). The file is encoded in slices
 * whose length is a multiple of 3 bytes, so each slice's base64url joins the next without padding.
 *
 * @example
 * ```ts
 * import { jwsHeader, payloadSlices } from "./jws.ts";
 * const header = jwsHeader("ES256", { kid: "web" }); // base64url of {"alg":"ES256","kid":"web"}
 * for await (const part of payloadSlices("file.bin")) console.log(part.length);
 * ```
 */

/** Who signed, as the header says it. */
export type JwsSigner = { x5c: Uint8Array[] } | { kid: string };

const encoder = new TextEncoder();

/** BASE64URL without padding (RFC 7515 §2). */
export function base64url(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/** The protected header's BASE64URL encoding. */
export function jwsHeader(alg: string, signer: JwsSigner): string {
  const header = "x5c" in signer
    ? { alg, x5c: signer.x5c.map((der) => der.toBase64()) }
    : { alg, kid: signer.kid };
  return base64url(encoder.encode(JSON.stringify(header)));
}

/** File bytes read at a time: a multiple of 3, about 1 MiB. */
const SLICE = 3 << 18;

/** The file's BASE64URL, slice by slice, as ASCII bytes. */
export async function* payloadSlices(path: string): AsyncGenerator<Uint8Array> {
  using file = await Deno.open(path);
  const buf = new Uint8Array(SLICE);
  let filled = 0;
  for (;;) {
    const n = await file.read(buf.subarray(filled));
    if (n === null) break;
    filled += n;
    if (filled === SLICE) {
      yield encoder.encode(base64url(buf));
      filled = 0;
    }
  }
  if (filled > 0) yield encoder.encode(base64url(buf.subarray(0, filled)));
}

/** The size of the file's BASE64URL. */
export function base64urlLength(bytes: number): number {
  return Math.floor(bytes / 3) * 4 + [0, 2, 3][bytes % 3];
}
