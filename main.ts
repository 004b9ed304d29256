/**
 * svcd — the command line. Parses the first word and hands the rest to the responsibility that owns
 * it; nothing else lives here. A new command is one entry in COMMANDS (its usage line comes from it).
 *
 * @example
 * ```sh
 * deno task svcd serve --socket /run/svcd/auth.sock --proxy-uid 33 --policy /etc/svcd/policy
 * deno task svcd token selftest --token svcd
 * ```
 */
import { runTokenCommand } from "./lib/token_admin/cli.ts";
import { runAuditCommand } from "./lib/audit/cli.ts";
import { runServeCommand } from "./lib/server/daemon/cli.ts";
import { EXIT, EXIT_CODES } from "./lib/cli/exit.ts";
import { HELP_WIDTH, wrap } from "./lib/cli/options.ts";
import pkg from "./package.json" with { type: "json" };

/** A command of `svcd`: its names, usage line and what it is for. */
export interface Command {
  names: string[];
  synopsis: string;
  help: string;
  run(args: string[]): Promise<number>;
}

/** The commands of `svcd`, as `svcd --help` and svcd(8) list them. */
export const COMMANDS: Command[] = [
  {
    names: ["serve"],
    synopsis: "serve [options]",
    help: "run the daemon (see: svcd serve --help)",
    run: (args) => runServeCommand(args, { checkOnly: false }),
  },
  {
    names: ["--check-config", "check-config"],
    synopsis: "--check-config [options]",
    help: "the daemon's start-up checks without serving and without a login",
    run: (args) => runServeCommand(args, { checkOnly: true }),
  },
  {
    names: ["token"],
    synopsis: "token init|keygen|list|selftest|pubkey|rotate-pin [options]",
    help: "operator tooling for the token (see: svcd token --help)",
    run: runTokenCommand,
  },
  {
    names: ["audit"],
    synopsis: "audit verify [options]",
    help: "check the audit log chain (see: svcd audit --help)",
    run: runAuditCommand,
  },
  {
    names: ["client"],
    synopsis: "client keys|sign|verify [options]",
    help: "sign and verify files through svcd's proxy with a client certificate " +
      "(see: svcd client --help)",
    // Loaded on demand: a client host never loads the daemon's code paths it does not run.
    run: async (args) => (await import("./lib/client/cli.ts")).runClientCommand(args),
  },
  {
    names: ["ca"],
    synopsis: "ca init|urls|issue|certify|responder|revoke|crl|publish|status|list [options]",
    help: "the CA over a token key: client, token key and OCSP responder certificates, " +
      "revocation, CRL " +
      "(see: svcd ca --help)",
    // Loaded on demand: the CA tool pulls in pkijs, which the daemon never needs.
    run: async (args) => (await import("./lib/ca/cli.ts")).runCaCommand(args),
  },
];

/** The exit codes as `svcd --help` lists them: code, then its cause wrapped beside it. */
export function exitCodeLines(): string[] {
  return EXIT_CODES.flatMap(({ code, cause }) => {
    const lines = wrap(cause, HELP_WIDTH, 7, 7);
    lines[0] = `  ${String(code).padEnd(4)} ${lines[0].trimStart()}`;
    return lines;
  });
}

/** `svcd --help`: every command with its synopsis, then the exit codes. */
export function usage(): string {
  const commands = COMMANDS.flatMap((c) => [
    `  ${c.synopsis}`,
    ...wrap(c.help, HELP_WIDTH, 6),
  ]);
  return [
    "usage: svcd COMMAND [options]",
    "",
    "commands:",
    ...commands,
    "  --version",
    "      print the version",
    "",
    "exit codes (the same in every command):",
    ...exitCodeLines(),
    "",
  ].join("\n");
}

async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const command = COMMANDS.find((c) => c.names.includes(name));
  if (command) return await command.run(rest);
  switch (name) {
    case "--version":
    case "version":
      console.log(`svcd ${pkg.version} (deno ${Deno.version.deno})`);
      return EXIT.ok;
    case "-h":
    case "--help":
    case "help":
      console.log(usage());
      return EXIT.ok;
    default:
      console.error(
        `svcd: ${name === undefined ? "no command" : `unknown command '${name}'`}\n\n${usage()}`,
      );
      return EXIT.usage;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
