/**
 * The steps every command group (token, ca, audit, client) takes before its command runs: the
 * command word, `--help` of the group or of the command, the options parsed strictly against the
 * group's one table, and an option that does not apply to the command refused.
 *
 * @example
 * ```ts
 * import { parseCommandLine } from "./command_line.ts";
 * import type { CommandGroup } from "./options.ts";
 * import { EXIT } from "./exit.ts";
 * declare const TOKEN_COMMAND: CommandGroup;
 * const line = parseCommandLine(TOKEN_COMMAND, ["list"], {
 *   allowPositionals: false,
 *   usageError: (message) => (console.error(message), EXIT.usage),
 * });
 * if ("exit" in line) Deno.exit(line.exit);
 * ```
 */
import { parseArgs } from "node:util";
import {
  type CommandGroup,
  commandHelp,
  groupHelp,
  parseArgsOptions,
  strayOption,
} from "./options.ts";
import { EXIT } from "./exit.ts";

/** Parsed option values, by flag without dashes. */
export type OptionValues = Record<string, string | string[] | boolean | undefined>;

/** A command to run with its options, or the exit code of a command line that is done. */
export type CommandLine =
  | { command: string; values: OptionValues; positionals: string[] }
  | { exit: number };

/**
 * Parses `args` (`COMMAND [options] [ARG…]`) of `group`. A help request is printed to stdout
 * (exit 0); a usage mistake goes to `usageError` with the command once it is known, whose return
 * is the exit code.
 */
export function parseCommandLine(
  group: CommandGroup,
  args: string[],
  how: {
    allowPositionals: boolean;
    usageError: (message: string, command?: string) => number;
  },
): CommandLine {
  const [command, ...rest] = args;
  if (command === undefined) return { exit: how.usageError("no command") };
  if (command === "-h" || command === "--help" || command === "help") {
    console.log(groupHelp(group));
    return { exit: EXIT.ok };
  }
  if (!group.commands.some((c) => c.name === command)) {
    return { exit: how.usageError(`unknown command '${command}'`) };
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      strict: true,
      allowPositionals: how.allowPositionals,
      options: parseArgsOptions(group.options),
    });
  } catch (err) {
    return { exit: how.usageError((err as Error).message, command) };
  }
  const values = parsed.values as OptionValues;
  if (values.help) {
    console.log(commandHelp(group, command));
    return { exit: EXIT.ok };
  }
  const stray = strayOption(group, command, values);
  if (stray) return { exit: how.usageError(`--${stray} does not apply to '${command}'`, command) };
  return { command, values, positionals: parsed.positionals };
}
