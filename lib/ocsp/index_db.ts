/**
 * The revocation database: the `openssl ca` index.txt format, so `openssl ca` and
 * `openssl ocsp -index` read and write the same file. One line per certificate, six TAB-separated
 * fields: status (V valid, R revoked, E expired), expiry time, revocation time[,reason[,argument]]
 * (empty unless R), serial in upper-case hex, file name ("unknown"), subject in the slash form.
 * Lines starting with '#' are comments (as OpenSSL's TXT_DB skips them).
 *
 * Parsing is strict and names the line of the first fault: whatever this module accepts, OpenSSL
 * reads the same way (upper-case serials only, OpenSSL's reason names, no duplicate serial).
 *
 * This is the line-by-line reader, one object per line with every field: `svcd ca` edits the file
 * with it, and it is the reference the daemon's compact reader (./index_compact.ts) is tested
 * against. The daemon answers from ./index_source.ts.
 *
 * @example
 * ```ts
 * const entries = parseIndex("V\t301231235959Z\t\t1A2B\tunknown\t/CN=a\n");
 * entries[0].status; // "V" | "R" | "E"
 * ```
 */
import { x509Time } from "../der/mod.ts";

/** CRLReason codes (RFC 5280 §5.3.1). Example: `CRL_REASON.keyCompromise === 1`. */
export const CRL_REASON = {
  unspecified: 0,
  keyCompromise: 1,
  cACompromise: 2,
  affiliationChanged: 3,
  superseded: 4,
  cessationOfOperation: 5,
  certificateHold: 6,
  removeFromCRL: 8,
  privilegeWithdrawn: 9,
  aACompromise: 10,
} as const;

// The names OpenSSL's `ca` writes and reads (apps/ca.c crl_reasons), compared as it does: without
// case. holdInstruction, keyTime and CAkeyTime carry an argument and stand for a reason code.
const REASON_NAMES: ReadonlyArray<[name: string, code: number, argument?: "oid" | "time"]> = [
  ["unspecified", 0],
  ["keyCompromise", 1],
  ["CACompromise", 2],
  ["affiliationChanged", 3],
  ["superseded", 4],
  ["cessationOfOperation", 5],
  ["certificateHold", 6],
  ["removeFromCRL", 8],
  ["holdInstruction", 6, "oid"],
  ["keyTime", 1, "time"],
  ["CAkeyTime", 2, "time"],
];

/** What an OCSP answer needs of a certificate's line. */
export interface RevocationEntry {
  status: "V" | "R" | "E";
  /** Revocation time (R only), ms since the epoch. */
  revokedAt?: number;
  /** CRLReason code (R only); undefined when the line gives none (the response then omits it). */
  reason?: number;
}

/** One certificate's line. */
export interface IndexEntry {
  status: "V" | "R" | "E";
  /** Expiry, ms since the epoch. */
  expires: number;
  /** Revocation time (R only), ms since the epoch. */
  revokedAt?: number;
  /** CRLReason code (R only); undefined when the line gives none (the response then omits it). */
  reason?: number;
  /** The serial as written (upper-case hex). */
  serial: string;
  file: string;
  /** Subject in the slash form, as written. */
  subject: string;
  /** 1-based line number in the file. */
  line: number;
}

/** A fault in the file, with the line it is on. */
export class IndexFormatError extends Error {
  /** Example: `new IndexFormatError(3, "expected 6 TAB-separated fields")`. */
  constructor(readonly line: number, detail: string) {
    super(`index line ${line}: ${detail}`);
    this.name = "IndexFormatError";
  }
}

/** A parsed database at one moment. */
export interface RevocationSnapshot {
  /** Changes whenever the content that was parsed changes (a cache key for signed answers). */
  version: number;
  /**
   * The entry for a serial given as unsigned hex of any case and with any leading zeros. Throws
   * StaleSnapshotError when the database was re-read since this snapshot was taken (another
   * thread shares it): ask the source again.
   */
  lookup(serialHex: string): RevocationEntry | undefined;
  /** Number of lines with a certificate. */
  size: number;
}

/** A snapshot used after the shared database it came from was re-read; ask the source again. */
export class StaleSnapshotError extends Error {
  override name = "StaleSnapshotError";
  constructor() {
    super("the revocation database was re-read since this snapshot was taken");
  }
}

/**
 * Where the responder gets the database; null means it cannot be loaded now. A promise means
 * another thread is re-reading the file and this one waits for that re-read.
 */
export interface RevocationSource {
  /** The database as it is now, checked on every call. Example: `(await source.current())?.version`. */
  current(): RevocationSnapshot | null | Promise<RevocationSnapshot | null>;
}

/**
 * The canonical form of a serial: upper-case hex without leading zeros ("0" for zero).
 *
 * @example
 * ```ts
 * canonicalSerial("00ab") === "AB";
 * ```
 */
