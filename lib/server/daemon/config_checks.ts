/**
 * The rules of `svcd serve` that span options: one option that needs another, a value bounded by
 * another option's, two options that must name the same file. Each refusal is a
 * {@link ConfigError} that names the option to change and what to give; a value within its own
 * bounds is {@link ServeOptions}' to check.
 *
 * @example
 * ```ts
 * import { readServeOptions } from "./serve_options.ts";
 * const options = readServeOptions({ "proxy-uid": "33", workers: "2", threads: "3" });
 * requestThreads(options, 2); // throws: --threads 3 is more than --workers 2 …
 * ```
 */
import { join, resolve } from "node:path";
import { type BudgetTuning, resolveBudgetTuning, TuningError } from "../../throttle/mod.ts";
import { ConfigError, SERVE_OPTIONS, type ServeOptions } from "./serve_options.ts";

/** A flag of `svcd serve`. */
type ServeFlag = keyof typeof SERVE_OPTIONS;

/** Options that only mean something with --public-socket. */
const PUBLIC_ONLY_FLAGS = [
  "revocation-db",
  "ocsp-label",
  "ocsp-cert",
  "ca-dir",
] as const satisfies readonly ServeFlag[];

/** The option that sets each refusal-budget field (maxEntries has none). */
const BUDGET_FLAGS: Readonly<Record<keyof BudgetTuning, ServeFlag | undefined>> = {
  threshold: "refusal-threshold",
  refillSeconds: "refusal-refill",
  baseDelaySeconds: "refusal-base-delay",
  maxDelaySeconds: "refusal-max-delay",
  maxEntries: undefined,
};

/**
 * --threads: each thread runs at least one of the --workers handlers (they are split over the
 * threads so that their total stays --workers), so there cannot be more threads than workers: a
 * larger --threads is refused, the default is lowered to --workers.
 */
export function requestThreads(options: ServeOptions, workers: number): number {
  const threads = options.get("threads");
  if (!options.isGiven("threads")) return Math.min(threads, workers);
  if (threads > workers) {
    throw new ConfigError(
      "threads",
      `--threads ${threads} is more than --workers ${workers}: each thread needs a worker; ` +
        `give --threads ${workers} or fewer`,
    );
  }
  return threads;
}

/** --public-url: an absolute http(s) URL with no query or fragment, kept without a trailing '/'. */
export function publicUrl(options: ServeOptions): string | undefined {
  const raw = options.get("public-url");
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch { /* refused below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || /[\s<>"]/.test(raw)) {
    throw new ConfigError(
      "public-url",
      `--public-url ${JSON.stringify(raw)} is not an http(s) URL; give e.g. http://pki.example.org`,
    );
  }
  return raw.replace(/\/+$/, "");
}

/** Without --public-socket, none of the options only the public listener reads may be given. */
export function refusePublicOnlyOptions(options: ServeOptions): void {
  const stray = PUBLIC_ONLY_FLAGS.find((flag) => options.get(flag) !== undefined);
  if (stray) {
    throw new ConfigError(stray, `--${stray} needs --public-socket; add it or remove --${stray}`);
  }
}

/**
 * The revocation database POST /ocsp answers from: --ca-dir's index.txt when --ca-dir is given
 * (the CRLs are made from the database the OCSP answers read: one file, so they agree), else
 * --revocation-db, which --public-socket then needs.
 */
export function revocationDb(options: ServeOptions): string {
  const value = options.get("revocation-db");
  const caDir = options.get("ca-dir");
  if (caDir === undefined) return neededByPublicSocket("revocation-db", value);
  const index = join(caDir, "index.txt");
  if (value !== undefined && resolve(value) !== resolve(index)) {
    throw new ConfigError(
      "revocation-db",
      `--revocation-db ${value} is not --ca-dir's index.txt (${index}); the CRLs and the ` +
        "OCSP answers come from one database: give that file, or leave --revocation-db out",
    );
  }
  return index;
}

/** The token key that signs OCSP answers, which --public-socket needs. */
export function ocspLabel(options: ServeOptions): string {
  return neededByPublicSocket("ocsp-label", options.get("ocsp-label"));
}

function neededByPublicSocket(flag: ServeFlag, value: string | undefined): string {
  if (value === undefined) {
    throw new ConfigError(flag, `--public-socket needs --${flag} (POST /ocsp answers from it)`);
  }
  return value;
}

/** --metrics-uid without --metrics-socket is refused: nothing would listen for that uid. */
export function refuseMetricsUidAlone(options: ServeOptions): void {
  if (options.get("metrics-uid") !== undefined) {
    throw new ConfigError(
      "metrics-uid",
      "--metrics-uid needs --metrics-socket; add it or remove --metrics-uid",
    );
  }
}

/** The budget's tuning from its options, checked as a whole; a bad value is named by its option. */
export function budgetTuning(options: ServeOptions): BudgetTuning {
  try {
    return resolveBudgetTuning({
      threshold: options.get("refusal-threshold"),
      refillSeconds: options.get("refusal-refill"),
      baseDelaySeconds: options.get("refusal-base-delay"),
      maxDelaySeconds: options.get("refusal-max-delay"),
    });
  } catch (err) {
    if (!(err instanceof TuningError)) throw err;
    const flag = BUDGET_FLAGS[err.field];
    if (flag === undefined) throw err;
    throw new ConfigError(flag, `--${flag} ${err.requirement}`);
  }
}
