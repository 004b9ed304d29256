/**
 * index.txt's one parser: whole lines of bytes in, each certificate line's checked fields out to a
 * store, the entry list of ./index_db.ts (`svcd ca`) or the compact shared table of
 * ./index_compact.ts (the daemon). Both stores therefore accept the same lines with the same
 * meaning and refuse the same lines with the same message.
 *
 * One pass: each field is checked in place, with no string made for a line but a revoked one's
 * reason (the daemon re-reads the whole file on every revocation). A faulty line stops
 * the pass and is then named with the message of its first fault, the fields judged in the order:
 * their count, status, expiry, serial, file, revocation.
 *
 * Also the format's vocabulary: {@link IndexFormatError}, OpenSSL's reason names, the canonical
 * serial.
 *
 * @example
 * ```ts
 * const bytes = new TextEncoder().encode("V\t301231235959Z\t\t1A\tunknown\t/CN=a\n");
 * const line = new ParsedLine();
 * const serials: number[] = [];
 * parseLines(bytes, line, { add: (_, l) => serials.push(l.serialEnd - l.key) }); // → true
 * ```
 */

/** A fault in the file, with the line it is on. */
export class IndexFormatError extends Error {
  /** Example: `new IndexFormatError(3, "expected 6 TAB-separated fields")`. */
  constructor(readonly line: number, detail: string) {
    super(`index line ${line}: ${detail}`);
    this.name = "IndexFormatError";
  }
}

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
// ASCII case (strcasecmp). holdInstruction, keyTime and CAkeyTime carry an argument and stand for
// a reason code.
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

/** The reason names index.txt is written with, by code. Example: `REASON_NAME[1] === "keyCompromise"`. */
export const REASON_NAME: Readonly<Record<number, string>> = Object.fromEntries(
  REASON_NAMES.filter(([, , arg]) => !arg).map(([name, code]) => [code, name]),
);

const OID_TEXT = /^[0-2](\.(0|[1-9]\d*))+$/;
const GENERALIZED_TIME = /^\d{14}Z$/;
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

/** The reason names by their lower-case form. */
const REASON_BY_NAME = new Map(REASON_NAMES.map((r) => [r[0].toLowerCase(), r]));
const PRINTABLE_ASCII = /^[ -~]*$/;

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
  // Only ASCII letters are folded (strcasecmp): no other character is one of a name's letters.
  const known = PRINTABLE_ASCII.test(parts[0])
    ? REASON_BY_NAME.get(parts[0].toLowerCase())
    : undefined;
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

/**
 * The canonical form of a serial: upper-case hex without leading zeros ("0" for zero), as
 * `openssl ocsp -index` compares serials.
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

/** A status code's letter: 0 V (valid), 1 R (revoked), 2 E (expired). */
export const STATUS_LETTERS = ["V", "R", "E"] as const;
/** The status code of a revoked certificate. */
export const REVOKED = 1;

/**
 * Where the parser stands, and the fields of the line it last read: offsets into the bytes it was
 * given. One object serves a whole parse (no allocation per line); a store reads it during `add`.
 */
export class ParsedLine {
  /** 1-based number of the line, counting every line (comments too) since the first part. */
  number = 0;
  /** Offset of the line's first byte. */
  start = 0;
  /** 0 V, 1 R, 2 E (see {@link STATUS_LETTERS}). */
  status = 0;
  /** Offset of the expiry's digits, and their count: 12 (UTCTime) or 14 (GeneralizedTime). */
  expiry = 0;
  expiryDigits = 12;
  /** Revocation time (R only), seconds since 1970. */
  revokedAt = 0;
  /** CRLReason code (R only), -1 when the line gives none. */
  reason = -1;
  /**
   * Offsets of the serial as written, of its first digit after leading zeros (its last digit when
   * it is all zeros), and of its end.
   */
  serial = 0;
  key = 0;
  serialEnd = 0;
  /** End of the file field (it starts after the serial's TAB). */
  fileEnd = 0;
  /** Offset of the line's LF (the subject runs from after the file's TAB to here). */
  end = 0;
}

/** Keeps the lines the parser accepts. */
export interface IndexStore {
  /**
   * One certificate line, every field checked: where its fields are in `bytes` is in `line`
   * (valid during this call only). May throw (a repeated serial, a full memory).
   */
  add(bytes: Uint8Array, line: ParsedLine): void;
}

/** Bytes the parser stops at. */
export const TAB = 9, LF = 10, HASH_SIGN = 0x23;
const COMMA = 0x2c, ZERO = 0x30, Z = 0x5a;

// Character classes by byte: 1 digit, 2 upper-case hex letter.
const DIGIT = 1, HEX_LETTER = 2;
const CLASS = new Uint8Array(256);
for (let c = 0x30; c <= 0x39; c++) CLASS[c] = DIGIT;
for (let c = 0x41; c <= 0x46; c++) CLASS[c] = HEX_LETTER;

