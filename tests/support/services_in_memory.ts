/**
 * The main isolate's services held in memory (lib/server/authenticated/main_services.ts): an
 * ordinary implementation for tests, keeping the same contract as the daemon's two
 * (lib/server/threads/services_contract_test.ts runs the same checks against all three).
 *
 * - audit: the lines in a list, numbered from 1, their members flat as in an audit file; `append`
 *   resolves with a line's seq once it is in the list, and rejects while `fail` says why the log
 *   cannot take lines;
 * - budget: an identity is limited once `threshold` refusals were counted, for `delaySeconds`;
 * - cap: lib/throttle's ConcurrencyCap;
 * - keys: `token`'s key copies, as the main isolate's own services check them.
 *
 * @example
 * ```ts
 * import { servicesInMemory } from "./services_in_memory.ts";
 * const services = servicesInMemory({ threshold: 2 });
 * const seq = await services.audit.append("sign", "CN=a", { key: "k" });
 * services.lines[seq - 1].key; // → "k"
 * ```
 */
import { ConcurrencyCap } from "../../lib/throttle/mod.ts";
import { admissionInThisThread } from "../../lib/server/authenticated/admission.ts";
import type { LocalMainServices } from "../../lib/server/authenticated/main_services.ts";

/** One line as appended: the caller's fields beside the members the log writes. */
export interface MemoryLine {
  seq: number;
  event: string;
  actor: string;
  [member: string]: unknown;
}

/** How the services are set up. */
export interface MemoryOptions {
  cap?: ConcurrencyCap;
  /** Refusals at which an identity is limited (default 10, lib/throttle's default). */
  threshold?: number;
  /** How long a limit lasts, whole seconds (default 5). */
  delaySeconds?: number;
  /** The key copies (default: none ever removed). */
  token?: { dropRemovedKeys(): string[] };
}

/** The services, the lines they were given, and a switch that makes the log refuse lines. */
export interface ServicesInMemory extends LocalMainServices {
  readonly lines: readonly MemoryLine[];
  /** While set, the log cannot take a line: `append` rejects with it, `healthy` is false. */
  fail: string | undefined;
}

/** Services over memory (see the module comment). */
export function servicesInMemory(opts: MemoryOptions = {}): ServicesInMemory {
  const lines: MemoryLine[] = [];
  const budget = memoryBudget(opts.threshold ?? 10, opts.delaySeconds ?? 5);
  const cap = opts.cap ?? new ConcurrencyCap(2);
  const token = opts.token ?? { dropRemovedKeys: () => [] };
  const services: ServicesInMemory = {
    lines,
    fail: undefined,
    audit: {
      append: (event, actor, fields = {}) => {
        if (services.fail !== undefined) return Promise.reject(new Error(services.fail));
        lines.push({ ...fields, seq: lines.length + 1, event, actor });
        return Promise.resolve(lines.length);
      },
      get healthy() {
        return services.fail === undefined;
      },
      get lastError() {
        return services.fail;
      },
      stats: () => ({ lines: lines.length, syncs: lines.length, maxGroup: 1, seals: lines.length }),
    },
    admission: admissionInThisThread({ budget, cap }),
    budget,
    keys: { dropRemoved: () => token.dropRemovedKeys() },
  };
  return services;
}

/** A refusal budget without decay: counts per identity, limited from `threshold` on. */
function memoryBudget(threshold: number, delaySeconds: number) {
  const counts = new Map<string, number>();
  const limitedUntil = new Map<string, number>();
  const remaining = (identity: string) =>
    Math.ceil(((limitedUntil.get(identity) ?? 0) - Date.now()) / 1000);
  return {
    check: (identity: string) => {
      const seconds = remaining(identity);
      return seconds > 0
        ? { limited: true as const, retryAfterSeconds: seconds }
        : { limited: false as const };
    },
    recordRefusal: (identity: string) => {
      const count = counts.get(identity) ?? 0;
      // A refusal while limited is not counted (lib/throttle's rule): one crossing per episode.
      if (remaining(identity) > 0) {
        return { count, crossed: false, delaySeconds: remaining(identity) };
      }
      counts.set(identity, count + 1);
      const crossed = count + 1 >= threshold;
      if (crossed) limitedUntil.set(identity, Date.now() + delaySeconds * 1000);
      return { count: count + 1, crossed, delaySeconds: crossed ? delaySeconds : 0 };
    },
    limitedCount: () => [...limitedUntil.keys()].filter((id) => remaining(id) > 0).length,
  };
}
