/**
 * What the daemon watches of its audit log: each checkpoint line copied to syslog (./syslog.ts),
 * each group commit and failure counted (lib/metrics).
 *
 * @example
 * ```ts
 * const hooks = auditObservers("/dev/log", console.error); // spread into AuditLog.open's options
 * ```
 */
import { auditMetrics } from "../metrics/svcd.ts";
import type { AuditOptions } from "./log.ts";
import { CheckpointSyslog } from "./syslog.ts";

/**
 * The hooks for `AuditLog.open`; `syslogSocket` undefined: no copies. A dropped copy is logged
 * once until a copy gets through again.
 *
 * @example
 * ```ts
 * auditObservers(undefined, () => {}).onGroupCommit?.(3, 0.001);
 * ```
 */
export function auditObservers(
  syslogSocket: string | undefined,
  log: (message: string) => void,
): Pick<AuditOptions, "onCheckpoint" | "onGroupCommit" | "onWriteFailure"> {
  let failing = false;
  const sink = syslogSocket === undefined
    ? undefined
    : new CheckpointSyslog(syslogSocket, (why) => {
      if (!failing) log(`${why}; said once until a copy gets through`);
      failing = true;
    });
  return {
    onGroupCommit: auditMetrics.groupCommitted,
    onWriteFailure: auditMetrics.writeFailed,
    onCheckpoint: sink
      ? (line) => {
        const sent = sink.send(line);
        auditMetrics.checkpointCopied(sent);
        if (sent && failing) {
          failing = false;
          log(`audit: checkpoint copies reach syslog ${syslogSocket} again`);
        }
      }
      : undefined,
  };
}
