/**
 * ML-DSA's message representative μ (FIPS 204, Algorithm 7 line 6, with an empty context), computed
 * over a stream: μ = SHAKE256(tr ‖ 0x00 ‖ 0x00 ‖ M, 64) with tr = SHAKE256(pk, 64). svcd signs μ
 * with CKM_ML_DSA_EXTERNAL_MU and the result is a plain ML-DSA signature over M.
 *
 * @example
 * ```ts
 * import { muHasher } from "./mu.ts";
 * const h = muHasher(new Uint8Array(1952));
 * h.update(new TextEncoder().encode("message"));
 * h.digest().length; // 64
 * ```
 */
import { createHash } from "node:crypto";
import type { Digester } from "./digests.ts";

/** Bytes of μ and of tr. */
export const MU_LENGTH = 64;

/** A streaming μ for the public key `publicKey` (the raw ML-DSA public key). */
export function muHasher(publicKey: Uint8Array): Digester {
  const tr = createHash("shake256", { outputLength: MU_LENGTH }).update(publicKey).digest();
  // The pure signature's domain separator: 0 (not pre-hashed), then the context's length, 0.
  const h = createHash("shake256", { outputLength: MU_LENGTH }).update(tr).update(
    Uint8Array.of(0, 0),
  );
  return {
    update: (chunk) => void h.update(chunk),
    digest: () => new Uint8Array(h.digest()),
  };
}
