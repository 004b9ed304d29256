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
import { subjectFormAdvice } from "./subject_form.ts";

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

/** Options of the parser: labels no grant may name (the daemon's own keys). */
export interface ParseOptions {
  reservedLabels?: ReadonlySet<string>;
}

/** One subject's grants: its only grant, or label → grant for several. */
export type SubjectGrants = Grant | Map<string, Grant>;

/** What the parser found: grants in file order, warnings (already prefixed "FILE line N: "), errors. */
export interface ParsedPolicy {
  grants: Grant[];
  /**
   * The grants by subject, in file order: the grant itself for a subject with one label (most of
   * them; a Map each would be a large part of a big file's garbage), else label → its grant.
   */
  bySubject: Map<string, SubjectGrants>;
  warnings: string[];
  errors: PolicyProblem[];
}

const BOM = "\xEF\xBB\xBF";
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Parses a latin1-decoded policy file.
 *
 * @example
 * ```ts
 * parsePolicyText("# nobody yet\n", "policy").warnings; // → ["policy: grants nothing; …"]
 * ```
 */
export function parsePolicyText(
  text: string,
  source: string,
  opts: ParseOptions = {},
): ParsedPolicy {
  const parser = new LineParser(text, source, opts);
  while (parser.next());
  return parser.finish();
}

/**
 * How long {@link parsePolicyTextSliced} parses before it lets the event loop run: a request waits
 * at most about this long per step it takes on the event loop (bench/policy-reload.ts).
 */
export const PARSE_SLICE_MS = 0.5;

/**
 * Parses like {@link parsePolicyText}, but in slices of about {@link PARSE_SLICE_MS} ms with the
 * event loop let run between them: a reload of a large file never holds up the requests being
 * served (a file near the size limit takes far longer to parse than a request may wait;
 * bench/policy-reload.ts measures both).
 *
 * @example
 * ```ts
 * declare const text: string;
 * const parsed = await parsePolicyTextSliced(text, "/etc/svcd/policy");
 * ```
 */
export async function parsePolicyTextSliced(
  text: string,
  source: string,
  opts: ParseOptions = {},
  yieldToLoop: () => Promise<void> = nextMacrotask,
): Promise<ParsedPolicy> {
  const parser = new LineParser(text, source, opts);
  for (;;) {
    const until = performance.now() + PARSE_SLICE_MS;
    let more = true;
    // Check the clock every 16 lines: a line costs microseconds, a clock read is not free.
    for (let n = 0; (more = parser.next()) && (++n % 16 !== 0 || performance.now() < until););
    if (!more) return parser.finish();
    await yieldToLoop();
  }
}

/** A macrotask after pending I/O; setTimeout chains clamp to 4 ms and setImmediate starves I/O. */
function nextMacrotask(): Promise<void> {
  const { port1, port2 } = new MessageChannel();
  return new Promise((resolve) => {
    port1.onmessage = () => {
      port1.close();
      port2.close();
      resolve();
    };
    port2.postMessage(null);
  });
}

/** The grammar applied one line at a time, so a caller can pause between lines. */
class LineParser {
  #text: string;
  #source: string;
  #opts: ParseOptions;
  #out: ParsedPolicy = { grants: [], bySubject: new Map(), warnings: [], errors: [] };
  #at = 0;
  #line = 0;

  constructor(text: string, source: string, opts: ParseOptions) {
    this.#source = source;
    this.#opts = opts;
    if (text.startsWith(BOM)) {
      text = text.slice(BOM.length);
      this.#warn(
        1,
        "a UTF-8 byte-order mark starts the file; it was ignored (save without BOM to silence this)",
      );
    }
    this.#text = text;
  }

  /** Parses the next line; false when there is none left. */
  next(): boolean {
    const text = this.#text;
    if (this.#at >= text.length) return false;
    const nl = text.indexOf("\n", this.#at);
    const end = nl < 0 ? text.length : nl;
    const raw = text.slice(this.#at, end);
    this.#at = end + 1;
    this.#parse(raw, ++this.#line);
    return true;
  }

  finish(): ParsedPolicy {
    const out = this.#out;
    if (out.grants.length === 0 && out.errors.length === 0) {
      out.warnings.push(
        `${this.#source}: grants nothing; every request on the authenticated socket will be ` +
          `refused with 403 until grants are added (one 'subject<TAB>label' per line)`,
      );
    }
    return out;
  }

  #warn(line: number, message: string): void {
    this.#out.warnings.push(`${this.#source} line ${line}: ${message}`);
  }

  #parse(raw: string, line: number): void {
    const result = parseLine(raw);
    if (result === undefined) return;
    if ("error" in result) {
      this.#out.errors.push({ line, message: result.error });
      return;
    }
    if (this.#opts.reservedLabels?.has(result.label)) {
      this.#out.errors.push({ line, message: reservedLabel(result.label) });
      return;
    }
    const grant: Grant = { subject: result.subject, label: result.label, line };
    // Built here, in the parser's slices: built afterwards in one piece it held the event loop for
    // 100–250 ms with a 1 MiB file.
    const bySubject = this.#out.bySubject;
    const known = bySubject.get(grant.subject);
    const first = known === undefined
      ? undefined
      : known instanceof Map
      ? known.get(grant.label)
      : known.label === grant.label
      ? known
      : undefined;
    if (first !== undefined) {
      this.#warn(line, `duplicate of the grant on line ${first.line}; it changes nothing`);
      return;
    }
    if (known === undefined) bySubject.set(grant.subject, grant);
    else if (known instanceof Map) known.set(grant.label, grant);
    else bySubject.set(grant.subject, new Map([[known.label, known], [grant.label, grant]]));
    this.#out.grants.push(grant);
    for (const message of grantWarnings(grant)) this.#warn(line, message);
  }
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
