/**
 * The signature side of every key type svcd signs with, as X.509 and OCSP need it: the
 * AlgorithmIdentifier that names the signature, and how the token's raw signature becomes the
 * BIT STRING content (ECDSA: r‖s → Ecdsa-Sig-Value; the others are carried as they are). The CA
 * tool signs certificates with the same table, so a response and a certificate cannot name one key
 * type two ways.
 *
 * The token signs the whole to-be-signed bytes with the mechanism lib/token/key_types.ts chooses:
 * EC keys over a SHA-256/384 digest the daemon makes (so ecdsa-with-SHA256/384), RSA with
 * CKM_SHA256_RSA_PKCS_PSS (SHA-256, MGF1-SHA-256, salt 32) or, for rsa-3072-pkcs1v15 keys, PKCS #1
 * v1.5 with SHA-256 (sha256WithRSAEncryption), Ed25519 pure EdDSA, ML-DSA pure with an
 * empty context, and the composite as draft-ietf-lamps-pq-composite-sigs-19 defines.
 *
 * @example
 * ```ts
 * declare const signer: Signer, tbs: Uint8Array;
 * SIGNATURE_ALGORITHMS["ed25519"].algorithmIdentifier; // 30 05 06 03 2b 65 70
 * const [algId, sigBits] = await signatureFields(signer, tbs); // SEQUENCE { tbs, algId, sigBits }
 * ```
 */
import { KEY_TYPES, type KeyTypeName } from "../token/mod.ts";
import {
  bitString,
  DerReader,
  nullValue,
  oid,
  sequence,
  TAG,
  tlv,
  unsignedInteger,
} from "../der/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";

export type { KeyTypeName };

/** What signs: a key type and a function from the to-be-signed bytes to the token's raw signature. */
export interface Signer {
  keyType: KeyTypeName;
  /** The raw signature over `tbs` (ECDSA: r‖s, fixed length; others: the algorithm's bytes). */
  sign(tbs: Uint8Array): Promise<Uint8Array> | Uint8Array;
}

/** One key type's signature algorithm. */
export interface SignatureAlgorithm {
  keyType: KeyTypeName;
  /** Dotted OID of the signature algorithm. */
  oid: string;
  /** DER AlgorithmIdentifier (the whole SEQUENCE) for signatureAlgorithm / signature fields. */
  algorithmIdentifier: Uint8Array;
  /** Length of the raw signature the token returns. */
  rawSignatureLength: number;
  /** Raw token signature → BIT STRING content. Throws on a raw signature of the wrong length. */
  encodeSignature(raw: Uint8Array): Uint8Array;
  /** BIT STRING content → raw signature (what a verifier of r‖s or the plain bytes takes). */
  decodeSignature(encoded: Uint8Array): Uint8Array;
}

/** OIDs named in this table. Example: `SIGNATURE_OIDS.rsassaPss === "1.2.840.113549.1.1.10"`. */
export const SIGNATURE_OIDS = {
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  ecdsaWithSha384: "1.2.840.10045.4.3.3",
  ed25519: "1.3.101.112",
  rsassaPss: "1.2.840.113549.1.1.10",
  sha256WithRsaEncryption: "1.2.840.113549.1.1.11",
  sha256: "2.16.840.1.101.3.4.2.1",
  mgf1: "1.2.840.113549.1.1.8",
  mlDsa44: "2.16.840.1.101.3.4.3.17",
  mlDsa65: "2.16.840.1.101.3.4.3.18",
  mlDsa87: "2.16.840.1.101.3.4.3.19",
  mlDsa65Ed25519: "1.3.6.1.5.5.7.6.48",
} as const;

// RSASSA-PSS-params as CKM_SHA256_RSA_PKCS_PSS with CKG_MGF1_SHA256 and salt 32 sign (RFC 4055;
// trailerField left at its default). The hash AlgorithmIdentifiers carry NULL, as OpenSSL writes.
const SHA256_ALG = sequence(oid(SIGNATURE_OIDS.sha256), nullValue());
const PSS_PARAMS = sequence(
  tlv(0xa0, SHA256_ALG),
  tlv(0xa1, sequence(oid(SIGNATURE_OIDS.mgf1), SHA256_ALG)),
  tlv(0xa2, Uint8Array.of(TAG.INTEGER, 1, 32)),
);

function asIs(keyType: KeyTypeName, oidText: string, params?: Uint8Array): SignatureAlgorithm {
  const length = KEY_TYPES[keyType].signatureLength;
  const check = (sig: Uint8Array): Uint8Array => {
    if (sig.length !== length) {
      throw new Error(`${keyType} signature of ${sig.length} bytes, expected ${length}`);
    }
    return sig;
  };
  return {
    keyType,
    oid: oidText,
    algorithmIdentifier: params ? sequence(oid(oidText), params) : sequence(oid(oidText)),
    rawSignatureLength: length,
    encodeSignature: check,
    decodeSignature: check,
  };
}

