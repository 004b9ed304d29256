/**
 * A strict, bounded DER reader. It accepts only what DER allows: single-byte tags, definite lengths
 * in their shortest form, contents that end exactly where their parent does, a bounded nesting
 * depth and a bounded input size. It never builds a tree: a schema-driven parser walks the bytes in
 * place, so anything an anonymous client sends is either accepted exactly or refused.
 *
 * @example
 * ```ts
 * import { DerReader } from "./read.ts";
 * import { TAG } from "./tags.ts";
 * import { oid, sequence } from "./write.ts";
 * const r = new DerReader(sequence(oid("1.3.101.112")));
 * const inner = r.enter(TAG.SEQUENCE);
 * inner.readOid(); // the OID's content bytes
 * inner.finish();
 * r.finish();
 * ```
 */
import { TAG } from "./tags.ts";

/** Nesting the reader follows before refusing (OCSP requests need 7, certificates about 10). */
export const MAX_DEPTH = 16;
/** Largest input the reader accepts: 16 MiB, far above any certificate or OCSP message. */
export const MAX_INPUT = 16 * 1024 * 1024;

/** Input that is not the DER the caller expected. The message names what and where. */
export class DerError extends Error {
  /** Example: `new DerError("expected SEQUENCE", 4)`. */
  constructor(message: string, readonly offset: number) {
    super(`${message} at byte ${offset}`);
    this.name = "DerError";
  }
}

/** One element: its tag and where its header, content and end are in the input. */
export interface Tlv {
  tag: number;
  /** Offset of the identifier octet. */
  start: number;
  /** Offset of the first content byte. */
  contentStart: number;
  /** Offset just past the content. */
  end: number;
}

/**
 * Reads the elements between `start` and `end` of `bytes` one after another. Every read checks the
 * element against DER; `enter` descends into a constructed element with a child reader that must
 * be `finish`ed (all of its content consumed).
 *
 * @example
 * ```ts
 * const r = new DerReader(Uint8Array.of(0x02, 0x01, 0x05));
 * r.readSmallInteger(); // 5
 * r.finish();
 * ```
 */
export class DerReader {
  #pos: number;

  /** A reader over `bytes[start, end)`. Example: `new DerReader(der)`. */
  constructor(
    readonly bytes: Uint8Array,
    start = 0,
    readonly end = bytes.length,
    readonly depth = 0,
  ) {
    if (bytes.length > MAX_INPUT) throw new DerError(`input over ${MAX_INPUT} bytes`, 0);
    if (depth > MAX_DEPTH) throw new DerError(`nesting deeper than ${MAX_DEPTH}`, start);
    this.#pos = start;
  }

  /** Offset of the next element. Example: `r.offset`. */
  get offset(): number {
    return this.#pos;
  }

  /** No element left? Example: `while (!r.done) r.next()`. */
  get done(): boolean {
    return this.#pos >= this.end;
  }

  /** Tag of the next element, or -1 at the end. Example: `r.peekTag() === ctx(0)`. */
  peekTag(): number {
    return this.#pos < this.end ? this.bytes[this.#pos] : -1;
  }

  /** The next element, whatever its tag. Example: `const t = r.next()`. */
  next(): Tlv {
    const b = this.bytes;
    const start = this.#pos;
    if (start + 2 > this.end) throw new DerError("truncated element", start);
    const tag = b[start];
    if ((tag & 0x1f) === 0x1f) throw new DerError("multi-byte tag", start);
    let len = b[start + 1];
    let at = start + 2;
    if (len & 0x80) {
      const n = len & 0x7f;
      if (n === 0) throw new DerError("indefinite length", start);
      if (n > 4) throw new DerError("length field over 4 bytes", start);
      if (at + n > this.end) throw new DerError("truncated length", start);
      if (b[at] === 0) throw new DerError("length not in its shortest form", start);
      len = 0;
      for (let i = 0; i < n; i++) len = len * 256 + b[at + i];
      if (len < 0x80) throw new DerError("length not in its shortest form", start);
      at += n;
    }
    const end = at + len;
    if (end > this.end) throw new DerError("element runs past its parent", start);
    this.#pos = end;
    return { tag, start, contentStart: at, end };
  }

