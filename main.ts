/**
 * svcd — the command line. Parses the first word and hands the rest to the responsibility that owns
 * it; nothing else lives here.
 *
 * @example
 * ```sh
 * deno task svcd serve --socket /run/svcd/auth.sock --proxy-uid 33 --policy /etc/svcd/policy
 * deno task svcd token selftest --token svcd
 * ```
 */
import { runTokenCommand } from "./lib/token/cli.ts";
import { runAuditCommand } from "./lib/audit/cli.ts";
import { runServeCommand } from "./lib/server/cli.ts";

const USAGE = `usage: svcd <command> [options]

commands:
  serve [options]            run the daemon (see: svcd serve --help)
  --check-config [options]   validate the daemon's options, policy and token without serving
  token init|keygen|list|selftest [options]
                             operator tooling for the token (see: svcd token --help)
  audit verify [options]     check the audit log chain (see: svcd audit --help)
  ca init|issue|responder|revoke|status|list [options]
                             the CA over a token key: client and OCSP responder certificates,
                             revocation (see: svcd ca --help)
`;

async function main(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  switch (command) {
    case "serve":
      return await runServeCommand(rest, { checkOnly: false });
    case "--check-config":
    case "check-config":
      return await runServeCommand(rest, { checkOnly: true });
    case "token":
      return await runTokenCommand(rest);
    case "audit":
      return await runAuditCommand(rest);
    case "ca":
      // Loaded on demand: the CA tool pulls in pkijs, which the daemon never needs.
      return await (await import("./lib/ca/cli.ts")).runCaCommand(rest);
    case undefined:
    case "-h":
    case "--help":
    case "help":
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`svcd: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