export function canonicalSerial(hex: string): string {
  let i = 0;
  while (i < hex.length - 1 && hex[i] === "0") i++;
  return hex.slice(i).toUpperCase();
}

const SERIAL = /^[0-9A-F]+$/;
const UTC_TIME = /^\d{12}Z$/;
const GENERALIZED_TIME = /^\d{14}Z$/;
const OID_TEXT = /^[0-2](\.(0|[1-9]\d*))+$/;
// `openssl ca -crl_hold X` writes X as given and reads it back with OBJ_txt2obj, which takes an
// object's short or long name as well as the dotted form. The hold instructions' names (RFC 5280
// §5.3.2 / X9.57) are accepted; other names of objects OpenSSL knows are not hold instructions.
const HOLD_INSTRUCTION_NAMES = new Set([
  "holdInstructionNone",
  "Hold Instruction None",
  "holdInstructionCallIssuer",
  "Hold Instruction Call Issuer",
  "holdInstructionReject",
  "Hold Instruction Reject",
]);

/**
 * Parses a whole index.txt. Throws IndexFormatError naming the first faulty line.
 *
 * @example
 * ```ts
 * const entries = parseIndex("V\t301231235959Z\t\t1A\tunknown\t/CN=a\n");
 * entries[0].serial; // "1A"
 * ```
 */
export function parseIndex(text: string): IndexEntry[] {
  if (text.length > 0 && !text.endsWith("\n")) {
    throw new IndexFormatError(
      text.split("\n").length,
      "the last line has no newline (file cut short?)",
    );
  }
  const lines = text.split("\n");
  lines.pop();
  const out: IndexEntry[] = [];
  const seen = new Map<string, number>();
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].startsWith("#")) continue;
    const entry = parseIndexLine(lines[i], i + 1);
    const key = canonicalSerial(entry.serial);
    const first = seen.get(key);
    if (first !== undefined) {
      throw new IndexFormatError(i + 1, `serial ${entry.serial} is already on line ${first}`);
    }
    seen.set(key, i + 1);
    out.push(entry);
  }
  return out;
}

/**
 * Parses one line (without its newline).
 *
 * @example
 * ```ts
 * parseIndexLine("R\t301231235959Z\t250101000000Z,keyCompromise\t0F\tunknown\t/CN=b", 1).reason; // 1
 * ```
 */
export function parseIndexLine(text: string, line: number): IndexEntry {
  const fields = text.split("\t");
  if (fields.length !== 6) {
    throw new IndexFormatError(line, `expected 6 TAB-separated fields, found ${fields.length}`);
  }
  const [status, expiry, revocation, serial, file, subject] = fields;
  if (status !== "V" && status !== "R" && status !== "E") {
    throw new IndexFormatError(line, `status must be V, R or E, not ${JSON.stringify(status)}`);
  }
  const expires = parseIndexTime(expiry, line, "expiry", true);
  if (!SERIAL.test(serial)) {
    throw new IndexFormatError(
      line,
      `serial must be upper-case hex, not ${JSON.stringify(serial)}`,
    );
  }
  if (file === "") throw new IndexFormatError(line, "empty file field (OpenSSL writes 'unknown')");
  const entry: IndexEntry = { status, expires, serial, file, subject, line };
  if (status !== "R") {
    if (revocation !== "") {
      throw new IndexFormatError(line, `status ${status} with a revocation field`);
    }
    return entry;
  }
  const parts = revocation.split(",");
  entry.revokedAt = parseIndexTime(parts[0], line, "revocation time", false);
  if (parts.length > 1) entry.reason = reasonCodeOf(parts.slice(1), line);
  return entry;
}

/**
 * The CRLReason code of a revocation field's `reason[,argument]` parts; throws IndexFormatError
 * naming `line` when openssl would not read them.
 *
 * @example
 * ```ts
 * reasonCodeOf(["holdInstruction", "holdInstructionReject"], 1); // 6
 * ```
 */
export function reasonCodeOf(parts: string[], line: number): number {
  const name = parts[0].toLowerCase();
  const known = REASON_NAMES.find(([n]) => n.toLowerCase() === name);
  if (!known) {
    throw new IndexFormatError(line, `unknown revocation reason ${JSON.stringify(parts[0])}`);
  }
  const [, code, argument] = known;
  if (!argument && parts.length !== 1) {
    throw new IndexFormatError(line, `reason ${parts[0]} takes no argument`);
  }
  if (argument && parts.length !== 2) {
    throw new IndexFormatError(line, `reason ${parts[0]} needs one argument`);
  }
  if (argument === "oid" && !OID_TEXT.test(parts[1]) && !HOLD_INSTRUCTION_NAMES.has(parts[1])) {
    throw new IndexFormatError(
      line,
      `holdInstruction needs a dotted OID or holdInstructionNone/CallIssuer/Reject, not ${
        JSON.stringify(parts[1])
      }`,
    );
  }
  if (argument === "time" && !GENERALIZED_TIME.test(parts[1])) {
    throw new IndexFormatError(line, `${parts[0]} needs a time YYYYMMDDHHMMSSZ`);
  }
  return code;
}

