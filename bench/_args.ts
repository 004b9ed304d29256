/**
 * The command line of every bench script, in one shape: a script describes what it measures, its
 * options (node:util parseArgs options with their defaults, each with a line of help and, for a
 * value, the check it must pass) and examples. `--help` prints that as a usage text and exits 0;
 * an unknown option, a missing or a bad value prints what was wrong and the usage and exits 2.
 * Scripts parse before any work, so `--help` or a typo never starts a token, a daemon or a load.
 *
 * @example
 * ```ts
 * import { benchArgs, count, positiveNumber } from "./_args.ts";
 * const { values } = benchArgs({
 *   url: import.meta.url,
 *   measures: "What one run measures, in a sentence or two.",
 *   options: {
 *     seconds: { type: "string", default: "3", check: positiveNumber, help: "seconds per figure" },
 *     rounds: { type: "string", default: "2", check: count, help: "rounds, interleaved" },
 *   },
 *   examples: ["deno run -A bench/x.ts --seconds 5"],
 * });
 * const seconds = Number(values.seconds);
 * ```
 */
import { parseArgs } from "node:util";
import { EXIT } from "../lib/cli/exit.ts";

/** What a value must be: said in words for the error, and tested. */
export interface ValueCheck {
  /** e.g. "a whole number ≥ 1", read as "--rounds must be a whole number ≥ 1". */
  what: string;
  /** The value's placeholder in the usage (N, S, NAME…). */
  placeholder: string;
  /** The values it takes, when they are a closed set: the usage lists them. */
  choices?: readonly string[];
  ok(value: string): boolean;
}

/** One option: as node:util parseArgs takes it, with its help and its value's check. */
export interface BenchOption {
  type: "string" | "boolean";
  multiple?: boolean;
  /** The value when the option is absent; the usage shows it unless it is empty. */
  default?: string | boolean | readonly string[];
  /** The value's placeholder in the usage, when the check's is not the right word. */
  value?: string;
  /** Every given value must pass it (defaults are the script's own and are not checked). */
  check?: ValueCheck;
  help: string;
}

/** What a bench script tells its command line. */
export interface Bench<O extends Record<string, BenchOption>> {
  /** The script's `import.meta.url`: the usage names the script from it. */
  url: string;
  /** What the bench measures, for the top of the usage. */
  measures: string;
  options: O;
  /** Arguments that are not options (e.g. checkouts NAME=DIR); none are taken without it. */
  positionals?: { value: string; help: string };
  /**
   * The command every option this script does not know goes on to (e.g. "svcd serve"): those are
   * returned in `rest`, unchecked here, instead of refused.
   */
  passOn?: string;
  examples: readonly string[];
}

type ValueOf<T extends BenchOption> = T["type"] extends "boolean" ? boolean
  : T["multiple"] extends true ? string[]
  : string;

/** The parsed values: an option with a default always has one. */
export type BenchValues<O extends Record<string, BenchOption>> = {
  [K in keyof O]: O[K] extends { default: unknown } ? ValueOf<O[K]> : ValueOf<O[K]> | undefined;
};

/** A parsed command line. */
export interface BenchArgs<O extends Record<string, BenchOption>> {
  /** `--help` (or `-h`) was given: nothing else was checked. */
  help: boolean;
  values: BenchValues<O>;
  positionals: string[];
  /** With `passOn`: the arguments that are not this script's, in their order. */
  rest: string[];
}

/** A command line this script cannot run: the message says what was wrong. */
export class BenchUsageError extends Error {
  override name = "BenchUsageError";
}

/** A whole number ≥ 1 (rounds, calls, concurrency…). */
export const count: ValueCheck = {
  what: "a whole number ≥ 1",
  placeholder: "N",
  ok: (v) => /^[1-9][0-9]*$/.test(v),
};

/** A whole number ≥ 0 (a thread count where 0 means none). */
export const wholeNumber: ValueCheck = {
  what: "a whole number ≥ 0",
  placeholder: "N",
  ok: (v) => /^(0|[1-9][0-9]*)$/.test(v),
};

/** A number > 0, fractions allowed (seconds, sizes). */
export const positiveNumber: ValueCheck = {
  what: "a number > 0",
  placeholder: "S",
  ok: (v) => /^[0-9]*\.?[0-9]+$/.test(v) && Number(v) > 0,
};

/** A number ≥ 0, fractions allowed (a warm-up that may be none). */
export const nonNegativeNumber: ValueCheck = {
  what: "a number ≥ 0",
  placeholder: "S",
  ok: (v) => /^[0-9]*\.?[0-9]+$/.test(v),
};

