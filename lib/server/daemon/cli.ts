/**
 * `svcd serve` and `svcd --check-config`: parse the options, then run the daemon or only its
 * start-up checks. Every failure prints what was wrong and what to do, and exits non-zero.
 *
 * @example
 * ```ts
 * Deno.exit(await runServeCommand(["--proxy-uid", "33"], { checkOnly: true }));
 * ```
 */
import { ConfigError, type ServeConfig, serveConfig, servedBy, syntaxError } from "./config.ts";
import { SERVE_COMMAND } from "./serve_options.ts";
import { flushLog, runDaemon, StartupError } from "./daemon.ts";
import { type Finding, startupFindings, stateFileFinding, tokenFindings } from "./checks.ts";
import { CredentialError } from "../../token/mod.ts";
import { EXIT } from "../../cli/exit.ts";
import { parseCommandLine } from "../../cli/command_line.ts";

/** Runs `serve` (checkOnly false) or `--check-config` (checkOnly true); returns the exit code. */
export async function runServeCommand(
  args: string[],
  opts: { checkOnly: boolean },
): Promise<number> {
  try {
    const line = parseCommandLine(SERVE_COMMAND, args, {
      allowPositionals: false,
      usageError: (message) => {
        console.error(`svcd: ${syntaxError(message).message}`);
        return EXIT.usage;
      },
    });
    if ("exit" in line) return line.exit;
    const config = serveConfig(line.values);
    if (!opts.checkOnly) return await runDaemon(config);
    return await checkOnly(config);
  } catch (err) {
    if (
      err instanceof ConfigError || err instanceof StartupError || err instanceof CredentialError
    ) {
      console.error(`svcd: ${err.message}`);
      return err instanceof ConfigError ? EXIT.usage : EXIT.failed;
    }
    console.error(`svcd: ${(err as Error).message}`);
    return EXIT.failed;
  } finally {
    flushLog();
  }
}

/**
 * `--check-config`: every finding, one line each with what to do; exit 1 if any is fatal. The
 * token is opened (found by label, its keys compared with the policy) but never logged in to.
 */
async function checkOnly(config: ServeConfig): Promise<number> {
  const { policy, findings } = await startupFindings(config);
  const state = stateFileFinding(config);
  if (state) findings.push(state);
  findings.push(...await tokenFindings(config, policy));
  for (const f of findings) console.error(findingLine(f));
  const fatal = findings.filter((f) => f.fatal).length;
  if (fatal > 0) {
    console.error(`configuration NOT OK: ${fatal} fatal finding(s) above; no login attempted`);
    return EXIT.failed;
  }
  const { tokenLabel, modulePath } = config.token;
  const size = policy
    ? ` (${policy.current.size} of at most ${config.policy.maxGrants} grants, ${policy.fileBytes} bytes)`
    : "";
  console.error(
    `svcd: check: options, open-file limit, socket, policy${size}, folders, refusal state and ` +
      `credential svc-pin are fine; token '${tokenLabel}' found through ${modulePath}; ` +
      `authenticated socket served by ${servedBy(config)}; no login attempted`,
  );
  console.log("configuration OK");
  return EXIT.ok;
}

function findingLine(f: Finding): string {
  return `svcd: check: ${f.fatal ? "FATAL" : "warning"}: ${f.message}`;
}
