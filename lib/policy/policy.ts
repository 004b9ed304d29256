/**
 * The grants in force: which key labels each client subject may use, compared byte for byte.
 * Immutable once parsed, so a reload swaps the whole object and a request never sees half a file.
 *
 * @example
 * ```ts
 * const policy = Policy.parse(new TextEncoder().encode("CN=alice,O=Ex\tsigning-key\n"), "policy");
 * policy.allows("CN=alice,O=Ex", "signing-key"); // → true
 * ```
 */
import {
  type ParsedPolicy,
  type ParseOptions,
  parsePolicyText,
  type PolicyProblem,
} from "./parse.ts";
import { CompactPolicy, type CompactPolicyData } from "./compact.ts";

const MAX_LISTED_ERRORS = 5;

/** A parsed policy as plain data ({@link Policy.toData}), for another isolate. */
export interface PolicyData {
  /** The grants in shared memory: crosses `postMessage` without a copy. */
  compact: CompactPolicyData;
  warnings: string[];
  size: number;
}

/**
 * A policy file that cannot be used: `line` is the first bad line (0 when the whole file is at
 * fault, e.g. unreadable); `problems` lists every bad line; the message names file and line.
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * try { Policy.parse(bytes, "/etc/svcd/policy"); } catch (e) {
 *   if (e instanceof PolicyError) console.error(e.message); // "/etc/svcd/policy line 3: no TAB …"
 * }
 * ```
 */
export class PolicyError extends Error {
  override name = "PolicyError";
  constructor(
    readonly source: string,
    readonly line: number,
    message: string,
    readonly problems: PolicyProblem[] = [{ line, message }],
    /** Bad lines past the ones in `problems` (counted, not kept). */
    readonly problemsLeftOut = 0,
  ) {
    super(describeProblems(source, problems, problemsLeftOut));
  }
}

function describeProblems(source: string, problems: PolicyProblem[], leftOut: number): string {
  const where = (p: PolicyProblem) => p.line > 0 ? `${source} line ${p.line}` : source;
  const listed = problems.slice(0, MAX_LISTED_ERRORS).map((p) => `${where(p)}: ${p.message}`);
  const more = problems.length - listed.length + leftOut;
  if (more > 0) listed.push(`(and ${more} more bad line${more === 1 ? "" : "s"} in ${source})`);
  return listed.join("\n");
}

/**
 * Subject → labels, built from one successfully parsed file.
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * Policy.parse(bytes, "/etc/svcd/policy").labelsFor("CN=alice,O=Ex"); // → ["signing-key"]
 * ```
 */
export class Policy {
  readonly #grants: CompactPolicy;
  /** Lines that parse but probably do not do what the operator means; each names file and line. */
  readonly warnings: string[];
  /** Number of distinct (subject, label) grants. */
  readonly size: number;

  private constructor(parsed: PolicyData) {
    this.#grants = new CompactPolicy(parsed.compact);
    this.warnings = parsed.warnings;
    this.size = parsed.size;
    Object.freeze(this.warnings);
  }

  /**
   * The policy as plain data, to hand to another isolate: the grants are one SharedArrayBuffer,
   * which `postMessage` shares instead of copying, so a policy of a million grants reaches every
   * request thread at once; parsing the file again in every isolate would cost each of them the
   * parse (bench/policy-reload.ts).
   *
   * @example
   * ```ts
   * const p = Policy.parse(new TextEncoder().encode("CN=a\tk\n"));
   * Policy.fromData(structuredClone(p.toData())).allows("CN=a", "k"); // → true
   * ```
   */
  toData(): PolicyData {
    return { compact: this.#grants.data, warnings: [...this.warnings], size: this.size };
  }

  /**
   * The policy {@link Policy.toData} described, already checked where it was parsed.
   *
   * @example
   * ```ts
   * declare const worker: Worker;
   * let policy: Policy;
   * worker.onmessage = (e) => (policy = Policy.fromData(e.data.policy));
   * ```
   */
  static fromData(data: PolicyData): Policy {
    return new Policy(data);
  }

  /**
   * Parses a policy file's bytes; throws PolicyError naming `source` and the first bad line (a grant
   * of one of `opts.reservedLabels` is such a line).
   *
   * @example
   * ```ts
   * Policy.parse(await Deno.readFile("/etc/svcd/policy"), "/etc/svcd/policy");
   * ```
   */
  static parse(bytes: Uint8Array, source = "<policy>", opts: ParseOptions = {}): Policy {
    return Policy.fromParsed(parsePolicyText(bytes, source, opts), source);
  }

  /**
   * The policy a parser found (`parsePolicyText`, here or in another thread); throws PolicyError
   * naming `source` and the first bad line when the parser found errors.
   *
   * @example
   * ```ts
   * import { parsePolicyText } from "./parse.ts";
   * Policy.fromParsed(parsePolicyText("CN=a\tk\n", "p"), "p").allows("CN=a", "k"); // → true
   * ```
   */
  static fromParsed(parsed: ParsedPolicy, source: string): Policy {
    if (parsed.errors.length > 0) {
      const first = parsed.errors[0];
      throw new PolicyError(source, first.line, first.message, parsed.errors, parsed.errorsLeftOut);
    }
    return new Policy({ compact: parsed.compact, warnings: parsed.warnings, size: parsed.size });
  }

  /**
   * Whether `subject` may use the key `label`; both compared byte for byte (latin1 strings, one char
   * per byte, as the HTTP layer hands header values over).
   *
   * @example
   * ```ts
   * declare const policy: Policy;
   * policy.allows("CN=alice,O=Ex", "signing-key"); // → true
   * ```
   */
  allows(subject: string, label: string): boolean {
    return this.#grants.allows(subject, label);
  }

  /**
   * Every label granted to anyone, once, with the line of its first grant (file order).
   *
   * @example
   * ```ts
   * declare const policy: Policy;
   * policy.grantedLabels(); // → [{ label: "signing-key", line: 1 }]
   * ```
   */
  grantedLabels(): Array<{ label: string; line: number }> {
    return this.#grants.grantedLabels();
  }

  /**
   * The labels granted to `subject`, in file order; empty for an unknown subject.
   *
   * @example
   * ```ts
   * declare const policy: Policy;
   * policy.labelsFor("CN=nobody"); // → []
   * ```
   */
  labelsFor(subject: string): string[] {
    return this.#grants.labelsFor(subject);
  }
}
