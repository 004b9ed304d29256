/**
 * The audit keys as the token holds them: the group seal is C_Sign(CKM_SHA256_HMAC) with the
 * non-extractable secret `svc-audit`, the checkpoint signature is Ed25519 with `svc-audit-sign`
 * (both created by `svcd token init`). Typed structurally, so this module needs only the three
 * methods it calls.
 *
 * @example
 * ```ts
 * import { AuditLog } from "./log.ts";
 * declare const dir: string, token: AuditToken<unknown>;
 * const log = await AuditLog.open({ dir, keys: auditKeysFromToken(token), login: { token: "svcd" } });
 * ```
 */
import type { AuditKeys } from "./log.ts";
import { AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL } from "../token/mod.ts";

export { AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL, DAEMON_KEY_LABELS } from "../token/mod.ts";

/** The part of lib/token's Token the audit log uses. */
export interface AuditToken<K> {
  mac(secretLabel: string, data: Uint8Array): Promise<Uint8Array>;
  key(label: string): Promise<K | undefined | null>;
  sign(key: K, message: Uint8Array): Promise<{ signature: Uint8Array }>;
}

/**
 * The {@link AuditKeys} of a logged-in token. The signing key is looked up at the first checkpoint
 * (and again after a failure), so a token without it fails that checkpoint, not the start.
 *
 * @example
 * ```ts
 * declare const token: AuditToken<unknown>;
 * const keys = auditKeysFromToken(token);
 * ```
 */
export function auditKeysFromToken<K>(token: AuditToken<K>): AuditKeys {
  let signKey: Promise<K> | undefined;
  const findSignKey = async (): Promise<K> => {
    const key = await token.key(AUDIT_SIGN_LABEL);
    if (key === undefined || key === null) {
      throw new Error(
        `the token has no key '${AUDIT_SIGN_LABEL}': create it with 'svcd token init'`,
      );
    }
    return key;
  };
  return {
    mac: (data) => token.mac(AUDIT_MAC_LABEL, data),
    signCheckpoint: async (data) => {
      signKey ??= findSignKey();
      try {
        return (await token.sign(await signKey, data)).signature;
      } catch (err) {
        signKey = undefined;
        throw err;
      }
    },
  };
}