const statusCode = (b: number): number =>
  b === 0x56 ? 0 : b === 0x52 ? REVOKED : b === 0x45 ? 2 : -1;

/**
 * Parses `bytes`, whole lines each ending with LF (the caller checks that, and UTF-8), handing
 * each certificate line to `store`; `line` carries the line count from one part to the next.
 * Returns false at the first faulty line, which `line` then names ({@link lineError} says why).
 */
export function parseLines(bytes: Uint8Array, line: ParsedLine, store: IndexStore): boolean {
  const n = bytes.length;
  let p = 0, b: number;
  while (p < n) {
    line.number++;
    line.start = p;
    b = bytes[p];
    if (b === HASH_SIGN) {
      while (bytes[p] !== LF) p++;
      p++;
      continue;
    }
    const status = statusCode(b);
    if (status < 0 || bytes[p + 1] !== TAB) return false;
    p += 2;
    const digits = timeDigits(bytes, p, true);
    if (digits === 0 || bytes[p + digits + 1] !== TAB || !validTime(bytes, p, digits)) return false;
    line.expiry = p;
    line.expiryDigits = digits;
    p += digits + 2;
    let reason = -1, q: number;
    if (status === REVOKED) {
      if (timeDigits(bytes, p, false) === 0 || !validTime(bytes, p, 12)) return false;
      line.revokedAt = unixSeconds(bytes, p);
      p += 13;
      if (bytes[p] === COMMA) {
        q = p;
        while ((b = bytes[q]) !== TAB && b !== LF) q++;
        reason = reasonAt(bytes, p + 1, q);
        if (reason < 0) return false;
        p = q;
      }
    }
    if (bytes[p] !== TAB) return false;
    line.status = status;
    line.reason = reason;
    line.serial = ++p;
    while (bytes[p] === ZERO) p++;
    q = p;
    while (CLASS[bytes[q]] !== 0) q++;
    if (bytes[q] !== TAB || q === line.serial) return false;
    line.key = p === q ? p - 1 : p; // all zeros: the serial 0
    line.serialEnd = q;
    // file: not empty
    p = ++q;
    while ((b = bytes[q]) !== TAB) {
      if (b === LF) return false;
      q++;
    }
    if (q === p) return false;
    line.fileEnd = q;
    // subject: anything but TAB up to the newline
    p = q + 1;
    while ((b = bytes[p]) !== LF) {
      if (b === TAB) return false;
      p++;
    }
    line.end = p++;
    store.add(bytes, line);
  }
  return true;
}

/**
 * The count of digits (12, or 14 where `generalizedToo`) of a time YYMMDDHHMMSSZ (or
 * YYYYMMDDHHMMSSZ) at `at`, followed by its Z; 0 when there is none.
 */
