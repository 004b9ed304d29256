/**
 * Independent signature checks for tests — Web Crypto for classical keys, @noble/post-quantum for
 * ML-DSA, both over the draft's M' for the composite; never the module under test. A thin adapter
 * over lib/token/independent_verify.ts (which `svcd token selftest` uses) for tests that hold a
 * public key from the daemon's /token answer rather than a SigningKey.
 *
 * @example
 * ```ts ignore
 * assert.ok(await verifyIndependently("ec-p256", { raw, spki }, message, signature));
 * ```
 */
import { verifyIndependently as verifyKey } from "../../lib/token/independent_verify.ts";
import { isKeyTypeName } from "../../lib/token/mod.ts";

/** Verifies `signature` over `message` with a public key given raw and, where it exists, as SPKI. */
export async function verifyIndependently(
  keyType: string,
  publicKey: { raw?: Uint8Array; spki?: Uint8Array },
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (!isKeyTypeName(keyType)) throw new Error(`no independent oracle for key type ${keyType}`);
  // ECDSA and RSA are checked with the SPKI, the others with the raw key.
  const key = {
    keyType,
    publicKeyRaw: publicKey.raw ?? new Uint8Array(0),
    publicKeySpki: publicKey.spki,
  };
  return (await verifyKey(key, message, signature)).ok;
}
