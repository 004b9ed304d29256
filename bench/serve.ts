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
import { benchArgs, listOf, oneOf } from "./_args.ts";
import { ConfigError, parseServeArgs, type ServeConfig } from "../lib/server/daemon/config.ts";
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

/** `svcd serve`'s configuration of `args`; `fail` is called with what is wrong with them. */
function serveConfig(args: string[], fail: (problem: string) => never): ServeConfig {
  try {
    return parseServeArgs(args);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return fail(err.message);
  }
}

/** The parts `--without` can switch off (what the benches that run this script may pass on). */
export const SWITCHABLE_PARTS: readonly string[] = Object.keys(NULL_PARTS);

if (import.meta.main) {
  const { values, rest, exitWithUsage } = benchArgs({
    url: import.meta.url,
    measures: "The daemon for benchmarks: svcd serve with parts switched off to measure what " +
      "they cost, or with the audit log replaced by a stand-in that keeps part of its cost " +
      "(next-turn: the barrier's shape alone, no line, no disk; instant-disk: the real log on a " +
      "disk that syncs at once). Never an operator command.",
    options: {
      without: {
        type: "string",
        default: "",
        check: listOf(oneOf(SWITCHABLE_PARTS)),
        help: "parts that do nothing",
      },
      "audit-stand-in": {
        type: "string",
        check: oneOf(Object.keys(AUDIT_STAND_INS)),
        help: "the stand-in for the audit log",
      },
    },
    passOn: "svcd serve (see `deno task svcd serve --help`)",
    examples: [
      "deno run -A bench/serve.ts --without audit,budget --proxy-uid 0 --socket /tmp/s.sock ...",
      "deno run -A bench/serve.ts --audit-stand-in next-turn --proxy-uid 0 --socket /tmp/s.sock ...",
    ],
  });
  const parts: DaemonParts = {};
  for (const name of values.without.split(",").filter(Boolean)) {
    Object.assign(parts, NULL_PARTS[name]);
  }
  if (values["audit-stand-in"] !== undefined) {
    Object.assign(parts, AUDIT_STAND_INS[values["audit-stand-in"]]);
  }
  Deno.exit(await runDaemon(serveConfig(rest, exitWithUsage), parts));
}