function ecdsa(keyType: KeyTypeName, oidText: string): SignatureAlgorithm {
  const length = KEY_TYPES[keyType].signatureLength;
  const half = length / 2;
  return {
    keyType,
    oid: oidText,
    algorithmIdentifier: sequence(oid(oidText)), // parameters absent (RFC 5758 §3.2)
    rawSignatureLength: length,
    encodeSignature(raw) {
      if (raw.length !== length) {
        throw new Error(`${keyType} signature of ${raw.length} bytes, expected r‖s of ${length}`);
      }
      return sequence(unsignedInteger(raw.subarray(0, half)), unsignedInteger(raw.subarray(half)));
    },
    decodeSignature(encoded) {
      const outer = new DerReader(encoded);
      const r = outer.enter(TAG.SEQUENCE);
      outer.finish();
      const out = new Uint8Array(length);
      for (const at of [0, half]) {
        const v = r.readIntegerBytes(half + 1);
        if (v[0] & 0x80) throw new Error("negative ECDSA signature component");
        const mag = v[0] === 0 && v.length > 1 ? v.subarray(1) : v;
        if (mag.length > half) throw new Error("ECDSA signature component too long");
        out.set(mag, at + half - mag.length);
      }
      r.finish();
      return out;
    },
  };
}

/**
 * The table, by key type.
 *
 * @example
 * ```ts
 * SIGNATURE_ALGORITHMS["ml-dsa-65"].oid; // "2.16.840.1.101.3.4.3.18", parameters absent
 * ```
 */
export const SIGNATURE_ALGORITHMS: Readonly<Record<KeyTypeName, SignatureAlgorithm>> = {
  "ec-p256": ecdsa("ec-p256", SIGNATURE_OIDS.ecdsaWithSha256),
  "ec-p384": ecdsa("ec-p384", SIGNATURE_OIDS.ecdsaWithSha384),
  "ed25519": asIs("ed25519", SIGNATURE_OIDS.ed25519),
  "rsa-3072": asIs("rsa-3072", SIGNATURE_OIDS.rsassaPss, PSS_PARAMS),
  // Parameters NULL (RFC 4055 section 5).
  "rsa-3072-pkcs1v15": asIs(
    "rsa-3072-pkcs1v15",
    SIGNATURE_OIDS.sha256WithRsaEncryption,
    nullValue(),
  ),
  "ml-dsa-44": asIs("ml-dsa-44", SIGNATURE_OIDS.mlDsa44),
  "ml-dsa-65": asIs("ml-dsa-65", SIGNATURE_OIDS.mlDsa65),
  "ml-dsa-87": asIs("ml-dsa-87", SIGNATURE_OIDS.mlDsa87),
  "composite-mldsa65-ed25519": asIs("composite-mldsa65-ed25519", SIGNATURE_OIDS.mlDsa65Ed25519),
};

/**
 * The key type whose AlgorithmIdentifier is exactly `algorithmIdentifier` (DER), if any.
 *
 * @example
 * ```ts
 * keyTypeOfSignatureAlgorithm(Uint8Array.of(0x30, 5, 6, 3, 0x2b, 0x65, 0x70)); // "ed25519"
 * ```
 */
export function keyTypeOfSignatureAlgorithm(algorithmIdentifier: Uint8Array): KeyTypeName | null {
  for (const alg of Object.values(SIGNATURE_ALGORITHMS)) {
    if (bytesEqual(alg.algorithmIdentifier, algorithmIdentifier)) return alg.keyType;
  }
  return null;
}

/**
 * The SubjectPublicKeyInfo AlgorithmIdentifier (DER) a key of this type has.
 *
 * @example
 * ```ts
 * spkiAlgorithmIdentifier("ed25519"); // 30 05 06 03 2b 65 70
 * ```
 */
export function spkiAlgorithmIdentifier(keyType: KeyTypeName): Uint8Array {
  return sequence(...KEY_TYPES[keyType].spkiAlgorithm!);
}

/**
 * Signs `tbs` and returns the two fields that follow it in a signed X.509/OCSP structure: the
 * AlgorithmIdentifier and the signature BIT STRING.
 *
 * @example
 * ```ts
 * declare const signer: Signer, tbs: Uint8Array;
 * const [algId, sigBits] = await signatureFields(signer, tbs); // a certificate is SEQUENCE { tbs, algId, sigBits }
 * ```
 */
export async function signatureFields(
  signer: Signer,
  tbs: Uint8Array,
): Promise<[Uint8Array, Uint8Array]> {
  const alg = SIGNATURE_ALGORITHMS[signer.keyType];
  const raw = await signer.sign(tbs);
  return [alg.algorithmIdentifier, bitString(alg.encodeSignature(raw))];
}
