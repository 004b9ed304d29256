/**
 * The mechanism of every signature, in one place: which mechanisms the module offers
 * (C_GetMechanismInfo, asked once per mechanism), which one a key signs a message with (the first
 * of its key type's, in the key-type table's order of preference, that the module offers), digest
 * mode's table, and what C_Sign and C_Verify are given for one operation. The token names the
 * mechanism it signed with (Token.sign); nothing above lib/token works one out.
 *
 * Digest mode: the client sends the digest of its message instead of the message, and gets the
 * signature its key type makes over the MESSAGE, so a standard verifier checks it against the
 * original file. Which key type takes which digest names, and how each is signed:
 *
 * | key type | names | mechanism |
 * |---|---|---|
 * | ec-p256, ec-p384 | sha-256, sha-384, sha-512 | CKM_ECDSA over the digest (the module truncates it to the curve order, FIPS 186-5) |
 * | rsa-3072 | sha-256, sha-384, sha-512 | CKM_RSA_PKCS_PSS, hash and MGF1 of that digest, salt its length |
 * | rsa-3072-pkcs1v15 | sha-256, sha-384, sha-512 | CKM_RSA_PKCS over the DER DigestInfo of that digest (RFC 8017 section 9.2), made here |
 * | ml-dsa-44/65/87 | ml-dsa-mu | CKM_ML_DSA_EXTERNAL_MU over μ (empty context), where the module offers it |
 * | ed25519, composite | none | — (both sign the message itself) |
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import { DIGESTS_BY_KEY_TYPE, MechanismCatalogue, parseDigestName } from "./mechanisms.ts";
 * declare const mod: Pkcs11Module, slot: number;
 * new MechanismCatalogue(mod, slot).keyTypes(); // ["ec-p256", "ed25519", …]
 * parseDigestName("SHA-256"); // "sha-256"
 * DIGESTS_BY_KEY_TYPE["ml-dsa-65"]; // ["ml-dsa-mu"]
 * ```
 */
import { createHash } from "node:crypto";
import {
  CKF_MECHANISM,
  CKG,
  CKH,
  CKK,
  CKM,
  type CkMechanismInfo,
  ckmName,
  CKR,
  decodeMechanismInfo,
  encodePssParams,
  encodeSignAdditionalContext,
  type MechanismFlag,
  Pkcs11Error,
  type Pkcs11Module,
  SIZE,
} from "../../ffi/pkcs11/mod.ts";
import { nullValue, octetString, oid, sequence } from "../der/mod.ts";
import { MechanismUnavailableError } from "./errors.ts";
import {
  isKeyTypeName,
  KEY_TYPE_NAMES,
  KEY_TYPES,
  type KeyTypeName,
  type KeyTypeSpec,
  type SigningMechanism,
} from "./key_types.ts";
import type { MechanismChoice } from "./sessions.ts";

/**
 * The mechanisms of one slot, cached: a module's answer does not change while it is loaded.
 *
 * @example
 * ```ts
 * import { CKF_MECHANISM, CKM, type Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module, slot: number;
 * const offered = new MechanismCatalogue(mod, slot);
 * if (!offered.offers(CKM.ML_DSA, CKF_MECHANISM.SIGN)) console.log("no ML-DSA here");
 * ```
 */
export class MechanismCatalogue {
  readonly #mod: Pkcs11Module;
  readonly #slot: number;
  readonly #infos = new Map<number, CkMechanismInfo | null>();

  constructor(mod: Pkcs11Module, slot: number) {
    this.#mod = mod;
    this.#slot = slot;
  }

