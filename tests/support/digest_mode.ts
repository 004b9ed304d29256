/**
 * The tables of the digest-mode tests (X-SVC-Digest): one key of every type, labelled from a
 * prefix, and the keys each test module must offer; the digest names each key type takes, every
 * name the daemon knows and each one's length; and @noble/post-quantum's ML-DSA by key type, the
 * verifier the project did not write.
 *
 * @example
 * ```ts
 * import { DIGEST_NAMES, digestModeKeys, expectedDigestModeKeys } from "./digest_mode.ts";
 * const keys = digestModeKeys("k-"); // { "k-p256": "ec-p256", "k-p384": "ec-p384", … }
 * console.log(DIGEST_NAMES[keys["k-p256"]]); // ["sha-256", "sha-384", "sha-512"]
 * console.log(expectedDigestModeKeys("k-").softhsm); // ["k-p256", "k-p384", "k-rsa", "k-ed"]
 * ```
 */
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";

/** One key of every type, by the end of its label. */
const KEY_TYPES: Record<string, string> = {
  p256: "ec-p256",
  p384: "ec-p384",
  rsa: "rsa-3072",
  rsa15: "rsa-3072-pkcs1v15",
  ed: "ed25519",
  ml44: "ml-dsa-44",
  ml65: "ml-dsa-65",
  ml87: "ml-dsa-87",
  comp: "composite-mldsa65-ed25519",
};

/** What each module offers of them (a type that stops being offered fails, not quietly). */
const OFFERED: Record<string, string[]> = {
  softhsm: ["p256", "p384", "rsa", "rsa15", "ed"],
  svcmod: ["p256", "ed", "ml44", "ml65", "ml87", "comp"],
};

/**
 * One key of every type, labelled `${prefix}p256`, `${prefix}rsa`, … (label → key type), for
 * makeTestToken.
 *
 * @example
 * ```ts
 * const keys = digestModeKeys("alice-"); // { "alice-p256": "ec-p256", … }
 * ```
 */
export function digestModeKeys(prefix: string): Record<string, string> {
  return Object.fromEntries(Object.entries(KEY_TYPES).map(([end, type]) => [prefix + end, type]));
}

/**
 * The labels of `digestModeKeys(prefix)` each test module must offer, by module name, in the
 * order `digestModeKeys` lists them.
 *
 * @example
 * ```ts
 * const labels = expectedDigestModeKeys("k-").svcmod; // ["k-p256", "k-ed", "k-ml44", …]
 * ```
 */
export function expectedDigestModeKeys(prefix: string): Record<string, string[]> {
  return Object.fromEntries(
    Object.entries(OFFERED).map(([module, ends]) => [module, ends.map((end) => prefix + end)]),
  );
}

/** The SHA-2 digest names. */
export const SHA2: readonly string[] = ["sha-256", "sha-384", "sha-512"];

/**
 * The digest names each key type takes (every module here offers what its key types need: svcmod
 * has CKM_ML_DSA_EXTERNAL_MU beside its ML-DSA).
 */
export const DIGEST_NAMES: Readonly<Record<string, readonly string[]>> = {
  "ec-p256": SHA2,
  "ec-p384": SHA2,
  "rsa-3072": SHA2,
  "rsa-3072-pkcs1v15": SHA2,
  "ed25519": [],
  "ml-dsa-44": ["ml-dsa-mu"],
  "ml-dsa-65": ["ml-dsa-mu"],
  "ml-dsa-87": ["ml-dsa-mu"],
  "composite-mldsa65-ed25519": [],
};

/** Every digest name the daemon knows, in the order its digest-unknown problem lists them. */
export const KNOWN_DIGESTS: readonly string[] = ["sha-256", "sha-384", "sha-512", "ml-dsa-mu"];

/** The length in bytes of each digest name's digest. */
export const DIGEST_BYTES: Readonly<Record<string, number>> = {
  "sha-256": 32,
  "sha-384": 48,
  "sha-512": 64,
  "ml-dsa-mu": 64,
};

/** @noble/post-quantum's ML-DSA by key type: an independent verifier. */
export const ML_DSA = {
  "ml-dsa-44": ml_dsa44,
  "ml-dsa-65": ml_dsa65,
  "ml-dsa-87": ml_dsa87,
} as const;
