/**
 * Independent signature checks for tests: Web Crypto for classical keys, @noble/post-quantum for
 * ML-DSA, and both over the draft's M' for the composite — never the module under test.
 *
 * @example
 * ```ts
 * assert.ok(await verifyIndependently("ec-p256", key.publicKeyRaw, message, signature));
 * ```
 */
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";

const ML_DSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

/** Which key types this oracle can check. */
export const ORACLE_TYPES = [
  "ec-p256",
  "ec-p384",
  "ed25519",
  "rsa-3072",
  "ml-dsa-44",
  "ml-dsa-65",
  "ml-dsa-87",
  "composite-mldsa65-ed25519",
] as const;

/** Prefix of the composite message representative (draft-ietf-lamps-pq-composite-sigs-19). */
const COMPOSITE_PREFIX = new TextEncoder().encode("CompositeAlgorithmSignatures2025");
/** Label of id-MLDSA65-Ed25519-SHA512 in draft 19. */
export const COMPOSITE_LABEL = new TextEncoder().encode("COMPSIG-MLDSA65-Ed25519-SHA512");
const ML_DSA_65_PK = 1952, ML_DSA_65_SIG = 3309;

/**
 * M' = Prefix ‖ Label ‖ len(ctx) ‖ ctx ‖ SHA-512(M).
 *
 * @example
 * ```ts
 * const mp = await compositeMessage(message);
 * ```
 */
export async function compositeMessage(
  message: Uint8Array,
  ctx: Uint8Array = new Uint8Array(),
): Promise<Uint8Array> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-512", message as BufferSource));
  return concat(COMPOSITE_PREFIX, COMPOSITE_LABEL, new Uint8Array([ctx.length]), ctx, digest);
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/**
 * Verifies `signature` over `message` for a key given as its SPKI (classical) or raw public key
 * (ML-DSA, composite) — whichever the key type needs.
 *
 * @example
 * ```ts
 * await verifyIndependently("ed25519", spki, message, signature);
 * ```
 */
export async function verifyIndependently(
  keyType: string,
  publicKey: { raw: Uint8Array; spki?: Uint8Array },
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (keyType in ML_DSA) {
    return ML_DSA[keyType as keyof typeof ML_DSA].verify(signature, message, publicKey.raw);
  }
  if (keyType === "composite-mldsa65-ed25519") {
    return await verifyComposite(publicKey.raw, message, signature);
  }
  if (!publicKey.spki) throw new Error(`${keyType}: the oracle needs the SPKI`);
  const [importAlg, verifyAlg] = classicalAlgorithms(keyType);
  const key = await crypto.subtle.importKey(
    "spki",
    publicKey.spki as BufferSource,
    importAlg,
    false,
    [
      "verify",
    ],
  );
  return await crypto.subtle.verify(
    verifyAlg,
    key,
    signature as BufferSource,
    message as BufferSource,
  );
}

function classicalAlgorithms(
  keyType: string,
): [
  AlgorithmIdentifier | EcKeyImportParams | RsaHashedImportParams,
  AlgorithmIdentifier | EcdsaParams | RsaPssParams,
] {
  switch (keyType) {
    case "ec-p256":
      return [
        { name: "ECDSA", namedCurve: "P-256" } as EcKeyImportParams,
        { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
      ];
    case "ec-p384":
      return [
        { name: "ECDSA", namedCurve: "P-384" } as EcKeyImportParams,
        { name: "ECDSA", hash: "SHA-384" } as EcdsaParams,
      ];
    case "ed25519":
      return [{ name: "Ed25519" }, { name: "Ed25519" }];
    case "rsa-3072":
      return [
        { name: "RSA-PSS", hash: "SHA-256" } as RsaHashedImportParams,
        { name: "RSA-PSS", saltLength: 32 } as RsaPssParams,
      ];
  }
  throw new Error(`no independent oracle for key type ${keyType}`);
}

async function verifyComposite(
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (publicKey.length !== ML_DSA_65_PK + 32 || signature.length !== ML_DSA_65_SIG + 64) {
    return false;
  }
  const mPrime = await compositeMessage(message);
  const mldsaOk = ml_dsa65.verify(
    signature.subarray(0, ML_DSA_65_SIG),
    mPrime,
    publicKey.subarray(0, ML_DSA_65_PK),
    { context: COMPOSITE_LABEL },
  );
  const ed = await crypto.subtle.importKey(
    "raw",
    publicKey.subarray(ML_DSA_65_PK) as BufferSource,
    { name: "Ed25519" },
    false,
    ["verify"],
  );
  const edOk = await crypto.subtle.verify(
    { name: "Ed25519" },
    ed,
    signature.subarray(ML_DSA_65_SIG) as BufferSource,
    mPrime as BufferSource,
  );
  return mldsaOk && edOk;
}