  /** C_GetMechanismInfo of `mechanism`, or null when the module does not know it. */
  info(mechanism: number): CkMechanismInfo | null {
    if (this.#infos.has(mechanism)) return this.#infos.get(mechanism)!;
    const buf = new Uint8Array(SIZE.CK_MECHANISM_INFO);
    const rv = this.#mod.fn.C_GetMechanismInfo(this.#slot, mechanism, buf);
    if (rv !== CKR.OK && rv !== CKR.MECHANISM_INVALID) {
      throw new Pkcs11Error("C_GetMechanismInfo", rv);
    }
    const info = rv === CKR.OK ? decodeMechanismInfo(buf) : null;
    this.#infos.set(mechanism, info);
    return info;
  }

  /** Whether the module offers `mechanism` for an operation (a CKF_ flag such as CKF_SIGN). */
  offers(mechanism: number, flag: MechanismFlag): boolean {
    const info = this.info(mechanism);
    return info !== null && (info.flags & flag) !== 0;
  }

  /** Offered, and for this key size where the module states a range (svcmod: EC 256..256 only). */
  offersFor(spec: KeyTypeSpec, mechanism: number, flag: MechanismFlag): boolean {
    if (!this.offers(mechanism, flag)) return false;
    const info = this.info(mechanism)!;
    if (spec.keySizeBits === undefined || info.maxKeySize === 0) return true;
    return info.minKeySize <= spec.keySizeBits && spec.keySizeBits <= info.maxKeySize;
  }

  /** Whether the module offers everything a key type needs: generation and signing. */
  offersKeyType(type: KeyTypeName): boolean {
    const spec = KEY_TYPES[type];
    return this.offersFor(spec, spec.keyGenMechanism, CKF_MECHANISM.GENERATE_KEY_PAIR) &&
      spec.signing.some((m) => this.offersFor(spec, m.mechanism, CKF_MECHANISM.SIGN));
  }

  /** Key types this module can generate and sign with. Example: `["ec-p256", "ed25519", …]`. */
  keyTypes(): KeyTypeName[] {
    return KEY_TYPE_NAMES.filter((t) => this.offersKeyType(t));
  }

  /**
   * The first of the key type's signing mechanisms the module offers (the table lists them in
   * order of preference); throws {@link MechanismUnavailableError} when it offers none.
   */
  signingFor(spec: KeyTypeSpec, label: string): SigningMechanism {
    const offered = spec.signing.find((m) => this.offersFor(spec, m.mechanism, CKF_MECHANISM.SIGN));
    if (!offered) {
      const names = spec.signing.map((m) => ckmName(m.mechanism)).join(" or ");
      throw new MechanismUnavailableError(
        `key '${label}' (${spec.name}) signs with ${names}, which the module does not offer ` +
          `(C_GetMechanismInfo: CKR_MECHANISM_INVALID); not attempted`,
      );
    }
    return offered;
  }
}

// Digest mode: the table at the top of this file.

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
  "rsa-3072-pkcs1v15": SHA2,
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

/** node:crypto's name of each SHA-2 digest. */
const NODE_HASH = { "sha-256": "sha256", "sha-384": "sha384", "sha-512": "sha512" } as const;

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
 * import { digestSigning } from "./mechanisms.ts";
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
  if (spec.scheme?.includes(CKM.RSA_PKCS)) {
    return { mechanism: CKM.RSA_PKCS, digestInfo: NODE_HASH[name] };
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
 * import { offeredDigestNames, type OffersFor } from "./mechanisms.ts";
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

/**
 * The mechanism, by name, a key of this type signs a digest of this name with, whether or not the
 * module offers it (a refusal names what is missing). RangeError when the type takes no such
 * digest. Example: `digestMechanism("rsa-3072", "sha-512")` → "CKM_RSA_PKCS_PSS".
 */
export function digestMechanism(keyType: string, digest: DigestName): string {
  const signing = isKeyTypeName(keyType) ? digestSigning(KEY_TYPES[keyType], digest) : undefined;
  if (!signing) throw new RangeError(`${keyType} keys take no ${digest} digest mode`);
  return ckmName(signing.mechanism);
}

/**
 * The digest names a key type takes whatever the module (the module may offer fewer); none for a
 * name that is no key type. Example: `digestsOfKeyType("ec-p384")` → ["sha-256", "sha-384", "sha-512"].
 */
export function digestsOfKeyType(keyType: string): readonly DigestName[] {
  return isKeyTypeName(keyType) ? DIGESTS_BY_KEY_TYPE[keyType] : [];
}

// What one C_Sign or C_Verify is given.

/** The mechanism and a fresh parameter (its buffers live for one call) of a signing choice. */
export function choiceOf(signing: SigningMechanism): MechanismChoice {
  return { mechanism: signing.mechanism, parameter: signing.parameter?.() };
}

/**
 * The signing choice and the data for C_Sign/C_Verify: the key's mechanism (`keySigning`) over the
 * message, or in digest mode the digest's mechanism over the digest as sent.
 */
export function signingAndData(
  spec: KeyTypeSpec,
  keySigning: SigningMechanism,
  message: Uint8Array,
  digest: DigestName | undefined,
): [SigningMechanism, Uint8Array] {
  if (digest === undefined) return [keySigning, prepareData(keySigning, message)];
  const signing = digestSigning(spec, digest);
  if (!signing) throw new RangeError(`${spec.name} keys take no ${digest} digest mode`);
  return [signing, wrapDigest(signing, message)];
}

/**
 * The message as the mechanism takes it: its digest where the daemon hashes (CKM_ECDSA), in a
 * DigestInfo where the mechanism pads one (CKM_RSA_PKCS).
 */
function prepareData(signing: SigningMechanism, message: Uint8Array): Uint8Array {
  if (!signing.prehash) return message;
  return wrapDigest(signing, createHash(signing.prehash).update(message).digest());
}

function wrapDigest(signing: SigningMechanism, digest: Uint8Array): Uint8Array {
  return signing.digestInfo ? digestInfo(signing.digestInfo, digest) : digest;
}

const HASH_OID = {
  sha256: "2.16.840.1.101.3.4.2.1",
  sha384: "2.16.840.1.101.3.4.2.2",
  sha512: "2.16.840.1.101.3.4.2.3",
} as const;

/**
 * DER DigestInfo (RFC 8017 section 9.2): the hash's AlgorithmIdentifier with NULL parameters, and
 * the digest. Example: `digestInfo("sha256", d)` → 30 31 30 0d 06 09 … 05 00 04 20 ‖ d.
 */
export function digestInfo(hash: keyof typeof HASH_OID, digest: Uint8Array): Uint8Array {
  return sequence(sequence(oid(HASH_OID[hash]), nullValue()), octetString(digest));
}
