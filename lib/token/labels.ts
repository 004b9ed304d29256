/**
 * The labels of the daemon's own keys on the token, created by `svcd token init` and used by the
 * audit log: defined here once for the token tooling, the audit log and the policy.
 *
 * @example
 * ```ts
 * import { AUDIT_MAC_LABEL, DAEMON_KEY_LABELS } from "./labels.ts";
 * DAEMON_KEY_LABELS.has(AUDIT_MAC_LABEL); // true
 * ```
 */

/**
 * Label of the HMAC-SHA256 secret that chains the audit log.
 *
 * @example
 * ```ts
 * import type { Token } from "./token.ts";
 * declare const token: Token, line: Uint8Array;
 * await token.mac(AUDIT_MAC_LABEL, line);
 * ```
 */
export const AUDIT_MAC_LABEL = "svc-audit";

/**
 * Label of the Ed25519 key pair that signs audit checkpoints.
 *
 * @example
 * ```ts
 * import type { Token } from "./token.ts";
 * declare const token: Token;
 * const key = await token.key(AUDIT_SIGN_LABEL);
 * ```
 */
export const AUDIT_SIGN_LABEL = "svc-audit-sign";

/**
 * The labels of the daemon's own keys: no route signs, verifies or lists with them, and a policy
 * that grants one is refused (a client signing with `svc-audit-sign` could forge checkpoints).
 *
 * @example
 * ```ts
 * DAEMON_KEY_LABELS.has("svc-audit-sign"); // → true
 * ```
 */
export const DAEMON_KEY_LABELS: ReadonlySet<string> = Object.freeze(
  new Set([AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL]),
);