// OpenSSL reads revocation times as UTCTime only; expiry may be either form.
function parseIndexTime(text: string, line: number, what: string, generalizedToo: boolean): number {
  const utc = UTC_TIME.test(text);
  if (!utc && !(generalizedToo && GENERALIZED_TIME.test(text))) {
    throw new IndexFormatError(
      line,
      `${what} must be a time YYMMDDHHMMSSZ, not ${JSON.stringify(text)}`,
    );
  }
  const year = utc
    ? Number(text.slice(0, 2)) + (Number(text.slice(0, 2)) < 50 ? 2000 : 1900)
    : Number(text.slice(0, 4));
  const d = utc ? text.slice(2) : text.slice(4);
  const [mo, da, h, mi, s] = [0, 2, 4, 6, 8].map((at) => Number(d.slice(at, at + 2)));
  const ms = Date.UTC(year, mo - 1, da, h, mi, s);
  const check = new Date(ms);
  if (check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== da || h > 23 || mi > 59 || s > 59) {
    throw new IndexFormatError(line, `${what} ${text} is not a real time`);
  }
  return ms;
}

/** What a line holds, for `formatIndexLine`. */
export interface IndexLineFields {
  status: "V" | "R" | "E";
  expires: number;
  revokedAt?: number;
  /** CRLReason code; undefined writes no reason. */
  reason?: number;
  /** Upper-case hex (other cases are upper-cased). */
  serial: string;
  file?: string;
  subject: string;
}

/**
 * One line as OpenSSL writes it, with its newline. Throws on a field that would corrupt the file
 * (a TAB or newline in the subject) or a reason OpenSSL has no name for.
 *
 * @example
 * ```ts
 * formatIndexLine({ status: "V", expires: Date.UTC(2030, 0, 1), serial: "1a", subject: "/CN=a" });
 * // "V\t300101000000Z\t\t1A\tunknown\t/CN=a\n"
 * ```
 */
export function formatIndexLine(e: IndexLineFields): string {
  const serial = e.serial.toUpperCase();
  if (!SERIAL.test(serial)) throw new Error(`serial must be hex: ${JSON.stringify(e.serial)}`);
  const file = e.file ?? "unknown";
  for (const [what, v] of [["subject", e.subject], ["file", file]]) {
    if (/[\t\n\r]/.test(v)) throw new Error(`${what} contains a TAB or newline`);
  }
  let revocation = "";
  if (e.status === "R") {
    if (e.revokedAt === undefined) throw new Error("a revoked line needs its revocation time");
    revocation = timeText(e.revokedAt, true);
    if (e.reason !== undefined) {
      const name = REASON_NAMES.find(([, code, arg]) => code === e.reason && !arg);
      if (!name) throw new Error(`no index.txt name for CRLReason ${e.reason}`);
      revocation += `,${name[0]}`;
    }
  }
  const line = [e.status, timeText(e.expires, false), revocation, serial, file, e.subject].join(
    "\t",
  );
  return `${line}\n`;
}

/** The reason names `formatIndexLine` writes, by code. Example: `REASON_NAME[1] === "keyCompromise"`. */
export const REASON_NAME: Readonly<Record<number, string>> = Object.fromEntries(
  REASON_NAMES.filter(([, , arg]) => !arg).map(([name, code]) => [code, name]),
);

function timeText(ms: number, utcOnly: boolean): string {
  const der = x509Time(ms);
  if (utcOnly && der[0] !== 0x17) {
    throw new Error("revocation time after 2049 (OpenSSL reads UTCTime only)");
  }
  return new TextDecoder().decode(der.subarray(2));
}

class Snapshot implements RevocationSnapshot {
  readonly #bySerial = new Map<string, IndexEntry>();
  constructor(readonly version: number, entries: IndexEntry[]) {
    for (const e of entries) this.#bySerial.set(canonicalSerial(e.serial), e);
  }
  get size(): number {
    return this.#bySerial.size;
  }
  lookup(serialHex: string): IndexEntry | undefined {
    return this.#bySerial.get(canonicalSerial(serialHex));
  }
}

let versions = 0;

/**
 * A snapshot over entries already in memory (tests, `svcd ca status` on a parsed file).
 *
 * @example
 * ```ts
 * declare const text: string;
 * const snap = snapshotOf(parseIndex(text));
 * ```
 */
export function snapshotOf(entries: IndexEntry[]): RevocationSnapshot {
  return new Snapshot(++versions, entries);
}
