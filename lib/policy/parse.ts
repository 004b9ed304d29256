/**
 * The policy file's grammar: one `subject<TAB>label` grant per line, `#` comments, blank lines.
 * Turns bytes into grants, warnings and errors, each naming the file and line; decides nothing
 * about what to do with an error (see policy.ts).
 *
 * Decisions (each has a test in parse_test.ts):
 * - Bytes are decoded as latin1, one char per byte, because the HTTP layer hands header values over
 *   the same way; a UTF-8 subject therefore matches the proxy's UTF-8 bytes byte for byte.
 * - LF ends a line; a CR right before it (CRLF files) is dropped. A CR anywhere else is an error.
 * - Spaces and TABs at the ends of a line and around the separator are dropped: an HTTP field value
 *   never starts or ends with whitespace (RFC 9110 §5.5), so such a grant could never match.
 * - One run of TABs separates subject and label (so columns may be aligned with several TABs). A
 *   line with no TAB, an empty subject or label, or a third field is an error.
 * - A line whose first non-blank character is `#` is a comment. There are no end-of-line comments:
 *   labels may contain `#` (a warning points at a label that looks like one).
 * - NUL and other control bytes (except TAB) are errors: an HTTP field value cannot carry them.
 * - A leading UTF-8 byte-order mark is dropped with a warning.
 * - Bytes that are not valid UTF-8 are allowed (the comparison is byte for byte) but warned about:
 *   a file saved as Latin-1 does not match a proxy sending UTF-8.
 * - A duplicate pair is harmless and warned about, naming both lines.
 * - A file without a grant is valid and warned about: it refuses every request.
 * - A grant of a reserved label (the daemon's own keys, e.g. the audit keys) is an error: a client
 *   that could sign with the audit key could forge the checkpoints `svcd audit verify` trusts.
 *
 * @example
 * ```ts
 * const r = parsePolicyText("CN=alice,O=Ex\tsigning-key\n", "/etc/svcd/policy");
 * // r.grants → [{ subject: "CN=alice,O=Ex", label: "signing-key", line: 1 }]
 * ```
 */
import { latin1, latin1Bytes } from "../bytes/mod.ts";
import { subjectFormAdvice } from "./subject_form.ts";

import { CompactPolicy, CompactPolicyBuilder, type CompactPolicyData } from "./compact.ts";

/** One `subject<TAB>label` line of the file. */
export interface Grant {
  subject: string;
  label: string;
  line: number;
}

/** A problem that stops the file from being used. */
export interface PolicyProblem {
  line: number;
  message: string;
}

/**
 * Options of the parser: labels no grant may name (the daemon's own keys), and the most grants a
 * file may hold (a file with more is refused at the first grant past the limit).
 */
export interface ParseOptions {
  reservedLabels?: ReadonlySet<string>;
  maxGrants?: number;
}

/** Most grants a policy may hold unless `--policy-max-grants` says otherwise. */
export const MAX_POLICY_GRANTS = 1_000_000;

/**
 * Warnings kept per file: a generated file can warn on every line, and a million warnings logged
 * at each reload would bury everything else. The count of the rest is said in one more line.
 */
export const MAX_POLICY_WARNINGS = 100;

/**
 * Bad lines kept per file: the refusal names the first few and counts the rest, so a file in the
 * wrong format altogether (every line bad) makes no list as long as itself.
 */
export const MAX_POLICY_ERRORS = 100;

/** What the parser found: the grants (compact, shared), warnings ("FILE line N: " first), errors. */
export interface ParsedPolicy {
  /** The grants by subject, in shared memory (./compact.ts). */
  compact: CompactPolicyData;
  /** Number of distinct (subject, label) grants. */
  size: number;
  warnings: string[];
  /** The first {@link MAX_POLICY_ERRORS} bad lines. */
  errors: PolicyProblem[];
  /** Bad lines past the ones in `errors`. */
  errorsLeftOut: number;
}

/**
 * The grants of a parsed policy in file order, one object each (for tests and tools: a large
 * policy makes as many objects).
 *
 * @example
 * ```ts
 * grantsInFileOrder(parsePolicyText("CN=a\tk\n", "p")); // → [{ subject: "CN=a", label: "k", line: 1 }]
 * ```
 */
export function grantsInFileOrder(parsed: ParsedPolicy): Grant[] {
  return new CompactPolicy(parsed.compact).grantsInFileOrder();
}

const BOM = "\xEF\xBB\xBF";
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses a policy file: its bytes, or the same as a latin1 string (one char per byte).
 *
 * @example
 * ```ts
 * parsePolicyText("# nobody yet\n", "policy").warnings; // → ["policy: grants nothing; …"]
 * ```
 */
export function parsePolicyText(
  text: string | Uint8Array,
  source: string,
  opts: ParseOptions = {},
): ParsedPolicy {
  const parser = new LineParser(text, source, opts);
  while (parser.next());
  return parser.finish();
}

