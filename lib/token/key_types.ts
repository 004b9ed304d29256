/**
 * The one table that says, for each key type svcd supports, how the module names it (CKK_ and its
 * parameters), how a key pair is generated, which mechanism signs with it (in order of preference)
 * and how its public key is encoded. Everything else reads this table; no key type is special-cased
 * elsewhere. Below the table, a key object read against it: which key type it is (CKA_KEY_TYPE
 * and its parameters), its public value decoded to the raw form and the standard
 * SubjectPublicKeyInfo, and the fingerprint `svcd token list` prints.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import type { Handle } from "./sessions.ts";
 * import { identifyKeyType, KEY_TYPES, readPublicKey } from "./key_types.ts";
 * declare const mod: Pkcs11Module, session: Handle, handle: Handle;
 * KEY_TYPES["ml-dsa-65"].signing[0].mechanism; // CKM_ML_DSA (0x1d)
 * const spec = identifyKeyType(mod, session, handle, "web");
 * const { publicKeyRaw, publicKeySpki } = readPublicKey(mod, session, handle, spec, "web");
 * ```
 */
import { createHash } from "node:crypto";
import {
  type AttributeIn,
  CKA,
  CKG,
  CKH,
  CKK,
  CKM,
  ckmName,
  CKP_ML_DSA,
  type Encoded,
  encodePssParams,
  encodeSignAdditionalContext,
  type Pkcs11Module,
  readUlong,
  readUlongs,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { oid, sequence, spki, unsignedInteger, unwrapOctetString } from "../der/mod.ts";
import { KeyUnusableError } from "./errors.ts";
import { getAttributes, type Handle } from "./sessions.ts";

/** Key types svcd signs with. Example: `"ec-p256"`. */
export type KeyTypeName =
  | "ec-p256"
  | "ec-p384"
  | "ed25519"
  | "rsa-3072"
  | "rsa-3072-pkcs1v15"
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
  /**
   * C_Sign is given the DER DigestInfo of this hash around the digest (PKCS #1 v1.5 signs the
   * DigestInfo, RFC 8017 section 9.2; CKM_RSA_PKCS pads whatever it is given).
   */
  digestInfo?: "sha256" | "sha384" | "sha512";
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
  /**
   * The mechanisms of the key type's one signature scheme, where keys of one CKK and size may be
   * of more than one type (RSA: PSS or PKCS #1 v1.5). Generation writes them as
   * CKA_ALLOWED_MECHANISMS of both halves, so the token records the scheme and enforces it; a key
   * whose CKA_ALLOWED_MECHANISMS names none of them is not of this type.
   */
  scheme?: readonly number[];
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

function rsa3072(
  name: KeyTypeName,
  signing: SigningMechanism[],
  scheme: readonly number[],
): KeyTypeSpec {
  return {
    name,
    keyType: CKK.RSA,
    modulusBits: 3072,
    keySizeBits: 3072,
    keyGenMechanism: CKM.RSA_PKCS_KEY_PAIR_GEN,
    publicTemplate: () => [
      { type: CKA.MODULUS_BITS, value: ulongBytes(3072) },
      { type: CKA.PUBLIC_EXPONENT, value: Uint8Array.of(1, 0, 1) },
    ],
    signing,
    scheme,
    signatureLength: 384,
    publicKeySource: "rsa",
    spkiAlgorithm: [oid(OID.rsaEncryption), Uint8Array.of(0x05, 0x00)],
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
  // A key without CKA_ALLOWED_MECHANISMS (made before keys stated their scheme) is PSS: this
  // entry comes first and matches it.
  "rsa-3072": rsa3072("rsa-3072", [{
    mechanism: CKM.SHA256_RSA_PKCS_PSS,
    parameter: () => encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32),
  }], [CKM.SHA256_RSA_PKCS_PSS, CKM.RSA_PKCS_PSS]),
  // PKCS #1 v1.5 where a verifier makes nothing else (Authenticode through OpenSSL's PKCS #7).
  // CKM_RSA_PKCS over a DigestInfo made here where the module lacks the combined mechanism.
  "rsa-3072-pkcs1v15": rsa3072("rsa-3072-pkcs1v15", [
    { mechanism: CKM.SHA256_RSA_PKCS },
    { mechanism: CKM.RSA_PKCS, prehash: "sha256", digestInfo: "sha256" },
  ], [CKM.SHA256_RSA_PKCS, CKM.RSA_PKCS]),
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

/** A public key in the two forms the daemon hands out. */
export interface PublicKey {
  /** EC: uncompressed point; Ed25519: 32 bytes; RSA: DER RSAPublicKey; ML-DSA/composite: raw value. */
  publicKeyRaw: Uint8Array;
  /** DER SubjectPublicKeyInfo, where a standard one exists. */
  publicKeySpki?: Uint8Array;
}

/**
 * The key type of a public key object, from its attributes; throws {@link KeyUnusableError} for a
 * type svcd does not sign with.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import type { Handle } from "./sessions.ts";
 * declare const mod: Pkcs11Module, session: Handle, pub: Handle;
 * identifyKeyType(mod, session, pub, "web").name; // "ec-p256"
 * ```
 */
export function identifyKeyType(
  mod: Pkcs11Module,
  session: Handle,
  pub: Handle,
  label: string,
  schemeFrom: Handle = pub,
): KeyTypeSpec {
  const attrs = getAttributes(mod, session, pub, [
    CKA.KEY_TYPE,
    CKA.EC_PARAMS,
    CKA.PARAMETER_SET,
    CKA.MODULUS,
  ]);
  const allowed = allowedMechanisms(mod, session, schemeFrom);
  const keyTypeBytes = attrs.get(CKA.KEY_TYPE);
  if (!keyTypeBytes) {
    throw new KeyUnusableError(
      label,
      "unsupported-type",
      `key '${label}' has no readable CKA_KEY_TYPE`,
    );
  }
  const keyType = readUlong(keyTypeBytes);
  const ecParams = attrs.get(CKA.EC_PARAMS);
  const parameterSet = attrs.get(CKA.PARAMETER_SET);
  const modulus = attrs.get(CKA.MODULUS);
  for (const spec of Object.values(KEY_TYPES)) {
    if (spec.keyType !== keyType) continue;
    if (spec.ecParams) {
      const forms = [spec.ecParams, ...(spec.ecParamsAliases ?? [])];
      if (!ecParams || !forms.some((f) => bytesEqual(f, ecParams))) continue;
    }
    if (
      spec.parameterSet !== undefined &&
      (!parameterSet || readUlong(parameterSet) !== spec.parameterSet)
    ) continue;
    if (spec.modulusBits !== undefined && (!modulus || bitLength(modulus) !== spec.modulusBits)) {
      continue;
    }
    if (!allowsScheme(allowed, spec)) continue;
    return spec;
  }
  const detail = ecParams
    ? ` with CKA_EC_PARAMS ${ecParams.toHex()}`
    : modulus
    ? ` of ${bitLength(modulus)} bits${allowedDetail(allowed)}`
    : "";
  throw new KeyUnusableError(
    label,
    "unsupported-type",
    `key '${label}' has key type 0x${
      keyType.toString(16)
    }${detail}, which svcd does not sign with ` +
      `(supported: ${KEY_TYPE_NAMES.join(", ")})`,
  );
}

/**
 * The key's CKA_ALLOWED_MECHANISMS; empty when the module has none for it (absent, or an empty
 * list: either way every mechanism is allowed).
 */
function allowedMechanisms(mod: Pkcs11Module, session: Handle, key: Handle): number[] {
  const bytes = getAttributes(mod, session, key, [CKA.ALLOWED_MECHANISMS]).get(
    CKA.ALLOWED_MECHANISMS,
  );
  return bytes ? readUlongs(bytes) : [];
}

/** A key allows a type's scheme unless it names allowed mechanisms and none of the scheme's. */
function allowsScheme(allowed: number[], spec: KeyTypeSpec): boolean {
  if (!spec.scheme || allowed.length === 0) return true;
  return spec.scheme.some((m) => allowed.includes(m));
}

function allowedDetail(allowed: number[]): string {
  return allowed.length === 0 ? "" : ` allowing only ${allowed.map(ckmName).join(", ")}`;
}

/**
 * CKA_ALLOWED_MECHANISMS of a key of this type, stating its scheme; none for a type without one.
 * Example: `schemeTemplate(KEY_TYPES["rsa-3072-pkcs1v15"])` → CKM_SHA256_RSA_PKCS, CKM_RSA_PKCS.
 */
export function schemeTemplate(spec: KeyTypeSpec): AttributeIn[] {
  if (!spec.scheme) return [];
  const value = new Uint8Array(8 * spec.scheme.length);
  spec.scheme.forEach((m, i) => value.set(ulongBytes(m), 8 * i));
  return [{ type: CKA.ALLOWED_MECHANISMS, value }];
}

function bitLength(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i++;
  if (i === bytes.length) return 0;
  return (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i]));
}