function timeDigits(bytes: Uint8Array, at: number, generalizedToo: boolean): number {
  let q = at;
  while (CLASS[bytes[q]] === DIGIT) q++;
  const digits = q - at;
  return (digits === 12 || (generalizedToo && digits === 14)) && bytes[q] === Z ? digits : 0;
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const digitPair = (bytes: Uint8Array, at: number) => (bytes[at] - 0x30) * 10 + bytes[at + 1] - 0x30;

/** The year of a time's digits: YY below 50 is 20YY, else 19YY; YYYY as written. */
function yearOf(bytes: Uint8Array, at: number, digits: number): number {
  if (digits === 14) return digitPair(bytes, at) * 100 + digitPair(bytes, at + 2);
  const yy = digitPair(bytes, at);
  return yy + (yy < 50 ? 2000 : 1900);
}

/**
 * Whether the time's digits at `at` name a time that exists. Four-digit years below 100 are judged
 * as 19YY, as `Date.UTC` reads them. Kept small (no calls but the rare leap day's) so that the
 * compiler takes it into the parser's loop.
 */
function validTime(bytes: Uint8Array, at: number, digits: number): boolean {
  const o = at + digits - 10;
  // A pair of ASCII digits: 10 × (a − 0x30) + (b − 0x30) = 10a + b − 528.
  const mo = bytes[o] * 10 + bytes[o + 1] - 528, da = bytes[o + 2] * 10 + bytes[o + 3] - 528;
  if (mo < 1 || mo > 12 || da < 1 || bytes[o + 4] * 10 + bytes[o + 5] - 528 > 23) return false;
  if (bytes[o + 6] * 10 + bytes[o + 7] - 528 > 59 || bytes[o + 8] * 10 + bytes[o + 9] > 587) {
    return false;
  }
  return da <= DAYS[mo - 1] || (mo === 2 && da === 29 && leapYear(bytes, at, digits));
}

function leapYear(bytes: Uint8Array, at: number, digits: number): boolean {
  let year = yearOf(bytes, at, digits);
  if (year < 100) year += 1900;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/**
 * Milliseconds since 1970 of a valid time's digits at `at`.
 *
 * @example
 * ```ts
 * timeMs(new TextEncoder().encode("250101000000Z"), 0, 12); // → 1735689600000
 * ```
 */
export function timeMs(bytes: Uint8Array, at: number, digits: number): number {
  const o = at + digits - 10;
  const d = (i: number) => digitPair(bytes, o + i);
  return Date.UTC(yearOf(bytes, at, digits), d(0) - 1, d(2), d(4), d(6), d(8));
}

function unixSeconds(bytes: Uint8Array, at: number): number {
  return timeMs(bytes, at, 12) / 1000;
}

/** The CRL reason of `name[,argument]` at bytes from..to, or -1. */
function reasonAt(bytes: Uint8Array, from: number, to: number): number {
  let text = "";
  for (let i = from; i < to; i++) text += String.fromCharCode(bytes[i]);
  try {
    return reasonCodeOf(text.split(","), 0);
  } catch {
    return -1;
  }
}

const UTF8 = new TextDecoder();

/**
 * Why the line `line` names (the one {@link parseLines} stopped at) is faulty: the message of its
 * first fault.
 */
export function lineError(bytes: Uint8Array, line: ParsedLine): IndexFormatError {
  const n = line.number;
  let end = bytes.indexOf(LF, line.start);
  if (end < 0) end = bytes.length;
  const at = [line.start - 1];
  for (let i = line.start; i < end; i++) if (bytes[i] === TAB) at.push(i);
  at.push(end);
  const fault = (detail: string) => new IndexFormatError(n, detail);
  if (at.length !== 7) return fault(`expected 6 TAB-separated fields, found ${at.length - 1}`);
  const from = (field: number) => at[field] + 1;
  const text = (field: number) => UTF8.decode(bytes.subarray(from(field), at[field + 1]));
  const status = statusCode(bytes[from(0)]);
  if (at[1] - from(0) !== 1 || status < 0) {
    return fault(`status must be V, R or E, not ${JSON.stringify(text(0))}`);
  }
  const expiry = timeFault(bytes, from(1), at[2], "expiry", true);
  if (expiry) return fault(expiry);
  let q = from(3);
  while (CLASS[bytes[q]] !== 0) q++;
  if (q !== at[4] || q === from(3)) {
    return fault(`serial must be upper-case hex, not ${JSON.stringify(text(3))}`);
  }
  if (at[5] === from(4)) return fault("empty file field (OpenSSL writes 'unknown')");
  if (status !== REVOKED) {
    if (at[3] !== from(2)) return fault(`status ${STATUS_LETTERS[status]} with a revocation field`);
  } else {
    let comma = bytes.indexOf(COMMA, from(2));
    if (comma < 0 || comma > at[3]) comma = at[3];
    const revocation = timeFault(bytes, from(2), comma, "revocation time", false);
    if (revocation) return fault(revocation);
    if (comma < at[3]) {
      try {
        reasonCodeOf(UTF8.decode(bytes.subarray(comma + 1, at[3])).split(","), n);
      } catch (e) {
        return e as IndexFormatError;
      }
    }
  }
  return fault("not a line openssl ca writes");
}

/** Why the field from..to is not a time (GeneralizedTime too where `generalizedToo`), or null. */
function timeFault(
  bytes: Uint8Array,
  from: number,
  to: number,
  what: string,
  generalizedToo: boolean,
): string | null {
  const digits = timeDigits(bytes, from, generalizedToo);
  const text = UTF8.decode(bytes.subarray(from, to));
  if (digits === 0 || from + digits + 1 !== to) {
    return `${what} must be a time YYMMDDHHMMSSZ, not ${JSON.stringify(text)}`;
  }
  return validTime(bytes, from, digits) ? null : `${what} ${text} is not a real time`;
}

/**
 * The fault of a file whose last line has no LF (cut short while written?), or null.
 *
 * @example
 * ```ts
 * unfinishedLine(new TextEncoder().encode("V\t301231235959Z\t\t1A\tunknown\t/CN=a"))?.line; // 1
 * ```
 */
export function unfinishedLine(bytes: Uint8Array): IndexFormatError | null {
  const n = bytes.length;
  if (n === 0 || bytes[n - 1] === LF) return null;
  let lines = 1;
  for (let i = 0; i < n; i++) if (bytes[i] === LF) lines++;
  return new IndexFormatError(lines, "the last line has no newline (file cut short?)");
}

/**
 * The fault of a serial seen before (equal once leading zeros are dropped): on the second line,
 * naming the first.
 */
export function repeatedSerial(line: number, serial: string, firstLine: number): IndexFormatError {
  return new IndexFormatError(line, `serial ${serial} is already on line ${firstLine}`);
}
