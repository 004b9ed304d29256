/**
 * Independent signature checks for tests — Web Crypto for classical keys, @noble/post-quantum for
 * ML-DSA, both over the draft's M' for the composite; never the module under test. A thin adapter
 * over lib/token/independent_verify.ts (which `svcd token selftest` uses) for tests that hold a
 * public key from the daemon's /token answer rather than a SigningKey.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * declare const raw: Uint8Array, spki: Uint8Array, message: Uint8Array, signature: Uint8Array;
 * assert.ok(await verifyIndependently("ec-p256", { raw, spki }, message, signature));
 * ```
 */
import assert from "node:assert/strict";
import { verifyIndependently as verifyKey } from "../../lib/token/independent_verify.ts";
import { isKeyTypeName } from "../../lib/token/mod.ts";
import { request } from "./http_client.ts";

/** A public key as GET /token lists it: raw, and as SPKI where the type has one. */
export interface DaemonPublicKey {
  raw: Uint8Array;
  spki?: Uint8Array;
}

/**
 * The public keys the daemon lists on GET /token for `subject`, by label.
 * Example: `const key = (await daemonPublicKeys(sock, ALICE)).get("k-ec")!`.
 */
export async function daemonPublicKeys(
  socket: string,
  subject: string,
): Promise<Map<string, DaemonPublicKey>> {
  const res = await request(socket, {
    path: "/token",
    headers: [["X-SVC-Client-Subject", subject]],
  });
  assert.equal(res.status, 200, res.text());
  const listed = res.json() as {
    keys: { label: string; public_key: string | null; public_key_raw: string }[];
  };
  return new Map(listed.keys.map((k) => [k.label, {
    raw: Uint8Array.fromBase64(k.public_key_raw),
    spki: k.public_key ? Uint8Array.fromBase64(k.public_key) : undefined,
  }]));
}

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
