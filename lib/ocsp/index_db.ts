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
 * This is the entry list, one object per line with every field: `svcd ca` edits the file with it.
 * The daemon answers from the compact table of ./index_compact.ts (through ./index_source.ts); both
 * are filled by index.txt's one parser (./_index_line.ts), so they accept and refuse the same lines.
 *
 * @example
 * ```ts
 * const entries = parseIndex("V\t301231235959Z\t\t1A2B\tunknown\t/CN=a\n");
 * entries[0].status; // "V" | "R" | "E"
 * ```
 */
import { x509Time } from "../der/mod.ts";
import {
  canonicalSerial,
  lineError,
  ParsedLine,
  parseLines,
  REASON_NAME,
  repeatedSerial,
  REVOKED,
  STATUS_LETTERS,
  timeMs,
  unfinishedLine,
} from "./_index_line.ts";

export {
  canonicalSerial,
  CRL_REASON,
  IndexFormatError,
  REASON_NAME,
  reasonCodeOf,
} from "./_index_line.ts";

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
 * Parses a whole index.txt. Throws IndexFormatError naming the first faulty line.
 *
 * @example
 * ```ts
 * const entries = parseIndex("V\t301231235959Z\t\t1A\tunknown\t/CN=a\n");
 * entries[0].serial; // "1A"
 * ```
 */
export function parseIndex(text: string): IndexEntry[] {
  const list = new EntryList(text);
  const unfinished = unfinishedLine(list.bytes);
  if (unfinished) throw unfinished;
  const line = new ParsedLine();
  if (!parseLines(list.bytes, line, list)) throw lineError(list.bytes, line);
  return list.entries;
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
  const list = new EntryList(`${text}\n`);
  const parsed = new ParsedLine();
  parsed.number = line - 1;
  if (!parseLines(list.bytes, parsed, list) || list.entries.length === 0) {
    throw lineError(list.bytes, parsed);
  }
  return list.entries[0];
}

const UTF8 = new TextDecoder();

/** The entries of a text's lines, in file order; a serial seen before is refused at its second line. */
class EntryList {
  readonly entries: IndexEntry[] = [];
  readonly bytes: Uint8Array;
  readonly #lineOf = new Map<string, number>();
  /** Whether every character is one byte (ASCII): a field's text is then a slice of `text`. */
  readonly #ascii: boolean;

  constructor(readonly text: string) {
    this.bytes = new TextEncoder().encode(text);
    this.#ascii = this.bytes.length === text.length;
  }

  add(bytes: Uint8Array, line: ParsedLine): void {
    const entry = this.#entryOf(bytes, line);
    const key = this.#text(bytes, line.key, line.serialEnd);
    const first = this.#lineOf.get(key);
    if (first !== undefined) throw repeatedSerial(line.number, entry.serial, first);
    this.#lineOf.set(key, line.number);
    this.entries.push(entry);
  }

  #text(bytes: Uint8Array, from: number, to: number): string {
    return this.#ascii ? this.text.slice(from, to) : UTF8.decode(bytes.subarray(from, to));
  }

  #entryOf(bytes: Uint8Array, line: ParsedLine): IndexEntry {
    const entry: IndexEntry = {
      status: STATUS_LETTERS[line.status],
      expires: timeMs(bytes, line.expiry, line.expiryDigits),
      serial: this.#text(bytes, line.serial, line.serialEnd),
      file: this.#text(bytes, line.serialEnd + 1, line.fileEnd),
      subject: this.#text(bytes, line.fileEnd + 1, line.end),
      line: line.number,
    };
    if (line.status !== REVOKED) return entry;
    entry.revokedAt = line.revokedAt * 1000;
    if (line.reason >= 0) entry.reason = line.reason;
    return entry;
  }
}

const SERIAL = /^[0-9A-F]+$/;

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
      const name = REASON_NAME[e.reason];
      if (!name) throw new Error(`no index.txt name for CRLReason ${e.reason}`);
      revocation += `,${name}`;
    }
  }
  const line = [e.status, timeText(e.expires, false), revocation, serial, file, e.subject].join(
    "\t",
  );
  return `${line}\n`;
}

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
