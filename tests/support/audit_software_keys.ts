/**
 * Audit keys held in software instead of the token: an HMAC-SHA256 key and an Ed25519 pair.
 * For tests and benches (they compute the same values the token would with the same key bytes);
 * the daemon uses lib/audit/token_keys.ts. The MAC is Web Crypto's (asynchronous, like the token's
 * nonblocking calls) or, with `synchronousMac`, node:crypto's computed at once — which makes the
 * grouping of lines independent of timing in tests.
 *
 * @example
 * ```ts
 * import { AuditLog } from "../../lib/audit/log.ts";
 * import { verifyAuditFiles } from "../../lib/audit/verify.ts";
 * declare const dir: string, files: string[];
 * const k = await softwareAuditKeys();
 * const log = await AuditLog.open({ dir, keys: k.keys, login: {} });
 * await verifyAuditFiles({ files, mac: k.keys.mac, publicKey: k.publicKey, fromStart: true });
 * ```
 */
import { pem } from "../../lib/der/mod.ts";
import { createHmac } from "node:crypto";
import type { AuditKeys } from "../../lib/audit/log.ts";

/** The keys, plus what a verifier needs: the raw HMAC secret and the Ed25519 public key. */
export interface SoftwareAuditKeys {
  keys: AuditKeys;
  macSecret: Uint8Array;
  /** PKCS#8 of the Ed25519 private key, to hand the same keys to a child process. */
  signPkcs8: Uint8Array;
  publicKey: CryptoKey;
  /** The public key as PEM SubjectPublicKeyInfo, as `svcd token pubkey` writes it. */
  publicKeyPem: string;
}

/** Key material to reuse (e.g. in a child process) and how to compute the MAC. */
export interface SoftwareKeyOptions {
  macSecret?: Uint8Array;
  /** PKCS#8 of the Ed25519 private key; a fresh pair when absent. */
  signPkcs8?: Uint8Array;
  synchronousMac?: boolean;
}

/**
 * Fresh random keys, or the given ones.
 *
 * @example
 * ```ts
 * const { keys, publicKeyPem } = await softwareAuditKeys({ synchronousMac: true });
 * ```
 */
export async function softwareAuditKeys(opts: SoftwareKeyOptions = {}): Promise<SoftwareAuditKeys> {
  const secret = opts.macSecret ?? crypto.getRandomValues(new Uint8Array(32));
  const hmac = await crypto.subtle.importKey(
    "raw",
    secret as BufferSource,
    {
      name: "HMAC",
      hash: "SHA-256",
    },
    false,
    ["sign"],
  );
  const { privateKey, publicKey } = await ed25519Pair(opts.signPkcs8);
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", publicKey));
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", privateKey));
  const webMac = async (data: Uint8Array) =>
    new Uint8Array(await crypto.subtle.sign("HMAC", hmac, data as BufferSource));
  const syncMac = (data: Uint8Array) =>
    Promise.resolve(new Uint8Array(createHmac("sha256", secret).update(data).digest()));
  return {
    keys: {
      mac: opts.synchronousMac ? syncMac : webMac,
      signCheckpoint: async (data) =>
        new Uint8Array(await crypto.subtle.sign("Ed25519", privateKey, data as BufferSource)),
    },
    macSecret: secret,
    signPkcs8: pkcs8,
    publicKey,
    publicKeyPem: pem("PUBLIC KEY", spki),
  };
}

async function ed25519Pair(pkcs8?: Uint8Array): Promise<CryptoKeyPair> {
  if (!pkcs8) {
    return await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
      "sign",
      "verify",
    ]) as CryptoKeyPair;
  }
  const privateKey = await crypto.subtle.importKey(
    "pkcs8",
    pkcs8 as BufferSource,
    { name: "Ed25519" },
    true,
    [
      "sign",
    ],
  );
  // The public half of an Ed25519 PKCS#8 key comes out of its JWK form (x).
  const jwk = await crypto.subtle.exportKey("jwk", privateKey);
  const publicKey = await crypto.subtle.importKey(
    "jwk",
    { kty: "OKP", crv: "Ed25519", x: jwk.x },
    {
      name: "Ed25519",
    },
    true,
    ["verify"],
  );
  return { privateKey, publicKey };
}
