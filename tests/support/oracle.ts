/**
 * Independent signature checks for tests — Web Crypto for classical keys, @noble/post-quantum for
 * ML-DSA, both over the draft's M' for the composite; never the module under test. A thin adapter
 * over lib/token_admin/independent_verify.ts (which `svcd token selftest` uses) for tests that hold a
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
import { verifyIndependently as verifyKey } from "../../lib/token_admin/independent_verify.ts";
import { isKeyTypeName } from "../../lib/token/mod.ts";
import { request } from "./http_client.ts";
import { type CommandResult, runCommand } from "./command.ts";

/** One key as GET /token lists it (JSON, the public key in base64). */
export interface TokenKey {
  label: string;
  key_type: string;
  public_key: string | null;
  public_key_raw: string;
  /** The digest names the key takes in digest mode (empty: message mode only). */
  digests: string[];
}

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

/** Writes a PUBLIC KEY PEM file at `path` from the base64 of its SPKI. */
export async function writeSpkiPem(path: string, spkiBase64: string): Promise<void> {
  const body = spkiBase64.match(/.{1,64}/g)!.join("\n");
  await Deno.writeTextFile(path, `-----BEGIN PUBLIC KEY-----\n${body}\n-----END PUBLIC KEY-----\n`);
}

/**
 * openssl's check of the signature file `sig` over `file` with the PEM public key `pem`: ECDSA
 * (DER), RSA-PSS (SHA-256, salt 32) and RSA PKCS #1 v1.5 (SHA-256) by `openssl dgst`, Ed25519 by `openssl pkeyutl -rawin`.
 */
export function opensslVerifyFile(
  keyType: string,
  pem: string,
  file: string,
  sig: string,
): Promise<CommandResult> {
  if (keyType === "ed25519") {
    return runCommand("openssl", [
      "pkeyutl",
      "-verify",
      "-pubin",
      "-inkey",
      pem,
      "-rawin",
      "-in",
      file,
      "-sigfile",
      sig,
    ]);
  }
  if (!["ec-p256", "ec-p384", "rsa-3072", "rsa-3072-pkcs1v15"].includes(keyType)) {
    throw new Error(`openssl does not check key type ${keyType} here`);
  }
  const hash = keyType === "ec-p384" ? "-sha384" : "-sha256";
  // openssl dgst's default RSA padding is PKCS #1 v1.5.
  const pss = keyType === "rsa-3072"
    ? ["-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"]
    : [];
  return runCommand("openssl", ["dgst", hash, ...pss, "-verify", pem, "-signature", sig, file]);
}
