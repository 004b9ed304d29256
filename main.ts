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
import { runTokenCommand } from "./lib/token/cli.ts";
import { runAuditCommand } from "./lib/audit/cli.ts";
import { runServeCommand } from "./lib/server/daemon/cli.ts";
import pkg from "./package.json" with { type: "json" };

interface Command {
  names: string[];
  synopsis: string;
  help: string;
  run(args: string[]): Promise<number>;
}

const COMMANDS: Command[] = [
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
    synopsis: "ca init|issue|responder|revoke|crl|status|list [options]",
    help: "the CA over a token key: client and OCSP responder certificates, revocation, CRL " +
      "(see: svcd ca --help)",
    // Loaded on demand: the CA tool pulls in pkijs, which the daemon never needs.
    run: async (args) => (await import("./lib/ca/cli.ts")).runCaCommand(args),
  },
];

const USAGE = `usage: svcd <command> [options]

commands:
${
  COMMANDS.map((c) =>
    c.synopsis.length <= 28
      ? `  ${c.synopsis.padEnd(28)} ${c.help}`
      : `  ${c.synopsis}\n  ${"".padEnd(28)} ${c.help}`
  ).join("\n")
}
  --version                    print the version

exit codes: 0 done, 1 failed (the message says why and what to do), 2 usage;
  serve: 70 the public listener failed, 75 the token died (the service manager restarts it);
  token keygen: 3 a requested key type is not offered by the module (the others were made).
`;

async function main(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const command = COMMANDS.find((c) => c.names.includes(name));
  if (command) return await command.run(rest);
  switch (name) {
    case "--version":
    case "version":
      console.log(`svcd ${pkg.version} (deno ${Deno.version.deno})`);
      return 0;
    case undefined:
    case "-h":
    case "--help":
    case "help":
      console.log(USAGE);
      return name === undefined ? 2 : 0;
    default:
      console.error(`svcd: unknown command '${name}'\n\n${USAGE}`);
      return 2;
  }
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
