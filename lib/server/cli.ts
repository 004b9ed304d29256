/**
 * `svcd serve` and `svcd --check-config`: parse the options, then run the daemon or only its
 * start-up checks. Every failure prints what was wrong and what to do, and exits non-zero.
 *
 * @example
 * ```ts
 * Deno.exit(await runServeCommand(["--proxy-uid", "33"], { checkOnly: true }));
 * ```
 */
import { ConfigError, parseServeArgs, serveHelp } from "./config.ts";
import { checkConfig, checkStateFile, flushLog, log, runDaemon, StartupError } from "./daemon.ts";
import { CredentialError, Token } from "../token/mod.ts";
import { MAX_POLICY_BYTES } from "../policy/mod.ts";

/** Runs `serve` (checkOnly false) or `--check-config` (checkOnly true); returns the exit code. */
export async function runServeCommand(
  args: string[],
  opts: { checkOnly: boolean },
): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(serveHelp());
    return 0;
  }
  try {
    const config = parseServeArgs(args);
    if (!opts.checkOnly) return await runDaemon(config);
    const policy = await checkConfig(config);
    checkStateFile(config);
    log(
      `check: options, open-file limit, policy (${policy.current.size} grant(s), ` +
        `${policy.fileBytes} of at most ${MAX_POLICY_BYTES} bytes), folders and refusal state are fine`,
    );
    const pin = Token.readPinCredential(config.token.credentialsDir);
    const pinLength = pin.length;
    pin.fill(0);
    // No login here: every failed login counts toward the five-failure lockout of the role.
    log(`check: credential svc-pin present (${pinLength} bytes); no login attempted`);
    const { modulePath, tokenLabel } = config.token;
    const token = Token.open({ modulePath, tokenLabel });
    log(`check: token '${tokenLabel}' found through ${modulePath}`);
    token.close();
    console.log("configuration OK");
    return 0;
  } catch (err) {
    if (
      err instanceof ConfigError || err instanceof StartupError || err instanceof CredentialError
    ) {
      console.error(`svcd: ${err.message}`);
      return err instanceof ConfigError ? 2 : 1;
    }
    console.error(`svcd: ${(err as Error).message}`);
    return 1;
  } finally {
    flushLog();
  }
}
