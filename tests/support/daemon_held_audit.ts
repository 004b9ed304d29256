/**
 * Test entry point: `svcd serve` whose audit opening waits for a line on stdin, so a test can
 * signal the daemon while it is between its login and its audit file. Never an operator command.
 *
 * @example
 * ```sh
 * deno run -A tests/support/daemon_held_audit.ts --proxy-uid 0 --socket /tmp/s.sock ... <<<"go"
 * ```
 */
import { parseServeArgs } from "../../lib/server/daemon/config.ts";
import { log, openAuditLog, runDaemon } from "../../lib/server/daemon/daemon.ts";

/** Resolves when stdin delivers its first bytes (or closes). */
async function firstInput(): Promise<void> {
  const reader = Deno.stdin.readable.getReader();
  await reader.read();
  reader.releaseLock();
}

if (import.meta.main) {
  Deno.exit(
    await runDaemon(parseServeArgs(Deno.args), {
      openAudit: async (config, token) => {
        log("testing: audit opening held until stdin has a line");
        await firstInput();
        return await openAuditLog(config, token);
      },
    }),
  );
}
