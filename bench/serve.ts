/**
 * The daemon for benchmarks: `svcd serve` with parts switched off to measure what they cost, or
 * with the audit log replaced by a stand-in that keeps part of its cost (`--audit-stand-in`).
 * Never an operator command — the real daemon has no way to run without its audit log.
 *
 * @example
 * ```sh
 * deno run -A bench/serve.ts --without audit,budget --proxy-uid 0 --socket /tmp/s.sock ...
 * deno run -A bench/serve.ts --audit-stand-in next-turn --proxy-uid 0 --socket /tmp/s.sock ...
 * ```
 */
import { parseServeArgs } from "../lib/server/daemon/config.ts";
import { type DaemonParts, openAuditLog, runDaemon } from "../lib/server/daemon/daemon.ts";

const NOT_LIMITED = { limited: false } as const;

/** Parts that do nothing, by name. */
const NULL_PARTS: Record<string, DaemonParts> = {
  audit: {
    openAudit: () =>
      Promise.resolve({
        append: () => Promise.resolve(0),
        healthy: true,
        lastError: undefined,
        close: () => Promise.resolve(),
      }),
  },
  budget: {
    openBudget: () => ({
      check: () => NOT_LIMITED,
      recordRefusal: () => ({ count: 0, crossed: false, delaySeconds: 0 }),
      limitedCount: () => 0,
      close: () => {},
    }),
  },
};

/** Resolves on a later turn of the event loop (after the timers and I/O already due). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * An audit log that writes nothing but answers as a durable barrier does: every line appended
 * before the next turn is released together on that turn, as one group's fdatasync completion
 * releases its lines.
 */
function nextTurnAudit() {
  let waiting: (() => void)[] = [];
  let seq = 0;
  const release = () => {
    const group = waiting;
    waiting = [];
    for (const resolve of group) resolve();
  };
  return {
    append: () =>
      new Promise<number>((resolve) => {
        if (waiting.length === 0) setImmediate(release);
        const at = ++seq;
        waiting.push(() => resolve(at));
      }),
    healthy: true,
    lastError: undefined,
    close: () => Promise.resolve(),
  };
}

/**
 * Audit stand-ins, each keeping more of the real log's cost (bench/compare.ts --audit-ladder):
 * - `next-turn`: the barrier's shape alone (answers wait for a later turn), no line, no disk;
 * - `instant-disk`: the real log (chain, token seal, write) on a disk whose fdatasync is done at
 *   once, answered on the next turn.
 */
const AUDIT_STAND_INS: Record<string, DaemonParts> = {
  "next-turn": { openAudit: () => Promise.resolve(nextTurnAudit()) },
  "instant-disk": {
    openAudit: (config, token, onHealthChange) =>
      openAuditLog(config, token, onHealthChange, { sync: nextTurn }),
  },
};

/** Takes `--name value` out of `args`; the value, or undefined when the option is absent. */
function takeOption(args: string[], name: string): string | undefined {
  const at = args.indexOf(name);
  return at >= 0 ? args.splice(at, 2)[1] : undefined;
}

if (import.meta.main) {
  const args = [...Deno.args];
  const without = (takeOption(args, "--without") ?? "").split(",").filter(Boolean);
  const standIn = takeOption(args, "--audit-stand-in");
  const parts: DaemonParts = {};
  for (const name of without) {
    if (!NULL_PARTS[name]) throw new Error(`--without: unknown part '${name}' (audit, budget)`);
    Object.assign(parts, NULL_PARTS[name]);
  }
  if (standIn !== undefined) {
    if (!AUDIT_STAND_INS[standIn]) {
      throw new Error(`--audit-stand-in: unknown stand-in '${standIn}' (next-turn, instant-disk)`);
    }
    Object.assign(parts, AUDIT_STAND_INS[standIn]);
  }
  Deno.exit(await runDaemon(parseServeArgs(args), parts));
}