/**
 * The public value of a key object of type `spec`, raw and as SPKI; throws
 * {@link KeyUnusableError} when it is missing or the wrong size.
 */
export function readPublicKey(
  mod: Pkcs11Module,
  session: Handle,
  pub: Handle,
  spec: KeyTypeSpec,
  label: string,
): PublicKey {
  let raw: Uint8Array;
  if (spec.publicKeySource === "rsa") {
    const a = getAttributes(mod, session, pub, [CKA.MODULUS, CKA.PUBLIC_EXPONENT]);
    const n = a.get(CKA.MODULUS);
    const e = a.get(CKA.PUBLIC_EXPONENT);
    if (!n || !e) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `RSA key '${label}' has no readable modulus or exponent`,
      );
    }
    raw = sequence(unsignedInteger(n), unsignedInteger(e));
  } else {
    const attr = spec.publicKeySource === "ec-point" ? CKA.EC_POINT : CKA.VALUE;
    const value = getAttributes(mod, session, pub, [attr]).get(attr);
    if (!value) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `key '${label}' has no readable public key value`,
      );
    }
    raw = spec.publicKeySource === "ec-point" ? ecPointRaw(value, spec, label) : value.slice();
    if (raw.length !== spec.publicKeyLength) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `key '${label}' (${spec.name}): public key is ${raw.length} bytes, expected ${spec.publicKeyLength}`,
      );
    }
  }
  return {
    publicKeyRaw: raw,
    publicKeySpki: spec.spkiAlgorithm ? spki(spec.spkiAlgorithm, raw) : undefined,
  };
}

// CKA_EC_POINT is a DER OCTET STRING per the standard; some modules store the bare point.
function ecPointRaw(value: Uint8Array, spec: KeyTypeSpec, label: string): Uint8Array {
  const unwrapped = unwrapOctetString(value);
  if (unwrapped && unwrapped.length === spec.publicKeyLength) return unwrapped.slice();
  if (value.length === spec.publicKeyLength) return value.slice();
  throw new KeyUnusableError(
    label,
    "unreadable-public-key",
    `key '${label}': CKA_EC_POINT of ${value.length} bytes is not a ${spec.name} point`,
  );
}

/**
 * SHA-256 of the SPKI (or of the raw key where no SPKI exists), hex.
 *
 * @example
 * ```ts
 * import type { SigningKey } from "./token.ts";
 * declare const key: SigningKey;
 * console.log(`${key.label} ${fingerprint(key)}`);
 * ```
 */
export function fingerprint(key: PublicKey): string {
  return createHash("sha256").update(key.publicKeySpki ?? key.publicKeyRaw).digest("hex");
}
