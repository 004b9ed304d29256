/**
 * Audit keys held in Web Crypto instead of the token: an HMAC-SHA256 key and an Ed25519 pair.
 * For tests and benches (they compute the same values the token would with the same key bytes);
 * the daemon uses {@link ./token_keys.ts}.
 *
 * @example
 * ```ts
 * const k = await webCryptoAuditKeys();
 * const log = await AuditLog.open({ dir, keys: k.keys, login: {} });
 * await verifyAuditFiles({ files, mac: k.keys.mac, publicKey: k.publicKey });
 * ```
 */
import type { AuditKeys } from "./log.ts";

/** The keys, plus what a verifier needs: the raw HMAC secret and the Ed25519 public key. */
export interface WebCryptoAuditKeys {
  keys: AuditKeys;
  macSecret: Uint8Array;
  publicKey: CryptoKey;
  /** The public key as PEM SubjectPublicKeyInfo, as `svcd token pubkey` writes it. */
  publicKeyPem: string;
}

/**
 * Fresh random keys (or the given HMAC secret).
 *
 * @example
 * ```ts
 * const { keys, publicKeyPem } = await webCryptoAuditKeys();
 * ```
 */
export async function webCryptoAuditKeys(macSecret?: Uint8Array): Promise<WebCryptoAuditKeys> {
  const secret = macSecret ?? crypto.getRandomValues(new Uint8Array(32));
  const hmac = await crypto.subtle.importKey(
    "raw",
    secret as BufferSource,
    { name: "HMAC", hash: "SHA-256" },
    false,
    [
      "sign",
    ],
  );
  const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, true, [
    "sign",
    "verify",
  ]) as CryptoKeyPair;
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", pair.publicKey));
  return {
    keys: {
      mac: async (data) =>
        new Uint8Array(await crypto.subtle.sign("HMAC", hmac, data as BufferSource)),
      signCheckpoint: async (data) =>
        new Uint8Array(await crypto.subtle.sign("Ed25519", pair.privateKey, data as BufferSource)),
    },
    macSecret: secret,
    publicKey: pair.publicKey,
    publicKeyPem: pemEncode("PUBLIC KEY", spki),
  };
}

/**
 * PEM armour for DER bytes (64-character lines).
 *
 * @example
 * ```ts
 * pemEncode("PUBLIC KEY", spki); // "-----BEGIN PUBLIC KEY-----\n…"
 * ```
 */
export function pemEncode(label: string, der: Uint8Array): string {
  const b64 = der.toBase64().match(/.{1,64}/g)!.join("\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}
