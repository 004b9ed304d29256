/**
 * The steps every command group (serve, token, ca, audit, client) takes before its command runs:
 * the command word, `--help` of the group or of the command, the options parsed strictly against
 * the group's one table, and an option that does not apply to the command refused. A group without
 * command words (serve) takes its options straight after its name.
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
  type CliOption,
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
 * `args` parsed strictly against `options` (and --help/-h); throws node:util's error, whose message
 * names the option, on an unknown option or a missing or unwanted value.
 *
 * @example
 * ```ts
 * parseOptions([{ flag: "out", value: "FILE", help: "where" }], ["--out", "x"], false).values;
 * // { out: "x" }
 * ```
 */
export function parseOptions(
  options: readonly CliOption[],
  args: string[],
  allowPositionals: boolean,
): { values: OptionValues; positionals: string[] } {
  const parsed = parseArgs({
    args,
    strict: true,
    allowPositionals,
    options: parseArgsOptions(options),
  });
  return { values: parsed.values as OptionValues, positionals: parsed.positionals };
}

/**
 * Parses `args` (`COMMAND [options] [ARG…]`, or `[options]` for a group without commands) of
 * `group`. A help request is printed to stdout (exit 0); a usage mistake goes to `usageError` with
 * the command once it is known, whose return is the exit code. The command of a group without
 * commands is the group's name.
 */
export function parseCommandLine(
  group: CommandGroup,
  args: string[],
  how: {
    allowPositionals: boolean;
    usageError: (message: string, command?: string) => number;
  },
): CommandLine {
  if (group.commands.length === 0) return parseOptionsLine(group, args, how);
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
    parsed = parseOptions(group.options, rest, how.allowPositionals);
  } catch (err) {
    return { exit: how.usageError((err as Error).message, command) };
  }
  if (parsed.values.help) {
    console.log(commandHelp(group, command));
    return { exit: EXIT.ok };
  }
  const stray = strayOption(group, command, parsed.values);
  if (stray) return { exit: how.usageError(`--${stray} does not apply to '${command}'`, command) };
  return { command, ...parsed };
}

/**
 * A group without command words: `--help` anywhere in the line is answered, even beside a
 * mistake: an operator adds --help to the line that failed, to see what its options take.
 */
function parseOptionsLine(
  group: CommandGroup,
  args: string[],
  how: { allowPositionals: boolean; usageError: (message: string) => number },
): CommandLine {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(groupHelp(group));
    return { exit: EXIT.ok };
  }
  try {
    return { command: group.name, ...parseOptions(group.options, args, how.allowPositionals) };
  } catch (err) {
    return { exit: how.usageError((err as Error).message) };
  }
}
