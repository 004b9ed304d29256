/**
 * Digest mode: the client sends the digest of its message instead of the message, and gets the
 * signature its key type makes over the MESSAGE, so a standard verifier checks it against the
 * original file. This file is the table of which key type takes which digest names, how each is
 * signed (mechanism, parameters, the digest's length), and which of them the module offers.
 *
 * | key type | names | mechanism |
 * |---|---|---|
 * | ec-p256, ec-p384 | sha-256, sha-384, sha-512 | CKM_ECDSA over the digest (the module truncates it to the curve order, FIPS 186-5) |
 * | rsa-3072 | sha-256, sha-384, sha-512 | CKM_RSA_PKCS_PSS, hash and MGF1 of that digest, salt its length |
 * | ml-dsa-44/65/87 | ml-dsa-mu | CKM_ML_DSA_EXTERNAL_MU over μ (empty context), where the module offers it |
 * | ed25519, composite | none | — (both sign the message itself) |
 *
 * @example
 * ```ts
 * import { DIGESTS_BY_KEY_TYPE, parseDigestName } from "./digest_mode.ts";
 * parseDigestName("SHA-256"); // "sha-256"
 * DIGESTS_BY_KEY_TYPE["ml-dsa-65"]; // ["ml-dsa-mu"]
 * ```
 */
import {
  CKF_MECHANISM,
  CKG,
  CKH,
  CKK,
  CKM,
  encodePssParams,
  encodeSignAdditionalContext,
  type MechanismFlag,
} from "../../ffi/pkcs11/mod.ts";
import type { KeyTypeName, KeyTypeSpec, SigningMechanism } from "./key_types.ts";

/** Digest names (RFC 9530's registry spelling, lowercase), in the order /token lists them. */
export const DIGEST_NAMES = ["sha-256", "sha-384", "sha-512", "ml-dsa-mu"] as const;

/** One of {@link DIGEST_NAMES}. */
export type DigestName = typeof DIGEST_NAMES[number];

/** The byte length of each digest (μ of ML-DSA: 64 bytes, FIPS 204 Algorithm 7 line 6). */
export const DIGEST_LENGTH: Readonly<Record<DigestName, number>> = {
  "sha-256": 32,
  "sha-384": 48,
  "sha-512": 64,
  "ml-dsa-mu": 64,
};

const SHA2 = ["sha-256", "sha-384", "sha-512"] as const;

/** Which digest names each key type takes, whatever the module (the module may offer fewer). */
export const DIGESTS_BY_KEY_TYPE: Readonly<Record<KeyTypeName, readonly DigestName[]>> = {
  "ec-p256": SHA2,
  "ec-p384": SHA2,
  "rsa-3072": SHA2,
  "ml-dsa-44": ["ml-dsa-mu"],
  "ml-dsa-65": ["ml-dsa-mu"],
  "ml-dsa-87": ["ml-dsa-mu"],
  "ed25519": [],
  "composite-mldsa65-ed25519": [],
};

/** The name a header value spells (matched case-insensitively), or undefined for none known. */
export function parseDigestName(value: string): DigestName | undefined {
  const lower = value.toLowerCase();
  return DIGEST_NAMES.find((name) => name === lower);
}

/** CK_RSA_PKCS_PSS_PARAMS per SHA-2 digest: that hash, MGF1 of the same hash, salt = its length. */
const PSS: Readonly<Record<typeof SHA2[number], { hash: number; mgf: number }>> = {
  "sha-256": { hash: CKM.SHA256, mgf: CKG.MGF1_SHA256 },
  "sha-384": { hash: CKM.SHA384, mgf: CKG.MGF1_SHA384 },
  "sha-512": { hash: CKM.SHA512, mgf: CKG.MGF1_SHA512 },
};

/**
 * How a key of this type signs a digest of this name (the data given to C_Sign is the digest
 * itself), or undefined when the key type takes no such digest mode.
 *
 * @example
 * ```ts
 * import { digestSigning } from "./digest_mode.ts";
 * import { KEY_TYPES } from "./key_types.ts";
 * digestSigning(KEY_TYPES["rsa-3072"], "sha-384"); // CKM_RSA_PKCS_PSS, SHA-384 parameters
 * ```
 */
export function digestSigning(spec: KeyTypeSpec, name: DigestName): SigningMechanism | undefined {
  if (!DIGESTS_BY_KEY_TYPE[spec.name].includes(name)) return undefined;
  if (name === "ml-dsa-mu") {
    return {
      mechanism: CKM.ML_DSA_EXTERNAL_MU,
      // Hedged, as the message form signs; μ already holds the (empty) context.
      parameter: () => encodeSignAdditionalContext(CKH.HEDGE_PREFERRED),
    };
  }
  if (spec.keyType === CKK.RSA) {
    const { hash, mgf } = PSS[name];
    const saltLength = DIGEST_LENGTH[name];
    return {
      mechanism: CKM.RSA_PKCS_PSS,
      parameter: () => encodePssParams(hash, mgf, saltLength),
    };
  }
  return { mechanism: CKM.ECDSA };
}

/** What the module is asked: whether it offers a mechanism for a key of this size. */
export type OffersFor = (spec: KeyTypeSpec, mechanism: number, flag: MechanismFlag) => boolean;

/**
 * The digest names a key of this type takes with this module, in {@link DIGEST_NAMES} order: the
 * table's, less those whose mechanism the module does not offer for signing and verifying.
 *
 * @example
 * ```ts
 * import { offeredDigestNames, type OffersFor } from "./digest_mode.ts";
 * import { KEY_TYPES } from "./key_types.ts";
 * declare const catalogue: { offersFor: OffersFor };
 * offeredDigestNames(KEY_TYPES["ml-dsa-65"], (s, m, f) => catalogue.offersFor(s, m, f));
 * // [] with SoftHSM2 (no CKM_ML_DSA_EXTERNAL_MU), ["ml-dsa-mu"] with the test module
 * ```
 */
export function offeredDigestNames(spec: KeyTypeSpec, offersFor: OffersFor): DigestName[] {
  return DIGESTS_BY_KEY_TYPE[spec.name].filter((name) => {
    const { mechanism } = digestSigning(spec, name)!;
    return offersFor(spec, mechanism, CKF_MECHANISM.SIGN) &&
      offersFor(spec, mechanism, CKF_MECHANISM.VERIFY);
  });
}
