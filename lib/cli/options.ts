/**
 * The command line's documentation as data: every command group (serve, token, ca, audit, client)
 * describes its commands and options once, in a {@link CommandGroup}; `--help` and the man pages
 * (packaging/man.ts) are both rendered from it, and the parser's option table is derived from it,
 * so what is parsed, what `--help` prints and what the man page says cannot disagree. Options read
 * with a type per option are declared as an option table (option_table.ts), those several groups
 * take once (shared_options.ts).
 *
 * @example
 * ```ts
 * const options: CliOption[] = [
 *   { flag: "out", value: "FILE", help: "write there", group: "output" },
 *   { flag: "force", help: "overwrite" },
 * ];
 * parseArgsOptions(options); // { out: { type: "string" }, force: { type: "boolean" }, … }
 * console.log(formatOptions(options, [{ id: "output", title: "output" }]));
 * ```
 */

/** The widest line a help text may have. */
export const HELP_WIDTH = 80;
/** Where an option's description starts in `--help`. */
const DESCRIPTION_COLUMN = 28;

/** One option of a command group: how it is spelled, what it takes, what it does. */
export interface CliOption {
  /** The name without dashes. */
  flag: string;
  /** Placeholder of its value (PATH, FILE, N, LABEL…); absent for a switch. */
  value?: string;
  help: string;
  /** The value when the option is not given, as the reader should see it. */
  default?: string;
  /** Which heading of its group's option list it is under (a {@link OptionGroup} id). */
  group?: string;
  /** May be given more than once. */
  multiple?: boolean;
  required?: boolean;
  /** Commands of the group it applies to; absent: every command. */
  commands?: readonly string[];
  /** A one-letter alias (only -h, for --help). */
  short?: string;
}

/** A heading in an option list. */
export interface OptionGroup {
  id: string;
  title: string;
}

/**
 * A group's headings, in order, from their ids and titles.
 *
 * @example
 * ```ts
 * headings({ log: "what is checked", keys: "token and keys" });
 * // [{ id: "log", title: "what is checked" }, { id: "keys", title: "token and keys" }]
 * ```
 */
export function headings<const R extends Record<string, string>>(
  titles: R,
): Array<{ id: keyof R & string; title: string }> {
  return Object.entries(titles).map(([id, title]) => ({ id, title }));
}

/** The headings of a group whose options are either one command's or every command's. */
export const COMMAND_AND_COMMON = headings({
  command: "command options",
  common: "common options",
});

/** One command of a group (`svcd token keygen`). */
export interface CommandSpec {
  name: string;
  /** What follows `svcd GROUP NAME` in the usage line: its arguments and options. */
  synopsis: string;
  /** One line for the group's command list. */
  summary: string;
  /** Paragraphs for the command's own help and its man page section. */
  description?: string;
}

/** A command group: what `svcd GROUP --help` and svcd-GROUP(8) show. */
export interface CommandGroup {
  /** "serve", "token", "ca", "audit", "client". */
  name: string;
  /** The man page's NAME line: what the group is for. */
  summary: string;
  /** The usage lines, without "usage: ". */
  usage: string[];
  /** Paragraphs after the usage line. */
  description?: string;
  commands: readonly CommandSpec[];
  options: readonly CliOption[];
  groups: readonly OptionGroup[];
  /** Paragraphs after the options (files, environment, examples: indented lines stay as they are). */
  notes?: string;
}

/** The node:util parseArgs option table of `options` (plus --help/-h). */
export function parseArgsOptions(
  options: readonly CliOption[],
): Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> {
  const table: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> =
    { help: { type: "boolean", short: "h" } };
  for (const o of options) {
    table[o.flag] = {
      type: o.value === undefined ? "boolean" : "string",
      ...(o.multiple ? { multiple: true } : {}),
      ...(o.short ? { short: o.short } : {}),
    };
  }
  return table;
}

/** "--flag VALUE" as the help shows it. */
export function optionTerm(o: CliOption): string {
  return o.value === undefined ? `--${o.flag}` : `--${o.flag} ${o.value}`;
}

/** The option's description with its default or "(required)". */
export function optionText(o: CliOption): string {
  if (o.required) return `${o.help} (required)`;
  if (o.default !== undefined) return `${o.help} (default ${o.default})`;
  return o.help;
}