  /** The next element, which must have `tag`. Example: `r.expect(TAG.OCTET_STRING)`. */
  expect(tag: number, what?: string): Tlv {
    if (this.peekTag() !== tag) {
      const found = this.done ? ", found the end" : "";
      throw new DerError(`expected ${what ?? tagName(tag)}${found}`, this.#pos);
    }
    return this.next();
  }

  /** The next element if it has `tag`, else null (nothing consumed). Example: `r.optional(ctx(0))`. */
  optional(tag: number): Tlv | null {
    return this.peekTag() === tag ? this.next() : null;
  }

  /** A reader over the content of the next element, which must have `tag`. Example: `r.enter(TAG.SEQUENCE)`. */
  enter(tag: number, what?: string): DerReader {
    const t = this.expect(tag, what);
    return new DerReader(this.bytes, t.contentStart, t.end, this.depth + 1);
  }

  /** `enter` when the next element has `tag`, else null. Example: `r.enterOptional(ctx(1))`. */
  enterOptional(tag: number): DerReader | null {
    return this.peekTag() === tag ? this.enter(tag) : null;
  }

  /** Refuses anything left after the last expected element. Example: `r.finish()`. */
  finish(what = "element"): void {
    if (this.#pos !== this.end) {
      throw new DerError(`unexpected data after the last ${what}`, this.#pos);
    }
  }

  /** The whole encoding (header and content) of an element. Example: `r.raw(r.next())`. */
  raw(t: Tlv): Uint8Array {
    return this.bytes.subarray(t.start, t.end);
  }

  /** The content of an element. Example: `r.content(r.expect(TAG.OCTET_STRING))`. */
  content(t: Tlv): Uint8Array {
    return this.bytes.subarray(t.contentStart, t.end);
  }

  /** OBJECT IDENTIFIER content bytes (compare with `bytesEqual`). Example: `r.readOid()`. */
  readOid(tag: number = TAG.OID): Uint8Array {
    const t = this.expect(tag);
    const c = this.content(t);
    if (c.length === 0) throw new DerError("empty OBJECT IDENTIFIER", t.start);
    // Each arc ends on a byte without the high bit and never starts with 0x80 (padding).
    for (let i = 0; i < c.length; i++) {
      if (c[i] === 0x80 && (i === 0 || !(c[i - 1] & 0x80))) {
        throw new DerError("OBJECT IDENTIFIER arc not in its shortest form", t.start);
      }
    }
    if (c[c.length - 1] & 0x80) throw new DerError("truncated OBJECT IDENTIFIER", t.start);
    return c;
  }

  /**
   * Any one element, its constructed contents walked to the bottom so every nested header is DER
   * (for fields read as "any value"). Constructed universal types other than SEQUENCE and SET are
   * BER-only (constructed strings) and refused. Example: `r.skipStrict()`.
   */
  skipStrict(): Tlv {
    const t = this.next();
    if (!(t.tag & 0x20)) return t;
    if ((t.tag & 0xc0) === 0 && t.tag !== TAG.SEQUENCE && t.tag !== TAG.SET) {
      throw new DerError("constructed string (BER, not DER)", t.start);
    }
    const inner = new DerReader(this.bytes, t.contentStart, t.end, this.depth + 1);
    while (!inner.done) inner.skipStrict();
    return t;
  }

  /** OCTET STRING content. Example: `r.readOctetString()`. */
  readOctetString(): Uint8Array {
    return this.content(this.expect(TAG.OCTET_STRING));
  }

  /** INTEGER content (two's complement, checked minimal). Example: `r.readIntegerBytes(20)`. */
  readIntegerBytes(maxLength = 64, tag: number = TAG.INTEGER): Uint8Array {
    const t = this.expect(tag);
    const c = this.content(t);
    checkInteger(c, t.start, maxLength);
    return c;
  }

  /** A non-negative INTEGER small enough for a number. Example: `r.readSmallInteger()`. */
  readSmallInteger(tag: number = TAG.INTEGER): number {
    const c = this.readIntegerBytes(6, tag);
    if (c[0] & 0x80) throw new DerError("negative INTEGER", this.#pos);
    let v = 0;
    for (const b of c) v = v * 256 + b;
    return v;
  }

  /** ENUMERATED value. Example: `r.readEnumerated()`. */
  readEnumerated(): number {
    return this.readSmallInteger(TAG.ENUMERATED);
  }

  /** BOOLEAN (DER: 0x00 or 0xff only). Example: `r.readBoolean()`. */
  readBoolean(): boolean {
    const t = this.expect(TAG.BOOLEAN);
    const c = this.content(t);
    if (c.length !== 1 || (c[0] !== 0 && c[0] !== 0xff)) {
      throw new DerError("BOOLEAN not DER", t.start);
    }
    return c[0] === 0xff;
  }

  /** NULL. Example: `r.readNull()`. */
  readNull(): void {
    const t = this.expect(TAG.NULL);
    if (t.end !== t.contentStart) throw new DerError("NULL with content", t.start);
  }

  /** BIT STRING bytes with no unused bits (keys, signatures). Example: `r.readBitStringBytes()`. */
  readBitStringBytes(): Uint8Array {
    const t = this.expect(TAG.BIT_STRING);
    const c = this.content(t);
    if (c.length === 0 || c[0] !== 0) throw new DerError("BIT STRING with unused bits", t.start);
    return c.subarray(1);
  }

  /** UTCTime or GeneralizedTime in their DER forms, as ms since the epoch. Example: `r.readTime()`. */
  readTime(): number {
    const t = this.next();
    const c = this.content(t);
    if (t.tag === TAG.UTC_TIME) return parseDerTime(c, 2, t.start);
    if (t.tag === TAG.GENERALIZED_TIME) return parseDerTime(c, 4, t.start);
    throw new DerError("expected UTCTime or GeneralizedTime", t.start);
  }
}

function checkInteger(c: Uint8Array, at: number, maxLength: number): void {
  if (c.length === 0) throw new DerError("empty INTEGER", at);
  if (c.length > maxLength) throw new DerError(`INTEGER over ${maxLength} bytes`, at);
  if (c.length > 1 && ((c[0] === 0 && !(c[1] & 0x80)) || (c[0] === 0xff && c[1] & 0x80))) {
    throw new DerError("INTEGER not in its shortest form", at);
  }
}

// DER times: digits then Z, seconds present, no fraction (what every profile here writes).
function parseDerTime(c: Uint8Array, yearDigits: 2 | 4, at: number): number {
  const n = yearDigits + 10;
  if (c.length !== n + 1 || c[n] !== 0x5a) throw new DerError("time not in DER form", at);
  let v = 0;
  const field = (from: number, len: number): number => {
    v = 0;
    for (let i = from; i < from + len; i++) {
      const d = c[i] - 0x30;
      if (d < 0 || d > 9) throw new DerError("time not in DER form", at);
      v = v * 10 + d;
    }
    return v;
  };
  let year = field(0, yearDigits);
  if (yearDigits === 2) year += year < 50 ? 2000 : 1900; // RFC 5280 §4.1.2.5.1
  const p = yearDigits;
  const month = field(p, 2), day = field(p + 2, 2);
  const hour = field(p + 4, 2), minute = field(p + 6, 2), second = field(p + 8, 2);
  const ms = Date.UTC(year, month - 1, day, hour, minute, second);
  const d = new Date(ms);
  if (
    month < 1 || d.getUTCMonth() !== month - 1 || d.getUTCDate() !== day || hour > 23 ||
    minute > 59 || second > 59
  ) {
    throw new DerError("time out of range", at);
  }
  return ms;
}

function tagName(tag: number): string {
  for (const [k, v] of Object.entries(TAG)) if (v === tag) return k.replace("_", " ");
  if ((tag & 0xc0) === 0x80) return `[${tag & 0x1f}]`;
  return `tag 0x${tag.toString(16)}`;
}

/** Dotted text of OBJECT IDENTIFIER content bytes (for messages). Example: `oidText(c) === "1.3.101.112"`. */
export function oidText(content: Uint8Array): string {
  const arcs: number[] = [];
  let v = 0;
  for (const b of content) {
    v = v * 128 + (b & 0x7f);
    if (!(b & 0x80)) {
      if (arcs.length === 0) arcs.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
      else arcs.push(v);
      v = 0;
    }
  }
  return arcs.join(".");
}

/**
 * The content of a single DER OCTET STRING, or null when `der` is not exactly one. Example:
 * `unwrapOctetString(Uint8Array.of(4, 1, 7))` → `[7]`.
 */
export function unwrapOctetString(der: Uint8Array): Uint8Array | null {
  if (der.length < 2 || der[0] !== 0x04) return null;
  let len = der[1];
  let at = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 3 || der.length < 2 + n) return null;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[2 + i];
    at = 2 + n;
  }
  return at + len === der.length ? der.subarray(at) : null;
}
