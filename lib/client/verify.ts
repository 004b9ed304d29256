/**
 * Checks a signature on this host with the key's public key only, over the digest the client
 * computed (never the server's word): ECDSA with @noble/curves over the hash, RSA-PSS (MGF1 of the
 * same hash, salt of the hash's length) by the RFC 8017 steps with node:crypto's hashes, RSA PKCS #1
 * v1.5 by node:crypto's RSA with the DigestInfo compared here, ML-DSA
 * with @noble/post-quantum over μ, the composite (draft-ietf-lamps-pq-composite-sigs-19,
 * id-MLDSA65-Ed25519-SHA512) over its M' with @noble and Web Crypto Ed25519, and Ed25519 over the
 * message with Web Crypto.
 *
 * @example
 * ```ts
 * import { verifyLocally } from "./verify.ts";
 * import type { ClientKey } from "./keys.ts";
 * declare const key: ClientKey, edKey: ClientKey, signature: Uint8Array;
 * declare const digest: Uint8Array, message: Uint8Array;
 * const ok = await verifyLocally(key, signature, { digest }); // a hashed key type
 * const ok2 = await verifyLocally(edKey, signature, { message }); // Ed25519
 * ```
 */
import { constants, createHash, createPublicKey, publicDecrypt } from "node:crypto";
import { p256, p384 } from "@noble/curves/nist.js";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { bytesEqual } from "../bytes/mod.ts";
import { COMPOSITE_MLDSA65_ED25519_LABEL, digestInfo } from "../token/mod.ts";
import { localDigestName, NODE_HASH } from "./digests.ts";
import type { ClientKey } from "./keys.ts";

/** What the signature is checked over: the key type's local digest, or (Ed25519) the message. */
export type Signed = { digest: Uint8Array } | { message: Uint8Array };

type B = Uint8Array<ArrayBuffer>;
const ab = (u: Uint8Array): B => u.slice() as B;

const ECDSA = { "ec-p256": p256, "ec-p384": p384 } as const;
const ML_DSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

/** Whether `signature` is `key`'s over what `signed` stands for; false for any malformed input. */
export async function verifyLocally(
  key: Pick<ClientKey, "keyType" | "publicKeyRaw" | "publicKeySpki">,
  signature: Uint8Array,
  signed: Signed,
): Promise<boolean> {
  if (key.keyType === "ed25519") {
    if (!("message" in signed)) throw new Error("an Ed25519 signature is checked over the message");
    return await ed25519Verify(key.publicKeyRaw, signed.message, signature);
  }
  const name = localDigestName(key.keyType);
  if (name === undefined || !("digest" in signed)) {
    throw new Error(`no local check for key type '${key.keyType}' over what was given`);
  }
  const digest = signed.digest;
  try {
    switch (key.keyType) {
      case "ec-p256":
      case "ec-p384":
        return ECDSA[key.keyType].verify(signature, digest, key.publicKeyRaw, {
          prehash: false,
          lowS: false,
        });
      case "rsa-3072":
        return rsaPssVerify(key.publicKeySpki!, name as keyof typeof NODE_HASH, digest, signature);
      case "rsa-3072-pkcs1v15":
        return rsaPkcs1v15Verify(
          key.publicKeySpki!,
          name as keyof typeof NODE_HASH,
          digest,
          signature,
        );
      case "ml-dsa-44":
      case "ml-dsa-65":
      case "ml-dsa-87":
        return ML_DSA[key.keyType].internal.verify(signature, digest, key.publicKeyRaw, {
          externalMu: true,
        });
      case "composite-mldsa65-ed25519":
        return await compositeVerify(key.publicKeyRaw, digest, signature);
    }
  } catch {
    // A signature or key of the wrong length or encoding: not a valid signature.
    return false;
  }
  return false;
}

async function ed25519Verify(
  publicKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  try {
    const pub = await crypto.subtle.importKey("raw", ab(publicKey), { name: "Ed25519" }, false, [
      "verify",
    ]);
    return await crypto.subtle.verify({ name: "Ed25519" }, pub, ab(signature), ab(message));
  } catch {
    return false;
  }
}

const COMPOSITE_PREFIX = new TextEncoder().encode("CompositeAlgorithmSignatures2025");
const COMPOSITE_LABEL = new TextEncoder().encode(COMPOSITE_MLDSA65_ED25519_LABEL);
const ML_DSA_65_PK = 1952;
const ML_DSA_65_SIG = 3309;

/** M' = Prefix ‖ Label ‖ len(ctx) = 0 ‖ SHA-512(M), from SHA-512(M). */
export function compositeRepresentative(sha512: Uint8Array): Uint8Array {
  const out = new Uint8Array(COMPOSITE_PREFIX.length + COMPOSITE_LABEL.length + 1 + sha512.length);
  out.set(COMPOSITE_PREFIX);
  out.set(COMPOSITE_LABEL, COMPOSITE_PREFIX.length);
  out.set(sha512, COMPOSITE_PREFIX.length + COMPOSITE_LABEL.length + 1);
  return out;
}