/** One of a closed set of names. */
export function oneOf(names: readonly string[]): ValueCheck {
  return {
    what: `one of ${names.join(", ")}`,
    placeholder: "NAME",
    choices: names,
    ok: (v) => names.includes(v),
  };
}

/** A comma-separated list, each item passing `item`. */
export function listOf(item: ValueCheck): ValueCheck {
  return {
    what: `a comma-separated list, each ${item.what}`,
    placeholder: `${item.placeholder},…`,
    choices: item.choices,
    ok: (v) => v.split(",").every((x) => item.ok(x)),
  };
}

/** `bench/NAME.ts` of a script's `import.meta.url`. */
export function scriptName(url: string): string {
  return `bench/${url.slice(url.lastIndexOf("/") + 1)}`;
}

const WIDTH = 100;

/** Words of `text` in lines of at most WIDTH columns, each after `indent`. */
function wrap(text: string, indent: string, firstIndent = indent): string[] {
  const lines: string[] = [];
  let line = firstIndent;
  let empty = true;
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (!empty && line.length + 1 + word.length > WIDTH) {
      lines.push(line);
      line = indent;
      empty = true;
    }
    line += (empty ? "" : " ") + word;
    empty = false;
  }
  lines.push(line);
  return lines;
}

function optionName(name: string, o: BenchOption): string {
  if (o.type === "boolean") return `--${name}`;
  return `--${name} ${o.value ?? o.check?.placeholder ?? "VALUE"}`;
}

/** The option's help with the values it takes, when they are a closed set, and its default. */
function optionHelp(o: BenchOption): string {
  const choices = o.check?.choices;
  const listed = choices
    ? `: ${choices.slice(0, -1).join(", ")}${choices.length > 1 ? " or " : ""}${choices.at(-1)}`
    : "";
  return o.help + listed + defaultNote(o);
}

function defaultNote(o: BenchOption): string {
  const d = o.default;
  if (d === undefined || d === false || d === "" || (Array.isArray(d) && d.length === 0)) return "";
  return ` (default: ${Array.isArray(d) ? d.join(" ") : d})`;
}

/** The usage text `--help` prints and an error ends with. */
export function usage<O extends Record<string, BenchOption>>(bench: Bench<O>): string {
  const script = scriptName(bench.url);
  const rows: Array<[string, string]> = [
    ...Object.entries(bench.options).map(([name, o]): [string, string] => [
      optionName(name, o),
      optionHelp(o),
    ]),
    ["--help", "print this text and exit"],
  ];
  const column = Math.max(...rows.map(([n]) => n.length)) + 4;
  const table = rows.flatMap(([name, help]) =>
    name.length + 2 >= column
      ? [`  ${name}`, ...wrap(help, " ".repeat(column))]
      : wrap(help, " ".repeat(column), `  ${name.padEnd(column - 2)}`)
  );
  const positionals = bench.positionals ? ` ${bench.positionals.value}` : "";
  return [
    `usage: deno run -A ${script} [options]${positionals}`,
    "",
    ...wrap(bench.measures, ""),
    ...(bench.positionals
      ? [
        "",
        "arguments:",
        ...wrap(bench.positionals.help, "    ", `  ${bench.positionals.value}: `),
      ]
      : []),
    "",
    "options:",
    ...table,
    ...(bench.passOn ? ["", ...wrap(`Every other option goes to ${bench.passOn}.`, "")] : []),
    "",
    bench.examples.length > 1 ? "examples:" : "example:",
    ...bench.examples.map((e) => `  ${e}`),
  ].join("\n");
}

/** The error of a value that fails its option's check. */
function badValue(name: string, o: BenchOption, values: unknown): string | undefined {
  if (!o.check || values === undefined) return undefined;
  for (const v of Array.isArray(values) ? values : [values]) {
    if (typeof v === "string" && !o.check.ok(v)) {
      return `--${name} must be ${o.check.what}, not '${v}'`;
    }
  }
  return undefined;
}

/** The parseArgs options of `bench`, without the help and checks it does not know. */
function parseArgsOptions(options: Record<string, BenchOption>) {
  const out: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string }> = {
    help: { type: "boolean", short: "h" },
  };
  for (const [name, o] of Object.entries(options)) {
    if (name === "help") throw new Error("--help is every bench script's own option");
    out[name] = { type: o.type, ...(o.multiple ? { multiple: true } : {}) };
  }
  return out;
}

/**
 * Splits a command line into this script's options and the rest (`passOn`): parseArgs without
 * strictness gives one token per argument it does not know, and a known option's value with it.
 */
