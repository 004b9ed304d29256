/**
 * What each key type is called in the containers `svcd client` writes, given how svcd signs with it
 * (its mechanism on GET /token): the CMS digest algorithm and signature AlgorithmIdentifier
 * (RFC 5754 ECDSA and sha256WithRSAEncryption, RFC 4056 RSASSA-PSS, RFC 8419 Ed25519, RFC 9882
 * ML-DSA, and draft-ietf-lamps-cms-composite-sigs for the composite), and the JWS `alg` (RFC 7518,
 * RFC 8037, RFC 9964). A key whose mechanism signs something else than the name says is refused, never
 * labelled wrongly: a PS256 header over a signature of other PSS parameters would not verify.
 *
 * @example
 * ```ts
 * import { containerAlgorithm } from "./algorithms.ts";
 * const alg = containerAlgorithm({ label: "web", keyType: "ec-p256", mechanism: "CKM_ECDSA" }, "jws");
 * alg.jws; // "ES256"
 * ```
 */
import { ClientError } from "../errors.ts";
import { NODE_HASH } from "../digests.ts";
import { SIGNATURE_ALGORITHMS, type SignatureAlgorithm } from "../../ocsp/mod.ts";
import { isKeyTypeName, type KeyTypeName } from "../../token/mod.ts";
import { oid, sequence } from "../../der/mod.ts";

/** The SHA-2 digests a CMS SignerInfo names. */
export type CmsDigest = keyof typeof NODE_HASH;

/** One key type's names in CMS and JOSE. */
export interface ContainerAlgorithm {
  keyType: KeyTypeName;
  /** The digest of the file (messageDigest) and of SignerInfo.digestAlgorithm. */
  cmsDigest: CmsDigest;
  /** SignerInfo.signatureAlgorithm and how the raw signature becomes its OCTET STRING. */
  signature: SignatureAlgorithm;
  /** The JWS `alg`, where JOSE has a name for the key type. */
  jws?: string;
}

/** The dotted OIDs of the digests (NIST, RFC 5754). */
export const DIGEST_OIDS: Readonly<Record<CmsDigest, string>> = {
  "sha-256": "2.16.840.1.101.3.4.2.1",
  "sha-384": "2.16.840.1.101.3.4.2.2",
  "sha-512": "2.16.840.1.101.3.4.2.3",
};

/**
 * The digest AlgorithmIdentifier: parameters absent (RFC 5754 §2: implementations MUST accept
 * both absent and NULL, and SHOULD write absent).
 */
export function digestAlgorithmIdentifier(digest: CmsDigest): Uint8Array {
  return sequence(oid(DIGEST_OIDS[digest]));
}

interface Row {
  digest: CmsDigest;
  jws?: string;
  /** svcd's mechanisms (GET /token `mechanism`) that sign what the names above say. */
  mechanisms: string[];
}

const ML_DSA_ROW = (jws: string): Row => ({ digest: "sha-512", jws, mechanisms: ["CKM_ML_DSA"] });

// ECDSA: the combined mechanism, or CKM_ECDSA over the digest svcd makes of the message (the curve's
// hash). RSA-PSS: svcd signs only with SHA-256, MGF1-SHA-256, salt 32. RSA PKCS #1 v1.5: SHA-256,
// combined, or CKM_RSA_PKCS over the DigestInfo svcd makes (RS256). Ed25519, ML-DSA and the
// composite: SHA-512 for the file (RFC 8419 §3, RFC 9882 §3, the composite CMS draft's table).
const TABLE: Readonly<Record<KeyTypeName, Row>> = {
  "ec-p256": { digest: "sha-256", jws: "ES256", mechanisms: ["CKM_ECDSA_SHA256", "CKM_ECDSA"] },
  "ec-p384": { digest: "sha-384", jws: "ES384", mechanisms: ["CKM_ECDSA_SHA384", "CKM_ECDSA"] },
  "rsa-3072": { digest: "sha-256", jws: "PS256", mechanisms: ["CKM_SHA256_RSA_PKCS_PSS"] },
  "rsa-3072-pkcs1v15": {
    digest: "sha-256",
    jws: "RS256",
    mechanisms: ["CKM_SHA256_RSA_PKCS", "CKM_RSA_PKCS"],
  },
  "ed25519": { digest: "sha-512", jws: "EdDSA", mechanisms: ["CKM_EDDSA"] },
  "ml-dsa-44": ML_DSA_ROW("ML-DSA-44"),
  "ml-dsa-65": ML_DSA_ROW("ML-DSA-65"),
  "ml-dsa-87": ML_DSA_ROW("ML-DSA-87"),
  "composite-mldsa65-ed25519": {
    digest: "sha-512",
    mechanisms: ["CKM_COMPOSITE_MLDSA65_ED25519"],
  },
};

/** The names of `key` in `container`; a ClientError when there is none or the mechanism differs. */
export function containerAlgorithm(
  key: { label: string; keyType: string; mechanism?: string },
  container: "cms" | "jws",
): ContainerAlgorithm {
  if (!isKeyTypeName(key.keyType)) {
    throw new ClientError(
      `key '${key.label}' is of type ${key.keyType}, which --format ${container} does not know`,
    );
  }
  const row = TABLE[key.keyType];
  if (key.mechanism === undefined || !row.mechanisms.includes(key.mechanism)) {
    throw new ClientError(
      `key '${key.label}' (${key.keyType}) signs with ${key.mechanism ?? "no stated mechanism"}` +
        `, not ${row.mechanisms.join(" or ")}: its signature would not be what the ${
          container === "cms" ? "SignedData's signatureAlgorithm" : "JWS alg"
        } names; nothing was signed (tell the operator)`,
    );
  }
  if (container === "jws" && row.jws === undefined) {
    throw new ClientError(
      `key '${key.label}' (${key.keyType}) has no JWS alg: JOSE names no composite signature ` +
        "yet; use --format cms or raw",
      { usage: true },
    );
  }
  return {
    keyType: key.keyType,
    cmsDigest: row.digest,
    signature: SIGNATURE_ALGORITHMS[key.keyType],
    jws: row.jws,
  };
}