async function compositeVerify(
  publicKey: Uint8Array,
  sha512: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (publicKey.length !== ML_DSA_65_PK + 32 || signature.length !== ML_DSA_65_SIG + 64) {
    return false;
  }
  const mPrime = compositeRepresentative(sha512);
  const mlOk = ml_dsa65.verify(
    signature.subarray(0, ML_DSA_65_SIG),
    mPrime,
    publicKey.subarray(0, ML_DSA_65_PK),
    { context: COMPOSITE_LABEL },
  );
  const edOk = await ed25519Verify(
    publicKey.subarray(ML_DSA_65_PK),
    mPrime,
    signature.subarray(ML_DSA_65_SIG),
  );
  return mlOk && edOk;
}

/**
 * RSASSA-PSS verification over a digest (RFC 8017 §8.1.2 and §9.1.2): MGF1 of the same hash, salt
 * of the hash's length. node:crypto verifies PSS only over a message it hashes itself.
 */
/**
 * RSASSA-PKCS1-v1_5 (RFC 8017 section 8.2.2) over a digest: the encoded message recovered with the
 * public key (block type 1 checked by node:crypto) must be exactly the DigestInfo of `digest`.
 */
export function rsaPkcs1v15Verify(
  spki: Uint8Array,
  hash: keyof typeof NODE_HASH,
  digest: Uint8Array,
  signature: Uint8Array,
): boolean {
  const key = createPublicKey({ key: Buffer.from(spki), format: "der", type: "spki" });
  const k = Math.ceil((key.asymmetricKeyDetails?.modulusLength ?? 0) / 8);
  if (signature.length !== k) return false;
  try {
    const recovered = publicDecrypt(
      { key, padding: constants.RSA_PKCS1_PADDING },
      Buffer.from(signature),
    );
    return bytesEqual(recovered, digestInfo(NODE_HASH[hash], digest));
  } catch {
    return false; // not block type 1 under this key
  }
}

export function rsaPssVerify(
  spki: Uint8Array,
  hash: keyof typeof NODE_HASH,
  digest: Uint8Array,
  signature: Uint8Array,
): boolean {
  const jwk = createPublicKey({ key: Buffer.from(spki), format: "der", type: "spki" })
    .export({ format: "jwk" });
  const n = bigFromBytes(Uint8Array.fromBase64(jwk.n!, { alphabet: "base64url" }));
  const e = bigFromBytes(Uint8Array.fromBase64(jwk.e!, { alphabet: "base64url" }));
  const k = Math.ceil(n.toString(2).length / 8);
  if (signature.length !== k) return false;
  const s = bigFromBytes(signature);
  if (s >= n) return false;
  const modBits = n.toString(2).length;
  const emBits = modBits - 1;
  const emLen = Math.ceil(emBits / 8);
  const full = bytesFromBig(modPow(s, e, n), k);
  if (emLen < k && full[0] !== 0) return false;
  const em = full.subarray(k - emLen);
  return emsaPssVerify(NODE_HASH[hash], digest, em, emBits);
}

function emsaPssVerify(hash: string, mHash: Uint8Array, em: Uint8Array, emBits: number): boolean {
  const hLen = mHash.length;
  const sLen = hLen;
  const emLen = em.length;
  if (emLen < hLen + sLen + 2 || em[emLen - 1] !== 0xbc) return false;
  const maskedDb = em.subarray(0, emLen - hLen - 1);
  const h = em.subarray(emLen - hLen - 1, emLen - 1);
  const topBits = 8 * emLen - emBits;
  const topMask = (0xff << (8 - topBits)) & 0xff;
  if ((maskedDb[0] & topMask) !== 0) return false;
  const db = mgf1(hash, h, maskedDb.length);
  for (let i = 0; i < db.length; i++) db[i] ^= maskedDb[i];
  db[0] &= ~topMask & 0xff;
  const ps = emLen - hLen - sLen - 2;
  for (let i = 0; i < ps; i++) if (db[i] !== 0) return false;
  if (db[ps] !== 0x01) return false;
  const salt = db.subarray(db.length - sLen);
  const hPrime = createHash(hash).update(new Uint8Array(8)).update(mHash).update(salt).digest();
  return timingSafeEqualBytes(h, hPrime);
}

function mgf1(hash: string, seed: Uint8Array, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const counter = new Uint8Array(4);
  for (let offset = 0, c = 0; offset < length; c++) {
    new DataView(counter.buffer).setUint32(0, c);
    const block = createHash(hash).update(seed).update(counter).digest();
    out.set(block.subarray(0, Math.min(block.length, length - offset)), offset);
    offset += block.length;
  }
  return out;
}

function timingSafeEqualBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

function bigFromBytes(bytes: Uint8Array): bigint {
  return bytes.length === 0 ? 0n : BigInt("0x" + bytes.toHex());
}

function bytesFromBig(value: bigint, length: number): Uint8Array {
  const hex = value.toString(16).padStart(length * 2, "0");
  return Uint8Array.fromHex(hex.slice(-length * 2));
}

function modPow(base: bigint, exponent: bigint, modulus: bigint): bigint {
  let result = 1n;
  base %= modulus;
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * base) % modulus;
    base = (base * base) % modulus;
  }
  return result;
}