/** The grammar applied one line at a time. */
class LineParser {
  #bytes: Uint8Array;
  #source: string;
  #opts: ParseOptions;
  #maxGrants: number;
  /** Lengths of the reserved labels: a label of another length needs no string to be checked. */
  #reservedLengths: Set<number>;
  #grants: CompactPolicyBuilder;
  #warnings: string[] = [];
  #warningsLeftOut = 0;
  #errors: PolicyProblem[] = [];
  #errorsLeftOut = 0;
  #at = 0;
  #line = 0;

  constructor(text: string | Uint8Array, source: string, opts: ParseOptions) {
    this.#source = source;
    this.#opts = opts;
    this.#maxGrants = opts.maxGrants ?? MAX_POLICY_GRANTS;
    this.#reservedLengths = new Set([...opts.reservedLabels ?? []].map((l) => l.length));
    // Bytes, not a string: a latin1 string of a large file would be a second copy of it, made in
    // one piece.
    const bytes = typeof text === "string" ? latin1Bytes(text) : text;
    if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
      this.#at = BOM.length;
      this.#warn(
        1,
        "a UTF-8 byte-order mark starts the file; it was ignored (save without BOM to silence this)",
      );
    }
    this.#bytes = bytes;
    this.#grants = new CompactPolicyBuilder(bytes.length);
  }

  /** Parses the next line; false when there is none left. */
  next(): boolean {
    const bytes = this.#bytes;
    const start = this.#at;
    if (start >= bytes.length) return false;
    const nl = bytes.indexOf(0x0a, start);
    const end = nl < 0 ? bytes.length : nl;
    this.#at = end + 1;
    const line = ++this.#line;
    if (!this.#plainGrant(bytes, start, end, line)) {
      this.#parse(latin1(bytes.subarray(start, end)), line);
    }
    return true;
  }

  finish(): ParsedPolicy {
    const size = this.#grants.grants;
    if (size === 0 && this.#errors.length === 0) {
      this.#warnings.push(
        `${this.#source}: grants nothing; every request on the authenticated socket will be ` +
          `refused with 403 until grants are added (one 'subject<TAB>label' per line)`,
      );
    }
    if (this.#warningsLeftOut > 0) {
      this.#warnings.push(
        `${this.#source}: ${this.#warningsLeftOut} more warning(s) not listed; ` +
          `svcd serve --check-config lists the first ${MAX_POLICY_WARNINGS} the same way`,
      );
    }
    return {
      compact: this.#grants.finish(),
      size,
      warnings: this.#warnings,
      errors: this.#errors,
      errorsLeftOut: this.#errorsLeftOut,
    };
  }

  #error(line: number, message: string): void {
    if (this.#errors.length >= MAX_POLICY_ERRORS) this.#errorsLeftOut++;
    else this.#errors.push({ line, message });
  }

  #warn(line: number, message: string): void {
    if (this.#warnings.length >= MAX_POLICY_WARNINGS) this.#warningsLeftOut++;
    else this.#warnings.push(`${this.#source} line ${line}: ${message}`);
  }

  /**
   * The usual line, `subject<TAB>label` in printable ASCII with no space next to the TAB or at the
   * ends, that no warning could concern, added without making a string; false for any other line,
   * which the full grammar (#parse) then handles.
   */
  #plainGrant(bytes: Uint8Array, start: number, end: number, line: number): boolean {
    if (end > start && bytes[end - 1] === 0x0d) end--;
    const first = bytes[start];
    // '#' may start a comment, '/' a legacy slash subject (a warning): the full grammar decides.
    if (end - start < 3 || first <= 0x20 || first === 0x23 || first === 0x2f) return false;
    let tab = -1;
    let equals = false;
    for (let i = start; i < end; i++) {
      const c = bytes[i];
      if (c === 0x09) {
        if (tab >= 0) return false;
        tab = i;
      } else if (c < 0x20 || c >= 0x7f) return false;
      else if (c === 0x20) {
        // ' = ' (OpenSSL's display form) and ' #' (a label that looks like a comment) warn.
        const after = bytes[i + 1];
        if (after === 0x3d || after === 0x23 || after === 0x09 || i + 1 === end) return false;
      } else if (c === 0x3d && tab < 0) equals = true;
    }
    if (tab < 0 || tab === end - 1 || !equals || bytes[tab - 1] === 0x20) return false;
    if (bytes[tab + 1] === 0x20) return false;
    if (
      this.#reservedLengths.has(end - tab - 1) &&
      this.#opts.reservedLabels!.has(latin1(bytes.subarray(tab + 1, end)))
    ) return false;
    this.#add(bytes, start, tab, tab + 1, end, line);
    return true;
  }

  #add(bytes: Uint8Array, s0: number, s1: number, l0: number, l1: number, line: number): boolean {
    const first = this.#grants.add(bytes, s0, s1, l0, l1, line);
    if (first !== 0) {
      this.#warn(line, `duplicate of the grant on line ${first}; it changes nothing`);
      return false;
    }
    if (this.#grants.grants > this.#maxGrants) {
      this.#error(line, tooManyGrants(this.#maxGrants));
      this.#at = this.#bytes.length; // the rest of the file changes nothing about the refusal
    }
    return true;
  }

  #parse(raw: string, line: number): void {
    const result = parseLine(raw);
    if (result === undefined) return;
    if ("error" in result) {
      this.#error(line, result.error);
      return;
    }
    if (this.#opts.reservedLabels?.has(result.label)) {
      this.#error(line, reservedLabel(result.label));
      return;
    }
    const grant: Grant = { subject: result.subject, label: result.label, line };
    const pair = latin1Bytes(`${grant.subject}\t${grant.label}`);
    const tab = grant.subject.length;
    if (!this.#add(pair, 0, tab, tab + 1, pair.length, line)) return;
    for (const message of grantWarnings(grant)) this.#warn(line, message);
  }
}

