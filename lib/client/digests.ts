/**
 * Which digest `svcd client` computes for a key type: the one it sends in digest mode (when svcd
 * lists it for the key) and the one it checks a signature over locally. ECDSA and RSA take the
 * hash of their message form (so a digest signature is the very scheme a message signature is),
 * ML-DSA takes μ, the composite's local check needs SHA-512 of the message (its M'), and Ed25519
 * none: it signs and is checked over the message itself.
 *
 * @example
 * ```ts
 * import { localDigestName } from "./digests.ts";
 * localDigestName("ec-p384"); // "sha-384"
 * ```
 */
import { createHash } from "node:crypto";
import { muHasher } from "./mu.ts";

/** The digest names of the wire (RFC 9530 spelling, lowercase). */
export type DigestName = "sha-256" | "sha-384" | "sha-512" | "ml-dsa-mu";

/** An incremental digest. */
export interface Digester {
  update(chunk: Uint8Array): void;
  digest(): Uint8Array;
}

const LOCAL_DIGEST: Record<string, DigestName> = {
  "ec-p256": "sha-256",
  "ec-p384": "sha-384",
  "rsa-3072": "sha-256",
  "rsa-3072-pkcs1v15": "sha-256",
  "ml-dsa-44": "ml-dsa-mu",
  "ml-dsa-65": "ml-dsa-mu",
  "ml-dsa-87": "ml-dsa-mu",
  "composite-mldsa65-ed25519": "sha-512",
};

/** node:crypto's names of the SHA-2 digests. */
export const NODE_HASH = { "sha-256": "sha256", "sha-384": "sha384", "sha-512": "sha512" } as const;

/** The digest computed for `keyType`, or undefined (Ed25519, an unknown type): the message itself. */
export function localDigestName(keyType: string): DigestName | undefined {
  return Object.hasOwn(LOCAL_DIGEST, keyType) ? LOCAL_DIGEST[keyType] : undefined;
}

/** The digest to send for a key: its local digest when svcd lists it for the key, else none. */
export function digestModeName(
  key: { keyType: string; digests: string[] },
): DigestName | undefined {
  const name = localDigestName(key.keyType);
  return name !== undefined && key.digests.includes(name) ? name : undefined;
}

/** A fresh digester; `publicKeyRaw` is needed for μ. */
export function createDigester(name: DigestName, publicKeyRaw: Uint8Array): Digester {
  if (name === "ml-dsa-mu") return muHasher(publicKeyRaw);
  const h = createHash(NODE_HASH[name]);
  return {
    update: (chunk) => void h.update(chunk),
    digest: () => new Uint8Array(h.digest()),
  };
}

/** The digest of bytes already in memory. */
export function digestOf(
  name: DigestName,
  publicKeyRaw: Uint8Array,
  bytes: Uint8Array,
): Uint8Array {
  const d = createDigester(name, publicKeyRaw);
  d.update(bytes);
  return d.digest();
}
