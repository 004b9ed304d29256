/**
 * Checks a token's signature without the token: Web Crypto for EC, Ed25519, RSA-PSS and RSA PKCS #1
 * v1.5,
 * @noble/post-quantum for ML-DSA, and both for the composite (draft-ietf-lamps-pq-composite-sigs-19,
 * id-MLDSA65-Ed25519-SHA512). Used by `svcd token selftest` and the tests as an oracle.
 *
 * @example
 * ```ts
 * import type { SigningKey } from "../token/mod.ts";
 * declare const key: SigningKey, message: Uint8Array, signature: Uint8Array;
 * const { ok, verifier } = await verifyIndependently(key, message, signature);
 * ```
 */
import { createHash } from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { concat } from "../bytes/mod.ts";
import {
  COMPOSITE_MLDSA65_ED25519_LABEL,
  type KeyTypeName,
  type SigningKey,
} from "../token/mod.ts";

/** Result of an independent check, with the implementation that did it. */
export interface IndependentResult {
  ok: boolean;
  verifier: string;
}

type B = Uint8Array<ArrayBuffer>;
const ab = (u: Uint8Array): B => u.slice() as B;

const EC: Partial<Record<KeyTypeName, { curve: string; hash: string }>> = {
  "ec-p256": { curve: "P-256", hash: "SHA-256" },
  "ec-p384": { curve: "P-384", hash: "SHA-384" },
};
const ML_DSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

/** Verifies `signature` over `message` with the key's public key only. */
export async function verifyIndependently(
  key: Pick<SigningKey, "keyType" | "publicKeyRaw" | "publicKeySpki">,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<IndependentResult> {
  const ec = EC[key.keyType];
  if (ec) {
    const pub = await crypto.subtle.importKey(
      "spki",
      ab(key.publicKeySpki!),
      {
        name: "ECDSA",
        namedCurve: ec.curve,
      },
      false,
      ["verify"],
    );
    const ok = await crypto.subtle.verify(
      { name: "ECDSA", hash: ec.hash },
      pub,
      ab(signature),
      ab(message),
    );
    return { ok, verifier: "WebCrypto ECDSA" };
  }
  switch (key.keyType) {
    case "ed25519":
      return {
        ok: await ed25519Verify(key.publicKeyRaw, message, signature),
        verifier: "WebCrypto Ed25519",
      };
    case "rsa-3072": {
      const pub = await crypto.subtle.importKey(
        "spki",
        ab(key.publicKeySpki!),
        { name: "RSA-PSS", hash: "SHA-256" },
        false,
        ["verify"],
      );
      const ok = await crypto.subtle.verify(
        { name: "RSA-PSS", saltLength: 32 },
        pub,
        ab(signature),
        ab(message),
      );
      return { ok, verifier: "WebCrypto RSA-PSS" };
    }
    case "rsa-3072-pkcs1v15": {
      const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
      const pub = await crypto.subtle.importKey("spki", ab(key.publicKeySpki!), algorithm, false, [
        "verify",
      ]);
      const ok = await crypto.subtle.verify(algorithm, pub, ab(signature), ab(message));
      return { ok, verifier: "WebCrypto RSASSA-PKCS1-v1_5" };
    }
    case "ml-dsa-44":
    case "ml-dsa-65":
    case "ml-dsa-87":
      return {
        ok: ML_DSA[key.keyType].verify(signature, message, key.publicKeyRaw),
        verifier: "@noble/post-quantum",
      };
    case "composite-mldsa65-ed25519":
      return {
        ok: await compositeVerify(key.publicKeyRaw, message, signature),
        verifier: "@noble/post-quantum + WebCrypto Ed25519",
      };
    default:
      return { ok: false, verifier: `none for ${key.keyType}` };
  }
}

async function ed25519Verify(
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  const pub = await crypto.subtle.importKey("raw", ab(publicKey), { name: "Ed25519" }, false, [
    "verify",
  ]);
  return await crypto.subtle.verify({ name: "Ed25519" }, pub, ab(signature), ab(message));
}

const COMPOSITE_PREFIX = new TextEncoder().encode("CompositeAlgorithmSignatures2025");
const ML_DSA_65_PK = 1952;
const ML_DSA_65_SIG = 3309;

/**
 * The composite's message representative M' = Prefix ‖ Label ‖ len(ctx) ‖ ctx ‖ SHA-512(M).
 * Example: `compositeMessage(msg)` with the empty context svcd uses.
 */
export function compositeMessage(message: Uint8Array, context = new Uint8Array(0)): Uint8Array {
  const label = new TextEncoder().encode(COMPOSITE_MLDSA65_ED25519_LABEL);
  const digest = createHash("sha512").update(message).digest();
  return concat([COMPOSITE_PREFIX, label, Uint8Array.of(context.length), context, digest]);
}

async function compositeVerify(
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (publicKey.length !== ML_DSA_65_PK + 32 || signature.length !== ML_DSA_65_SIG + 64) {
    return false;
  }
  const mPrime = compositeMessage(message);
  const label = new TextEncoder().encode(COMPOSITE_MLDSA65_ED25519_LABEL);
  const mlOk = ml_dsa65.verify(
    signature.subarray(0, ML_DSA_65_SIG),
    mPrime,
    publicKey.subarray(0, ML_DSA_65_PK),
    {
      context: label,
    },
  );
  const edOk = await ed25519Verify(
    publicKey.subarray(ML_DSA_65_PK),
    mPrime,
    signature.subarray(ML_DSA_65_SIG),
  );
  return mlOk && edOk;
}
