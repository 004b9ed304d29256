/**
 * Every help text of the command line, with the option table it must list: each command group's
 * `--help` (all its options) and each command's (the options that apply to it), and `svcd --help`.
 *
 * @example
 * ```ts
 * for (const h of helpInvocations()) console.log(h.args.join(" "), h.options.length);
 * ```
 */
import {
  type CliOption,
  type CommandGroup,
  commandHelp,
  groupHelp,
  optionsOf,
} from "../../lib/cli/options.ts";
import { SERVE_COMMAND } from "../../lib/server/daemon/serve_options.ts";
import { TOKEN_COMMAND } from "../../lib/token_admin/cli.ts";
import { CA_COMMAND } from "../../lib/ca/cli.ts";
import { AUDIT_COMMAND } from "../../lib/audit/cli.ts";
import { CLIENT_COMMAND } from "../../lib/client/cli.ts";
import { usage } from "../../main.ts";

/** The command groups, each with its own option table. */
export const GROUPS: readonly CommandGroup[] = [
  SERVE_COMMAND,
  TOKEN_COMMAND,
  CA_COMMAND,
  AUDIT_COMMAND,
  CLIENT_COMMAND,
];

/** One `--help`: the arguments that print it, the options it must list, its text rendered here. */
export interface HelpInvocation {
  args: string[];
  options: readonly CliOption[];
  text: string;
}

/** Every `--help` of svcd: top level, each group (and --check-config), each command. */
export function helpInvocations(): HelpInvocation[] {
  const out: HelpInvocation[] = [{ args: ["--help"], options: [], text: usage() }];
  for (const group of GROUPS) {
    const text = groupHelp(group);
    out.push({ args: [group.name, "--help"], options: group.options, text });
    if (group === SERVE_COMMAND) {
      out.push({ args: ["--check-config", "--help"], options: group.options, text });
    }
    for (const c of group.commands) {
      out.push({
        args: [group.name, c.name, "--help"],
        options: optionsOf(group, c.name),
        text: commandHelp(group, c.name),
      });
    }
  }
  return out;
}
