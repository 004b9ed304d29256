/**
 * The tamper-evident audit log: {@link AuditLog} writes it (hash chain sealed per group commit, fail closed),
 * {@link verifyAuditFiles} checks it; `svcd audit verify` is ./cli.ts. Format: ./README.md.
 *
 * @example
 * ```ts
 * declare const token: AuditToken<unknown>;
 * const log = await AuditLog.open({ dir: "/var/log/svcd", keys: auditKeysFromToken(token), login: {} });
 * ```
 */
export { AuditLog, AuditUnavailableError } from "./log.ts";
export type { AuditKeys, AuditOptions, AuditStats } from "./log.ts";
export {
  AUDIT_MAC_LABEL,
  AUDIT_SIGN_LABEL,
  auditKeysFromToken,
  DAEMON_KEY_LABELS,
} from "./token_keys.ts";
export type { AuditToken } from "./token_keys.ts";
export { verifyAuditFiles } from "./verify.ts";
export type { FileReport, Problem, VerifyOptions, VerifyResult } from "./verify.ts";
export { AuditDirectoryError, listAuditFiles } from "./files.ts";
export { auditObservers } from "./observers.ts";
export { actorBytes, auditFileName, auditFileNumber, parseLine } from "./format.ts";
export { checkpointMessage } from "./checkpoints.ts";
