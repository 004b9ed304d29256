/**
 * The one table that says, for each key type svcd supports, how the module names it (CKK_ and its
 * parameters), how a key pair is generated, which mechanism signs with it (in order of preference)
 * and how its public key is encoded. Everything else reads this table; no key type is special-cased
 * elsewhere.
 *
 * @example
 * ```ts
 * import { KEY_TYPES } from "./key_types.ts";
 * KEY_TYPES["ml-dsa-65"].signing[0].mechanism; // CKM_ML_DSA (0x1d)
 * ```
 */
import {
  type AttributeIn,
  CKA,
  CKG,
  CKH,
  CKK,
  CKM,
  CKP_ML_DSA,
  type Encoded,
  encodePssParams,
  encodeSignAdditionalContext,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { oid } from "../der/mod.ts";

/** Key types svcd signs with. Example: `"ec-p256"`. */
export type KeyTypeName =
  | "ec-p256"
  | "ec-p384"
  | "ed25519"
  | "rsa-3072"
  | "ml-dsa-44"
  | "ml-dsa-65"
  | "ml-dsa-87"
  | "composite-mldsa65-ed25519";

/** How the public key value is read from the public key object. */
export type PublicKeySource = "ec-point" | "rsa" | "value";

/** One way to sign with a key: a mechanism, its parameter, and a digest the daemon computes first. */
export interface SigningMechanism {
  mechanism: number;
  /** Digest made by the daemon before C_Sign (CKM_ECDSA signs a digest, not a message). */
  prehash?: "sha256" | "sha384";
  /** The mechanism parameter (built per call; the structures are small). */
  parameter?: () => Encoded;
}

/** Everything svcd knows about a key type. */
export interface KeyTypeSpec {
  name: KeyTypeName;
  keyType: number;
  /** CKA_EC_PARAMS (DER) for EC and Edwards keys. */
  ecParams?: Uint8Array;
  /** Other encodings of the same curve a module may store (SoftHSM accepts a printable string). */
  ecParamsAliases?: Uint8Array[];
  /** CKA_PARAMETER_SET for ML-DSA keys. */
  parameterSet?: number;
  /** Modulus size for RSA keys. */
  modulusBits?: number;
  /**
   * Key size in the unit of CK_MECHANISM_INFO (bits of the curve order or modulus), checked against
   * the module's ulMinKeySize..ulMaxKeySize where it states a range; undefined where conventions differ.
   */
  keySizeBits?: number;
  keyGenMechanism: number;
  /** Key-type attributes of the public key template at generation. */
  publicTemplate: () => AttributeIn[];
  /** Signing mechanisms in order of preference; the first the module offers is used. */
  signing: SigningMechanism[];
  /** Upper bound of the signature size (C_Sign is called with a buffer this large). */
  signatureLength: number;
  publicKeySource: PublicKeySource;
  /** Length of the raw public key (EC point, Edwards point, ML-DSA or composite value); RSA: none. */
  publicKeyLength?: number;
  /** SPKI AlgorithmIdentifier contents, where a standard SPKI exists. */
  spkiAlgorithm?: Uint8Array[];
}

const OID = {
  ecPublicKey: "1.2.840.10045.2.1",
  p256: "1.2.840.10045.3.1.7",
  p384: "1.3.132.0.34",
  ed25519: "1.3.101.112",
  rsaEncryption: "1.2.840.113549.1.1.1",
  mlDsa44: "2.16.840.1.101.3.4.3.17",
  mlDsa65: "2.16.840.1.101.3.4.3.18",
  mlDsa87: "2.16.840.1.101.3.4.3.19",
  mlDsa65Ed25519: "1.3.6.1.5.5.7.6.48",
} as const;

/** DER PrintableString "edwards25519": the other CKA_EC_PARAMS form PKCS#11 allows for Ed25519. */
const EDWARDS25519_NAME = Uint8Array.of(0x13, 12, ...new TextEncoder().encode("edwards25519"));

const mlDsaSigning: SigningMechanism[] = [{
  mechanism: CKM.ML_DSA,
  // Hedged signing with an empty context, stated explicitly rather than left to the module default.
  parameter: () => encodeSignAdditionalContext(CKH.HEDGE_PREFERRED),
}];

function mlDsa(
  name: KeyTypeName,
  parameterSet: number,
  sigLen: number,
  pkLen: number,
  spkiOid: string,
): KeyTypeSpec {
  return {
    name,
    keyType: CKK.ML_DSA,
    parameterSet,
    keyGenMechanism: CKM.ML_DSA_KEY_PAIR_GEN,
    publicTemplate: () => [{ type: CKA.PARAMETER_SET, value: ulongBytes(parameterSet) }],
    signing: mlDsaSigning,
    signatureLength: sigLen,
    publicKeySource: "value",
    publicKeyLength: pkLen,
    spkiAlgorithm: [oid(spkiOid)],
  };
}

function ec(
  name: KeyTypeName,
  curve: string,
  hash: "sha256" | "sha384",
  combined: number,
  sigLen: number,
): KeyTypeSpec {
  const params = oid(curve);
  const bits = sigLen * 4; // r ‖ s: two field elements
  return {
    name,
    keyType: CKK.EC,
    ecParams: params,
    keySizeBits: bits,
    keyGenMechanism: CKM.EC_KEY_PAIR_GEN,
    publicTemplate: () => [{ type: CKA.EC_PARAMS, value: params }],
    // The combined mechanism where the module has it (SoftHSM 2.6.1 does not), else CKM_ECDSA over
    // a digest made here.
    signing: [{ mechanism: combined }, { mechanism: CKM.ECDSA, prehash: hash }],
    signatureLength: sigLen,
    publicKeySource: "ec-point",
    publicKeyLength: 1 + sigLen, // uncompressed point: 04 ‖ X ‖ Y
    spkiAlgorithm: [oid(OID.ecPublicKey), params],
  };
}

/** The table. Example: `KEY_TYPES["rsa-3072"].signing[0].mechanism === CKM.SHA256_RSA_PKCS_PSS`. */
export const KEY_TYPES: Readonly<Record<KeyTypeName, KeyTypeSpec>> = {
  "ec-p256": ec("ec-p256", OID.p256, "sha256", CKM.ECDSA_SHA256, 64),
  "ec-p384": ec("ec-p384", OID.p384, "sha384", CKM.ECDSA_SHA384, 96),
  "ed25519": {
    name: "ed25519",
    keyType: CKK.EC_EDWARDS,
    ecParams: oid(OID.ed25519),
    ecParamsAliases: [EDWARDS25519_NAME],
    keyGenMechanism: CKM.EC_EDWARDS_KEY_PAIR_GEN,
    publicTemplate: () => [{ type: CKA.EC_PARAMS, value: oid(OID.ed25519) }],
    signing: [{ mechanism: CKM.EDDSA }],
    signatureLength: 64,
    publicKeySource: "ec-point",
    publicKeyLength: 32,
    spkiAlgorithm: [oid(OID.ed25519)],
  },
  "rsa-3072": {
    name: "rsa-3072",
    keyType: CKK.RSA,
    modulusBits: 3072,
    keySizeBits: 3072,
    keyGenMechanism: CKM.RSA_PKCS_KEY_PAIR_GEN,
    publicTemplate: () => [
      { type: CKA.MODULUS_BITS, value: ulongBytes(3072) },
      { type: CKA.PUBLIC_EXPONENT, value: Uint8Array.of(1, 0, 1) },
    ],
    signing: [{
      mechanism: CKM.SHA256_RSA_PKCS_PSS,
      parameter: () => encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32),
    }],
    signatureLength: 384,
    publicKeySource: "rsa",
    spkiAlgorithm: [oid(OID.rsaEncryption), Uint8Array.of(0x05, 0x00)],
  },
  "ml-dsa-44": mlDsa("ml-dsa-44", CKP_ML_DSA.ML_DSA_44, 2420, 1312, OID.mlDsa44),
  "ml-dsa-65": mlDsa("ml-dsa-65", CKP_ML_DSA.ML_DSA_65, 3309, 1952, OID.mlDsa65),
  "ml-dsa-87": mlDsa("ml-dsa-87", CKP_ML_DSA.ML_DSA_87, 4627, 2592, OID.mlDsa87),
  "composite-mldsa65-ed25519": {
    name: "composite-mldsa65-ed25519",
    keyType: CKK.COMPOSITE_MLDSA65_ED25519,
    // The vendor mechanism number names the key type, its generation and its signing.
    keyGenMechanism: CKM.COMPOSITE_MLDSA65_ED25519,
    publicTemplate: () => [],
    signing: [{ mechanism: CKM.COMPOSITE_MLDSA65_ED25519 }],
    signatureLength: 3309 + 64,
    publicKeySource: "value",
    publicKeyLength: 1952 + 32,
    spkiAlgorithm: [oid(OID.mlDsa65Ed25519)],
  },
};

/** All key type names, in table order. Example: `KEY_TYPE_NAMES.includes("ed25519")`. */
export const KEY_TYPE_NAMES = Object.keys(KEY_TYPES) as KeyTypeName[];

/** Type guard for user input. Example: `isKeyTypeName("rsa-3072") === true`. */
export function isKeyTypeName(value: string): value is KeyTypeName {
  return Object.hasOwn(KEY_TYPES, value);
}

/** Composite label of id-MLDSA65-Ed25519-SHA512 (draft-ietf-lamps-pq-composite-sigs-19). */
export const COMPOSITE_MLDSA65_ED25519_LABEL = "COMPSIG-MLDSA65-Ed25519-SHA512";
