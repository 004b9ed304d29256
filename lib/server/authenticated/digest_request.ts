/**
 * Digest mode on POST /sign and POST /verify: the header `X-SVC-Digest: <name>` says the body (for
 * /verify: what follows the signature) is that digest of the message, not the message. This file
 * reads the header and makes the refusals, each an RFC 9457 problem of its own type, status 400:
 *
 * - `digest-unknown`: a name nobody knows, or two X-SVC-Digest headers;
 * - `digest-unsupported`: the key's type has no such digest mode, or the module lacks its mechanism;
 * - `digest-length`: the digest is not that digest's length.
 *
 * Which key type takes which digest, and with which mechanism, is lib/token's (mechanisms.ts):
 * the token signs and says which mechanism it used.
 *
 * The routes ask only after the key's grant is checked: a subject not granted the key gets the one
 * 403 whatever it asks, so digest mode never tells a stranger a key's type.
 *
 * @example
 * ```ts
 * import type { HttpRequest } from "../../http/mod.ts";
 * import { digestMode } from "./digest_request.ts";
 * declare const req: HttpRequest;
 * const mode = digestMode(req.headers); // { digest: "sha-256" } | { digest: undefined } | problem
 * ```
 */
import type { HttpResponse } from "../../http/mod.ts";
import { singleHeader, typedProblem } from "../../http/mod.ts";
import {
  DIGEST_LENGTH,
  DIGEST_NAMES,
  digestMechanism,
  type DigestName,
  digestsOfKeyType,
  parseDigestName,
} from "../../token/mod.ts";

/** What a request asks: a digest name (digest mode) or none (message mode). */
export interface DigestMode {
  digest: DigestName | undefined;
}

/** The key as digest mode needs it: its type and the names it takes with this module. */
export interface DigestKey {
  keyType: string;
  digests: readonly DigestName[];
}

const KNOWN = DIGEST_NAMES.join(", ");

/**
 * What a request for a key granted to its subject asks, or its refusal: the mode of its
 * X-SVC-Digest header (none: message mode), then whether the key takes that digest here, then
 * whether `digestValue` (the body, or for /verify what follows the signature) has its length.
 */
export function digestRequest(
  headers: ReadonlyArray<readonly [string, string]>,
  key: DigestKey,
  digestValue: Uint8Array,
): DigestMode | HttpResponse {
  const mode = digestMode(headers);
  if ("status" in mode || mode.digest === undefined) return mode;
  return digestUnsupported(key, mode.digest) ?? digestLengthWrong(digestValue, mode.digest) ??
    mode;
}

/**
 * The mode a request's X-SVC-Digest header asks (none: message mode), or the `digest-unknown`
 * problem for a name nobody knows or a repeated header.
 */
export function digestMode(
  headers: ReadonlyArray<readonly [string, string]>,
): DigestMode | HttpResponse {
  const value = singleHeader(headers, "x-svc-digest");
  if (value === undefined) return { digest: undefined };
  if (value === null) {
    return unknownDigest("More than one X-SVC-Digest header arrived; send one.");
  }
  const digest = parseDigestName(value);
  if (digest === undefined) {
    return unknownDigest(`X-SVC-Digest names no digest svcd knows; the known names are ${KNOWN}.`);
  }
  return { digest };
}

/**
 * The `digest-unsupported` problem when the key does not take this digest here — its type has no
 * such digest mode (the detail names the ones it takes) or the module lacks the mechanism — else
 * undefined.
 */
export function digestUnsupported(key: DigestKey, digest: DigestName): HttpResponse | undefined {
  if (key.digests.includes(digest)) return undefined;
  let detail: string;
  if (digestsOfKeyType(key.keyType).includes(digest)) {
    detail = `The PKCS#11 module behind svcd lacks ${digestMechanism(key.keyType, digest)}, ` +
      `which ${digest} needs for ${key.keyType} keys; send the message itself, without ` +
      `X-SVC-Digest.`;
  } else if (key.digests.length === 0) {
    detail = `${key.keyType} keys take no digest mode; send the message itself, without ` +
      `X-SVC-Digest.`;
  } else {
    detail = `${key.keyType} keys take X-SVC-Digest ${key.digests.join(", ")}, not ${digest}.`;
  }
  return typedProblem(400, "digest-unsupported", "Digest mode not supported for this key", detail);
}

/**
 * The `digest-length` problem when `value` (the body, or for /verify what follows the signature)
 * is not the digest's length, else undefined.
 */
export function digestLengthWrong(value: Uint8Array, digest: DigestName): HttpResponse | undefined {
  const want = DIGEST_LENGTH[digest];
  if (value.length === want) return undefined;
  return typedProblem(
    400,
    "digest-length",
    "Digest of the wrong length",
    `A ${digest} digest is ${want} bytes; ${value.length} arrived. Send exactly the digest.`,
  );
}

function unknownDigest(detail: string): HttpResponse {
  return typedProblem(400, "digest-unknown", "Unknown digest name", detail);
}