function ownAndRest(args: string[], options: ReturnType<typeof parseArgsOptions>) {
  const { tokens } = parseArgs({ args, options, strict: false, tokens: true });
  const own: string[] = [];
  const rest: string[] = [];
  const taken = new Set<number>();
  for (const t of tokens) {
    if (t.kind !== "option" || !(t.name in options)) continue;
    const takesValue = options[t.name].type === "string";
    if (takesValue && t.value === undefined) {
      throw new BenchUsageError(`option '--${t.name} <value>' needs a value`);
    }
    for (const i of takesValue && !t.inlineValue ? [t.index, t.index + 1] : [t.index]) {
      taken.add(i);
      own.push(args[i]);
    }
  }
  args.forEach((a, i) => taken.has(i) || rest.push(a));
  return { own, rest };
}

/**
 * Parses `args` for `bench`; throws {@link BenchUsageError} saying what was wrong. With `--help`
 * nothing else is checked and `help` is true.
 *
 * @example
 * ```ts
 * import { type Bench, type BenchOption, parseBenchArgs } from "./_args.ts";
 * declare const bench: Bench<Record<string, BenchOption>>;
 * const { help, values } = parseBenchArgs(bench, ["--rounds", "3"]);
 * ```
 */
export function parseBenchArgs<const O extends Record<string, BenchOption>>(
  bench: Bench<O>,
  args: string[],
): BenchArgs<O> {
  const options = parseArgsOptions(bench.options);
  const split = bench.passOn ? ownAndRest(args, options) : { own: args, rest: [] };
  let parsed;
  try {
    parsed = parseArgs({
      args: split.own,
      options,
      strict: true,
      allowPositionals: bench.positionals !== undefined,
    });
  } catch (err) {
    if (args.includes("--help") || args.includes("-h")) parsed = undefined;
    else throw new BenchUsageError((err as Error).message);
  }
  const given = (parsed?.values ?? {}) as Record<string, unknown>;
  if (!parsed || given.help) {
    return { help: true, values: {} as BenchValues<O>, positionals: [], rest: [] };
  }
  const values: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(bench.options)) {
    const problem = badValue(name, o, given[name]);
    if (problem) throw new BenchUsageError(problem);
    values[name] = given[name] ?? (Array.isArray(o.default) ? [...o.default] : o.default);
  }
  return {
    help: false,
    values: values as BenchValues<O>,
    positionals: parsed.positionals,
    rest: split.rest,
  };
}

/** Prints `problem` and the usage on stderr and exits 2. */
function exitWithUsage<O extends Record<string, BenchOption>>(
  bench: Bench<O>,
  problem: string,
): never {
  console.error(`${scriptName(bench.url)}: ${problem}\n\n${usage(bench)}`);
  Deno.exit(EXIT.usage);
}

/**
 * The command line of the running script (`Deno.args`): on `--help` prints the usage and exits 0,
 * on a usage error prints what was wrong and the usage and exits 2. `exitWithUsage` does the same
 * for what the script checks itself once the options are parsed (a required option, a pair that
 * excludes each other).
 *
 * @example
 * ```ts
 * import { benchArgs, count } from "./_args.ts";
 * const { values, exitWithUsage } = benchArgs({
 *   url: import.meta.url,
 *   measures: "Calls per second.",
 *   options: { calls: { type: "string", default: "1000", check: count, help: "calls per round" } },
 *   examples: ["deno run -A bench/x.ts --calls 5000"],
 * });
 * if (Number(values.calls) > 1e9) exitWithUsage("--calls: at most 1e9");
 * ```
 */
export function benchArgs<const O extends Record<string, BenchOption>>(
  bench: Bench<O>,
  args: string[] = Deno.args,
): BenchArgs<O> & { exitWithUsage(problem: string): never } {
  let parsed: BenchArgs<O>;
  try {
    parsed = parseBenchArgs(bench, args);
  } catch (err) {
    if (!(err instanceof BenchUsageError)) throw err;
    exitWithUsage(bench, err.message);
  }
  if (parsed.help) {
    console.log(usage(bench));
    Deno.exit(EXIT.ok);
  }
  return { ...parsed, exitWithUsage: (problem) => exitWithUsage(bench, problem) };
}

/** An option that takes one value, checked by `check`, with `value` when absent. */
export function valueOption<const D extends string>(
  check: ValueCheck,
  value: D,
  help: string,
): { type: "string"; default: D; check: ValueCheck; help: string } {
  return { type: "string", default: value, check, help };
}