function tooManyGrants(max: number): string {
  return `more than ${max} grants; a policy may hold at most ${max} (--policy-max-grants): ` +
    `remove unused grants or raise the limit`;
}

type LineResult = undefined | { error: string } | { subject: string; label: string };

/** One line: undefined for a blank or comment line, a grant, or an error. */
function parseLine(raw: string): LineResult {
  const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
  const bad = findControlByte(line);
  if (bad !== undefined) return { error: bad };
  const lead = line.replace(/^ +/, "");
  const content = lead.replace(/[ \t]+$/, "");
  if (content === "" || content.startsWith("#")) return undefined;
  if (lead.startsWith("\t")) return { error: EMPTY_SUBJECT };
  const fields = content.split(/\t+/).map((f) => f.replace(/ +$/, "").replace(/^ +/, ""));
  if (fields.length === 1) return { error: lead.includes("\t") ? EMPTY_LABEL : noTab(content) };
  if (fields.length > 2) {
    return {
      error: `${fields.length} TAB-separated fields; expected exactly 'subject<TAB>label' ` +
        `(a subject or label cannot contain a TAB)`,
    };
  }
  const [subject, label] = fields;
  if (subject === "") return { error: EMPTY_SUBJECT };
  if (label === "") return { error: EMPTY_LABEL };
  return { subject, label };
}

function reservedLabel(label: string): string {
  return `label '${label}' is reserved for the daemon's own use (audit log keys) and can never be ` +
    `granted to a client; remove this line`;
}

const EMPTY_SUBJECT = "empty subject before the TAB; write the certificate subject the proxy sends";
const EMPTY_LABEL = "empty label after the TAB; write the key label to grant";

function noTab(content: string): string {
  return content.includes(" ")
    ? "no TAB between subject and label; separate them with one TAB character, not spaces"
    : "no TAB between subject and label; expected 'subject<TAB>label'";
}

/** Describes the first byte a header value could never carry, or undefined. */
function findControlByte(line: string): string | undefined {
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c === 0x09 || (c >= 0x20 && c !== 0x7f)) continue;
    const name = c === 0 ? "NUL" : c === 0x0d ? "CR" : c === 0x7f ? "DEL" : "control";
    const hint = c === 0
      ? "; is this a binary or UTF-16 file? Save it as UTF-8 text"
      : c === 0x0d
      ? "; use LF or CRLF line endings"
      : "";
    return `byte 0x${c.toString(16).padStart(2, "0")} (${name}) at column ${i + 1}; ` +
      `an HTTP header value can never contain it${hint}`;
  }
  return undefined;
}

/** Warnings about a well-formed grant that probably does not do what the operator means. */
function grantWarnings(grant: Grant): string[] {
  const warnings: string[] = [];
  const advice = subjectFormAdvice(grant.subject);
  if (advice !== undefined) warnings.push(advice);
  for (const [field, value] of [["subject", grant.subject], ["label", grant.label]]) {
    if (!isUtf8(value)) {
      warnings.push(
        `the ${field} is not valid UTF-8 (file saved as Latin-1?); it matches only a client whose ` +
          `bytes are exactly these, and a proxy sending UTF-8 will not match`,
      );
    }
  }
  if (/\s#/.test(grant.label)) {
    warnings.push(
      `label '${grant.label}' contains ' #': there are no end-of-line comments, the whole text ` +
        `is the label; put comments on their own line`,
    );
  }
  return warnings;
}

function isUtf8(latin1Text: string): boolean {
  if (!/[\x80-\xff]/.test(latin1Text)) return true;
  const bytes = Uint8Array.from(latin1Text, (ch) => ch.charCodeAt(0));
  try {
    UTF8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}
