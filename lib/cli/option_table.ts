/**
 * Options declared as a table keyed by their flag and read through typed accessors: the table's
 * keys type the accessor, so a misspelt flag, or a number read where the table declares text, does
 * not compile. Each value is checked against its declaration when it is read (required, empty, a
 * whole number within bounds), and the table renders as the {@link CliOption}s that `--help`, the
 * man pages and the parser take.
 *
 * @example
 * ```ts
 * import { OptionReader, type OptionTable } from "./option_table.ts";
 * const TABLE = {
 *   workers: { kind: "count", group: "limits", value: "N", fallback: 16, min: 1, help: "workers" },
 *   socket: { kind: "path", group: "sockets", value: "PATH", help: "the socket" },
 * } as const satisfies OptionTable;
 * const options = new OptionReader(TABLE, { workers: "4" }, (_flag, message) => new Error(message));
 * const workers: number = options.get("workers"); // 4
 * const socket: string | undefined = options.get("socket"); // undefined: no default
 * ```
 */
import type { CliOption, OptionGroup } from "./options.ts";
import type { OptionValues } from "./command_line.ts";

/** One option of a table: its kind of value, its default and bounds, and how `--help` shows it. */
export interface OptionSpec<G extends string = string>
  extends Omit<CliOption, "flag" | "default" | "group"> {
  /** "switch": an option without a value (true when given); "count": a whole number. */
  kind: "path" | "text" | "count" | "switch";
  /** The heading `--help` lists it under. */
  group: G;
  /** The value when the option is not given (a number for a count). */
  fallback?: string | number;
  /** The default as `--help` says it, when it is not `fallback` (e.g. another option's value). */
  shownDefault?: string;
  /** Bounds of a count (inclusive); 0 and the largest safe integer without them. */
  min?: number;
  max?: number;
}

/** Options keyed by flag (without dashes). */
export type OptionTable<G extends string = string> = Readonly<Record<string, OptionSpec<G>>>;

/**
 * What reading an option gives: a switch a boolean; a count a number, text a string, either
 * possibly undefined unless the option has a fallback or is required; an option that may be given
 * more than once every value given, in order (its fallback alone when none is).
 */
export type OptionValue<S extends OptionSpec> = S extends { multiple: true } ? string[]
  : S extends { kind: "switch" } ? boolean
  : S extends { kind: "count" }
    ? S extends { fallback: number } | { required: true } ? number : number | undefined
  : S extends { fallback: string } | { required: true } ? string
  : string | undefined;

/**
 * A group's option table, each option under one of `headings` (a heading that is not there does
 * not compile); its values are typed as written, as `as const` would.
 *
 * @example
 * ```ts
 * const HEADINGS = [{ id: "log", title: "what is checked" }] as const;
 * const TABLE = optionTable(HEADINGS, {
 *   checkpoints: { kind: "path", group: "log", help: "collected checkpoints" },
 * });
 * ```
 */
export function optionTable<
  const H extends readonly OptionGroup[],
  const T extends OptionTable<H[number]["id"]>,
>(_headings: H, table: T): T {
  return table;
}

/** The table's options in their order, each with its flag. */
export function optionEntries(table: OptionTable): Array<[string, OptionSpec]> {
  return Object.entries(table);
}

/** An option of a table as `--help`, the man pages and the parser take it. */
export function cliOption(flag: string, spec: OptionSpec): CliOption {
  const { kind, fallback, shownDefault, min: _min, max: _max, ...shown } = spec;
  return {
    ...shown,
    flag,
    value: kind === "switch" ? undefined : spec.value ?? kind.toUpperCase(),
    default: shownDefault ?? (fallback === undefined ? undefined : String(fallback)),
  };
}

/** Every option of `table` as {@link cliOption}, in the table's order. */
export function cliOptions(table: OptionTable): CliOption[] {
  return optionEntries(table).map(([flag, spec]) => cliOption(flag, spec));
}

/**
 * The parsed values of a command line, read through `table`: `get` gives each option's value
 * checked against its declaration, or its fallback. A value that breaks its declaration is
 * reported through `mistake` (its return is thrown), with the option and what to give.
 */
export class OptionReader<T extends OptionTable> {
  constructor(
    private readonly table: T,
    private readonly values: OptionValues,
    private readonly mistake: (flag: string, message: string) => Error,
  ) {}

  /** The option's value, or its fallback when it is not given. */
  get<F extends keyof T & string>(flag: F): OptionValue<T[F]> {
    return this.read(flag, this.table[flag]) as OptionValue<T[F]>;
  }

  /** Whether the command line gives the option (its fallback does not count). */
  isGiven(flag: keyof T & string): boolean {
    return this.values[flag] !== undefined;
  }

  private read(flag: string, spec: OptionSpec): string | string[] | number | boolean | undefined {
    const raw = this.values[flag];
    if (spec.multiple) return this.readAll(flag, spec, raw);
    if (spec.kind === "switch") return raw === true;
    if (typeof raw !== "string") {
      if (spec.required) throw this.mistake(flag, `--${flag} is required: ${spec.help}`);
      return spec.fallback;
    }
    if (raw === "") throw this.mistake(flag, `--${flag} is empty: give ${spec.help}`);
    if (spec.kind !== "count") return raw;
    const n = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : NaN;
    const min = spec.min ?? 0, max = spec.max ?? Number.MAX_SAFE_INTEGER;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw this.mistake(
        flag,
        `--${flag} must be a whole number from ${min} to ${max} (got '${raw}')`,
      );
    }
    return n;
  }

  private readAll(flag: string, spec: OptionSpec, raw: OptionValues[string]): string[] {
    const given = Array.isArray(raw) ? raw : typeof raw === "string" ? [raw] : [];
    if (given.length === 0) {
      if (spec.required) throw this.mistake(flag, `--${flag} is required: ${spec.help}`);
      return spec.fallback === undefined ? [] : [String(spec.fallback)];
    }
    if (given.includes("")) throw this.mistake(flag, `--${flag} is empty: give ${spec.help}`);
    return given;
  }
}
