/**
 * The daemon for benchmarks: `svcd serve` with parts switched off to measure what they cost.
 * Never an operator command — the real daemon has no way to run without its audit log.
 *
 * @example
 * ```sh
 * deno run -A bench/serve.ts --without audit,budget --proxy-uid 0 --socket /tmp/s.sock ...
 * ```
 */
import { parseServeArgs } from "../lib/server/config.ts";
import { type DaemonParts, runDaemon } from "../lib/server/daemon.ts";

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

if (import.meta.main) {
  const args = [...Deno.args];
  const at = args.indexOf("--without");
  const without = at >= 0 ? args.splice(at, 2)[1].split(",").filter(Boolean) : [];
  const parts: DaemonParts = {};
  for (const name of without) {
    if (!NULL_PARTS[name]) throw new Error(`--without: unknown part '${name}' (audit, budget)`);
    Object.assign(parts, NULL_PARTS[name]);
  }
  Deno.exit(await runDaemon(parseServeArgs(args), parts));
}