/** Words of `text` in lines of at most `width` columns, every line after the first indented. */
export function wrap(text: string, width: number, indent = 0, firstIndent = indent): string[] {
  const lines: string[] = [];
  let line = " ".repeat(firstIndent);
  let empty = true;
  for (const word of text.split(/[ \t\n]+/).filter((w) => w !== "")) {
    if (!empty && line.length + 1 + word.length > width) {
      lines.push(line);
      line = " ".repeat(indent);
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines;
}

/**
 * Paragraphs (separated by blank lines) wrapped to the help width; a line that starts with spaces
 * (an example command) is kept as it is.
 */
export function paragraphs(text: string, indent = 0): string {
  return text.trim().split(/\n\s*\n/).map((block) =>
    /^ /.test(block)
      ? block.split("\n").map((l) => `${" ".repeat(indent)}${l}`).join("\n")
      : wrap(block, HELP_WIDTH, indent).join("\n")
  ).join("\n\n");
}

/** One option as `--help` lines: term, then the description from column 28. */
function optionLines(o: CliOption): string[] {
  const term = `  ${optionTerm(o)}`;
  const text = optionText(o);
  if (term.length <= DESCRIPTION_COLUMN - 2) {
    const lines = wrap(text, HELP_WIDTH, DESCRIPTION_COLUMN, DESCRIPTION_COLUMN);
    lines[0] = term.padEnd(DESCRIPTION_COLUMN) + lines[0].trimStart();
    return lines;
  }
  return [term, ...wrap(text, HELP_WIDTH, DESCRIPTION_COLUMN)];
}

/**
 * The options under their headings, in the order of `groups`, then those without a known group
 * under `otherTitle`; a heading without options is left out.
 */
export function optionSections(
  options: readonly CliOption[],
  groups: readonly OptionGroup[],
  otherTitle: string,
): Array<{ title: string; options: CliOption[] }> {
  const known = new Set(groups.map((g) => g.id));
  return [...groups, { id: "", title: otherTitle }]
    .map((g) => ({
      title: g.title,
      options: options.filter((o) => g.id === "" ? !known.has(o.group ?? "") : o.group === g.id),
    }))
    .filter((s) => s.options.length > 0);
}

/**
 * The options under their headings (see {@link optionSections}); each heading is "title:" on its
 * own line.
 */
export function formatOptions(
  options: readonly CliOption[],
  groups: readonly OptionGroup[],
): string {
  return optionSections(options, groups, "options")
    .map((s) => `${s.title}:\n${s.options.flatMap(optionLines).join("\n")}`)
    .join("\n\n");
}

/** The options that apply to `command` (all of them without one). */
export function optionsOf(group: CommandGroup, command?: string): CliOption[] {
  return group.options.filter((o) =>
    command === undefined || o.commands === undefined || o.commands.includes(command)
  );
}

/** `svcd GROUP --help`: usage, description, each command with its synopsis, every option. */
export function groupHelp(group: CommandGroup): string {
  const parts = [usageBlock(group.usage)];
  if (group.description) parts.push(paragraphs(group.description));
  if (group.commands.length > 0) {
    parts.push(
      `commands:\n${
        group.commands.map((c) =>
          [
            ...wrapSynopsis(`${c.name} ${c.synopsis}`.trim(), 8, 2),
            ...wrap(c.summary, HELP_WIDTH, 8),
          ].join("\n")
        ).join("\n")
      }`,
    );
    if (group.commands.some((c) => c.description)) {
      parts.push(`Each command has --help: svcd ${group.name} COMMAND --help.`);
    }
  }
  parts.push(formatOptions(group.options, group.groups));
  if (group.notes) parts.push(paragraphs(group.notes));
  return parts.join("\n\n") + "\n";
}

/** `svcd GROUP COMMAND --help`: its usage and description, and the options that apply to it. */
export function commandHelp(group: CommandGroup, name: string): string {
  const command = group.commands.find((c) => c.name === name);
  if (!command) throw new Error(`no command '${name}' in svcd ${group.name}`);
  const parts = [usageBlock([`svcd ${group.name} ${command.name} ${command.synopsis}`.trim()])];
  parts.push(paragraphs(command.description ?? command.summary));
  parts.push(formatOptions(optionsOf(group, name), group.groups));
  return parts.join("\n\n") + "\n";
}

function usageBlock(usage: readonly string[]): string {
  return usage.flatMap((u, i) => {
    const lines = wrapSynopsis(u, 13, 7);
    if (i === 0) lines[0] = `usage: ${lines[0].trimStart()}`;
    return lines;
  }).join("\n");
}

/** The first option given in `values` that does not apply to `command`, if any. */
export function strayOption(
  group: CommandGroup,
  command: string,
  values: Record<string, unknown>,
): string | undefined {
  const applies = new Set(optionsOf(group, command).map((o) => o.flag));
  return Object.keys(values).find((flag) =>
    flag !== "help" && values[flag] !== undefined && !applies.has(flag)
  );
}

/** A synopsis wrapped without breaking "[--flag VALUE]" or "--flag VALUE" apart. */
function wrapSynopsis(text: string, indent: number, firstIndent: number): string[] {
  const glue = (part: string) => part.replaceAll(" ", "\u00a0");
  const glued = text.replace(/\[[^\[\]]*\]|--[a-z0-9-]+ [A-Z]+/g, glue);
  return wrap(glued, HELP_WIDTH, indent, firstIndent).map((l) => l.replaceAll("\u00a0", " "));
}
