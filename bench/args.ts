/**
 * The command line of a bench: `--help` prints its text and exits 0 before anything starts; an
 * option it does not know, or one without its value, is a usage error (exit 2, the reason on
 * stderr). Benches check their values' ranges themselves with {@link usageError}.
 *
 * @example
 * ```ts
 * const values = benchArgs("bench/x.ts", "bench/x.ts — …\n  --seconds S  …", {
 *   seconds: { type: "string", default: "5" },
 * });
 * if (!(Number(values.seconds) > 0)) usageError("bench/x.ts", "--seconds must be positive");
 * ```
 */
import { parseArgs, type ParseArgsOptionsConfig } from "node:util";

/** Parses Deno.args with `options`; `--help` prints `help` and exits 0 before anything starts. */
export function benchArgs<T extends ParseArgsOptionsConfig>(
  name: string,
  help: string,
  options: T,
): ReturnType<typeof parseArgs<{ args: string[]; options: T }>>["values"] {
  if (Deno.args.includes("--help")) {
    console.log(help);
    Deno.exit(0);
  }
  try {
    return parseArgs({ args: Deno.args, options }).values;
  } catch (err) {
    usageError(name, (err as Error).message);
  }
}

/** Says what is wrong with the command line and exits 2. */
export function usageError(name: string, message: string): never {
  console.error(`${name}: ${message} (see --help)`);
  Deno.exit(2);
}
