/**
 * The revocation database in one compact block of shared memory, read straight from index.txt's
 * bytes: what every public thread answers from, built by one parse (./index_source.ts decides when).
 *
 * Only what an OCSP answer needs is kept: per certificate its serial (canonical: leading `0`
 * digits dropped, as `openssl ocsp -index` compares them), status, revocation time and reason. The
 * other fields are checked as strictly as the line-by-line reader (./index_db.ts `parseIndex`)
 * checks them and then forgotten. Whatever this reader accepts, `parseIndex` accepts with the same
 * meaning, and a file either is refused whole (IndexFormatError naming the same first faulty line
 * with the same message) or not at all (index_compact_test.ts compares the two over generated
 * files).
 *
 * Layout of an {@link IndexMemory} (one SharedArrayBuffer, sized for `maxEntries` when it is made;
 * the kernel backs only the pages a database touches, so an unused reservation costs address space,
 * not memory):
 *
 * | bytes                           | what                                                           |
 * | ------------------------------- | -------------------------------------------------------------- |
 * | 0 … 4095                        | header: lock words, version, counts, file stamp, content hash, error text |
 * | keyEnd: 4 × (maxEntries + 1)    | end offset of each entry's key in the key heap (entry 0 starts at 0) |
 * | revoked: 4 × maxEntries         | revocation time, seconds since 1950-01-01 (UTCTime's range)    |
 * | meta: 1 × maxEntries            | status (2 bits), CRL reason (4 bits, 15 = none), odd-length key (1 bit) |
 * | heap: 20 × maxEntries           | keys: the canonical serial's hex digits packed two to a byte   |
 * | table: 4 × (1.5 × maxEntries + 2) | open-addressing hash table: entry number + 1, 0 = empty slot  |
 *
 * Per certificate that is 4 + 4 + 1 + ⌈digits/2⌉ bytes plus 4 × 1.5 of table: 29.5 bytes for the
 * 16-byte serials `svcd ca` issues, 33.5 for the longest serial RFC 5280 allows (20 bytes); no
 * other per-certificate memory exists (no objects, no strings).
 *
 * @example
 * ```ts
 * const memory = createIndexMemory(1000);
 * const bytes = new TextEncoder().encode("R\t301231235959Z\t250101000000Z,keyCompromise\t1A\tunknown\t/CN=a\n");
 * loadIndexBytes(memory, bytes);
 * new CompactIndex(memory).find("001a"); // { status: "R", revokedAt: 1735689600000, reason: 1 }
 * ```
 */
import { isUtf8 } from "node:buffer";
import {
  IndexFormatError,
  parseIndexLine,
  reasonCodeOf,
  type RevocationEntry,
} from "./index_db.ts";

/** Most certificates an index may hold by default (`--ocsp-max-entries`). */
export const MAX_INDEX_ENTRIES = 10_000_000;

/** Key heap bytes reserved per entry: a 20-byte serial, the longest RFC 5280 allows. */
const HEAP_PER_ENTRY = 20;
const HEADER_BYTES = 4096;

/** Int32 slots of the header. */
export const H = {
  /** 0 idle, 1 a thread is re-reading the file (writes the database). */
  state: 0,
  /** Lookups running now (a writer waits for 0). */
  readers: 1,
  /** Changes with every load, good or bad. */
  version: 2,
  /** Parses done in this memory (tests count them). */
  parses: 3,
  /** 1 when the database answers; 0 when never loaded or the last load failed. */
  loaded: 4,
  count: 5,
  tableCap: 6,
  /** 1 when the content hash below is that of the bytes parsed (file recent at the load). */
  hashed: 7,
  errorLength: 8,
  maxEntries: 9,
  /** 1 when the last load failed because of the entry limit. */
  overLimit: 10,
  /** Checks of the file begun (under the write lock) and finished, by every thread. */
  checksBegun: 11,
  checksDone: 12,
  /** Reads of the file after a change (whole or in chunks), by every thread (tests count them). */
  reads: 13,
  /** The hash table's tag bits (see `tagMaskOf`): a mask, 0 when the table holds no tags. */
  tagMask: 14,
} as const;

/** Float64 slots of the header (bytes 64…): the stamp of the file the database came from. */
export const F = {
  hasStamp: 8,
  dev: 9,
  ino: 10,
  size: 11,
  mtimeSec: 12,
  mtimeNsec: 13,
  ctimeSec: 14,
  ctimeNsec: 15,
  /** Latest file time of the stamp (mtime or ctime, rounded up), ms. */
  changedAt: 16,
  /** How long after changedAt a rewrite may still leave the stamp unchanged, ms. */
  racyWindow: 17,
  /** When the content was last read and matched, ms. */
  verifiedAt: 18,
} as const;

const HASH_AT = 160;
const HASH_BYTES = 32;
const ERROR_AT = 256;

/** Seconds from 1970-01-01 to 1950-01-01, UTCTime's first year. */
const EPOCH_1950_S = 631152000;

const STATUS_LETTERS = ["V", "R", "E"] as const;
const NO_REASON = 15;

/**
 * Shared memory holding one database; plain data, so it crosses to a Worker by `postMessage` and
 * every thread given it reads the same bytes.
 */
export interface IndexMemory {
  buffer: SharedArrayBuffer;
}

/** Bytes an {@link IndexMemory} for `maxEntries` reserves. Example: `indexMemoryBytes(10)`. */
export function indexMemoryBytes(maxEntries: number): number {
  const l = layoutOf(maxEntries);
  return l.table + 4 * tableCapacity(maxEntries);
}

/**
 * Shared memory for an index of at most `maxEntries` certificates (address space reserved; memory
 * used only as a database fills it).
 *
 * @example
 * ```ts
 * const memory = createIndexMemory(MAX_INDEX_ENTRIES); // handed to every public thread
 * ```
 */
export function createIndexMemory(maxEntries: number = MAX_INDEX_ENTRIES): IndexMemory {
  if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
    throw new RangeError(`the entry limit must be a whole number ≥ 1, not ${maxEntries}`);
  }
  const buffer = new SharedArrayBuffer(indexMemoryBytes(maxEntries));
  new Int32Array(buffer, 0, 16)[H.maxEntries] = maxEntries;
  return { buffer };
}

interface Layout {
  keyEnd: number;
  revoked: number;
  meta: number;
  heap: number;
  heapBytes: number;
  table: number;
}

function layoutOf(maxEntries: number): Layout {
  const keyEnd = HEADER_BYTES;
  const revoked = keyEnd + 4 * (maxEntries + 1);
  const meta = revoked + 4 * maxEntries;
  const heap = meta + maxEntries;
  const heapBytes = HEAP_PER_ENTRY * maxEntries;
  // The table's Uint32 view needs a 4-byte aligned offset.
  const table = (heap + heapBytes + 3) & ~3;
  return { keyEnd, revoked, meta, heap, heapBytes, table };
}

function tableCapacity(entries: number): number {
  return entries + (entries >> 1) + 1;
}

/** The index has more certificates than the memory was made for. */
export class IndexLimitError extends Error {
  override name = "IndexLimitError";
  /** Example: `new IndexLimitError(10_000_000)`. */
  constructor(readonly maxEntries: number, detail?: string) {
    super(
      detail ??
        `more than ${maxEntries} certificates, the most --ocsp-max-entries allows; raise ` +
          `--ocsp-max-entries (each certificate takes about 34 bytes of memory)`,
    );
  }
}

/** Views over one memory. */
class Views {
  readonly i32: Int32Array;
  readonly f64: Float64Array;
  readonly bytes: Uint8Array;
  readonly keyEnd: Uint32Array;
  readonly revoked: Uint32Array;
  readonly meta: Uint8Array;
  readonly heap: Uint8Array;
  readonly table: Uint32Array;
  readonly maxEntries: number;

  constructor(readonly memory: IndexMemory) {
    const buffer = memory.buffer;
    this.i32 = new Int32Array(buffer, 0, 64);
    this.f64 = new Float64Array(buffer, 0, 32);
    this.bytes = new Uint8Array(buffer);
    const max = this.i32[H.maxEntries];
    this.maxEntries = max;
    const l = layoutOf(max);
    this.keyEnd = new Uint32Array(buffer, l.keyEnd, max + 1);
    this.revoked = new Uint32Array(buffer, l.revoked, max);
    this.meta = new Uint8Array(buffer, l.meta, max);
    this.heap = new Uint8Array(buffer, l.heap, l.heapBytes);
    this.table = new Uint32Array(buffer, l.table, tableCapacity(max));
  }
}

const viewCache = new WeakMap<SharedArrayBuffer, Views>();

/** The views of a memory, made once per thread. */
export function viewsOf(memory: IndexMemory): Views {
  let v = viewCache.get(memory.buffer);
  if (!v) viewCache.set(memory.buffer, v = new Views(memory));
  return v;
}

export type { Views as IndexViews };

/**
 * Parses index.txt's bytes into `memory`, replacing what it held; the caller holds the write lock
 * (./index_source.ts) or is the memory's only user. Throws IndexFormatError (the same first fault
 * and message as `parseIndex`) or IndexLimitError; the memory then holds no database (`loaded` 0).
 * Returns the number of certificates.
 *
 * @example
 * ```ts
 * declare const memory: IndexMemory;
 * loadIndexBytes(memory, await Deno.readFile("index.txt")); // → 3
 * ```
 */
export function loadIndexBytes(memory: IndexMemory, bytes: Uint8Array): number {
  const v = viewsOf(memory);
  v.i32[H.parses]++;
  return loadWhole(v, bytes);
}

function loadWhole(v: Views, bytes: Uint8Array): number {
  const cursor = startLoad(v);
  // The whole file at once, natively: the line loop then treats every byte ≥ 0x80 as text.
  if (!isUtf8(bytes)) throw NOT_UTF8;
  const n = bytes.length;
  if (n > 0 && bytes[n - 1] !== LF) {
    throw new IndexFormatError(
      countLines(bytes, n) + 1,
      "the last line has no newline (file cut short?)",
    );
  }
  readEntries(v, bytes, cursor, (start, line, count) => lineFault(v, bytes, start, line, count));
  const duplicate = placeKeys(v, cursor);
  if (duplicate) throw duplicateError(bytes, duplicate);
  return finishLoad(v, cursor);
}

/**
 * Loads an index file, opened by the caller and read from its start, as {@link loadIndexBytes}
 * loads its bytes: read `chunkBytes` at a time into one buffer this thread reuses, so that a file of
 * a million lines is never a fresh allocation of its size, whose pages the kernel would first have
 * to fault in and clear. A file with a fault (or more certificates than the memory holds) is read
 * again whole from the same open file (`readWhole`) and loaded as {@link loadIndexBytes} loads it,
 * so its error is the same, naming the same line.
 *
 * @example
 * ```ts
 * declare const memory: IndexMemory;
 * using file = Deno.openSync("/var/lib/svcd/ca/index.txt");
 * loadIndexFile(memory, file); // → certificates loaded
 * ```
 */
export function loadIndexFile(
  memory: IndexMemory,
  file: Deno.FsFile,
  chunkBytes: number = CHUNK_BYTES,
  readWhole: (file: Deno.FsFile) => Uint8Array = readAllFrom,
): number {
  const v = viewsOf(memory);
  v.i32[H.parses]++;
  try {
    return loadInChunks(v, file, chunkBytes);
  } catch (e) {
    if (e !== READ_WHOLE && !(e instanceof IndexLimitError)) throw e;
  }
  file.seekSync(0, Deno.SeekMode.Start);
  return loadWhole(v, readWhole(file));
}

/** Thrown by a chunked load at a fault: the whole file is read again for the exact error. */
const READ_WHOLE = new Error("read the whole file for the error");
const readWhole = (): never => {
  throw READ_WHOLE;
};

/** Bytes read at a time by {@link loadIndexFile}; a longer line is read whole. */
const CHUNK_BYTES = 1 << 20;
let chunkBuffer: Uint8Array | undefined;

function loadInChunks(v: Views, file: Deno.FsFile, chunkBytes: number): number {
  if (chunkBuffer?.length !== chunkBytes) chunkBuffer = new Uint8Array(chunkBytes);
  const buf = chunkBuffer;
  const cursor = startLoad(v);
  let kept = 0;
  for (;;) {
    const n = file.readSync(buf.subarray(kept));
    if (n === null || n === 0) break;
    const filled = kept + n;
    // Whole lines only: a UTF-8 sequence never spans an LF, so each part is checked on its own.
    const end = buf.lastIndexOf(LF, filled - 1) + 1;
    if (end === 0) {
      if (filled === buf.length) throw READ_WHOLE;
      kept = filled;
      continue;
    }
    const lines = buf.subarray(0, end);
    if (!isUtf8(lines)) throw READ_WHOLE;
    readEntries(v, lines, cursor, readWhole);
    buf.copyWithin(0, end, filled);
    kept = filled - end;
  }
  if (kept > 0) throw READ_WHOLE; // the last line has no newline
  if (placeKeys(v, cursor)) throw READ_WHOLE;
  return finishLoad(v, cursor);
}

/** The rest of an open file, from where it stands to its end. */
function readAllFrom(file: Deno.FsFile): Uint8Array {
  let buf = new Uint8Array(Math.max(file.statSync().size + 1, 4096));
  let got = 0;
  for (let n; (n = file.readSync(buf.subarray(got))) !== null && n > 0;) {
    got += n;
    if (got === buf.length) {
      const more = new Uint8Array(buf.length * 2);
      more.set(buf);
      buf = more;
    }
  }
  return buf.subarray(0, got);
}

/** Where a load stands between two parts of the file. */
interface LoadCursor {
  line: number;
  count: number;
  heapAt: number;
  /**
   * Every key so far is the one the memory held at the same place after the last complete load:
   * with the same count at the end, that load's hash table still maps every serial to its entry.
   */
  keysAsBefore: boolean;
  countBefore: number;
}

function startLoad(v: Views): LoadCursor {
  const complete = Atomics.load(v.i32, H.loaded) === 1;
  Atomics.store(v.i32, H.loaded, 0);
  v.i32[H.overLimit] = 0;
  v.keyEnd[0] = 0;
  return { line: 0, count: 0, heapAt: 0, keysAsBefore: complete, countBefore: v.i32[H.count] };
}

/**
 * Fills the hash table unless the serials are the ones it was filled with (a revocation changes a
 * status, not a serial): then it stands as it is. The first repeated serial, if any.
 */
function placeKeys(v: Views, cursor: LoadCursor): Duplicate | null {
  if (cursor.keysAsBefore && cursor.count === cursor.countBefore) return null;
  return buildTable(v, cursor.count);
}

function finishLoad(v: Views, cursor: LoadCursor): number {
  v.i32[H.count] = cursor.count;
  Atomics.store(v.i32, H.loaded, 1);
  return cursor.count;
}

// Character classes by byte: 1 digit, 2 upper-case hex letter.
const DIGIT = 1, HEX_LETTER = 2;
const CLASS = new Uint8Array(256);
for (let c = 0x30; c <= 0x39; c++) CLASS[c] = DIGIT;
for (let c = 0x41; c <= 0x46; c++) CLASS[c] = HEX_LETTER;

const TAB = 9, LF = 10, HASH_SIGN = 0x23, COMMA = 0x2c, ZERO = 0x30, Z = 0x5a;
/** The bit of an entry's meta byte that says its key has an odd number of hex digits. */
const ODD_KEY = 0x80;

/**
 * One pass over whole lines (each ends with LF; checked as UTF-8 by the caller): each line checked
 * field by field and its entry appended after the ones `cursor` counts. No string is made for a
 * line except the reason of a revoked one. A line that is not valid goes to `fault`.
 */
function readEntries(
  v: Views,
  bytes: Uint8Array,
  cursor: LoadCursor,
  fault: (start: number, line: number, count: number) => never,
): void {
  const n = bytes.length;
  const { keyEnd, revoked, meta, heap, maxEntries } = v;
  const heapLimit = heap.length;
  let p = 0, { line, count, heapAt } = cursor;
  // Any difference from the keys the memory held before (bytes, lengths, odd digit counts).
  let keyDiff = 0;
  while (p < n) {
    line++;
    const start = p;
    let b = bytes[p];
    if (b === HASH_SIGN) {
      while (bytes[p] !== LF) p++;
      p++;
      continue;
    }
    // status
    const status = b === 0x56 ? 0 : b === 0x52 ? 1 : b === 0x45 ? 2 : -1;
    if (status < 0 || bytes[p + 1] !== TAB) return fault(start, line, count);
    p += 2;
    // expiry: UTCTime or GeneralizedTime
    let q = p;
    while (CLASS[bytes[q]] === DIGIT) q++;
    const digits = q - p;
    if ((digits !== 12 && digits !== 14) || bytes[q] !== Z || bytes[q + 1] !== TAB) {
      return fault(start, line, count);
    }
    if (!validTime(bytes, p, digits)) return fault(start, line, count);
    p = q + 2;
    // revocation (R only)
    let revokedAt = 0, reason = NO_REASON;
    if (status === 1) {
      q = p;
      while (CLASS[bytes[q]] === DIGIT) q++;
      if (q - p !== 12 || bytes[q] !== Z) return fault(start, line, count);
      if (!validTime(bytes, p, 12)) return fault(start, line, count);
      revokedAt = unixSeconds(bytes, p) + EPOCH_1950_S;
      p = q + 1;
      if (bytes[p] === COMMA) {
        q = p;
        while ((b = bytes[q]) !== TAB && b !== LF) q++;
        const code = reasonOf(bytes, p + 1, q);
        if (code < 0) return fault(start, line, count);
        reason = code;
        p = q;
      }
    }
    if (bytes[p] !== TAB) return fault(start, line, count);
    p++;
    // serial: upper-case hex, kept without leading zeros, packed two digits a byte
    let s = p;
    while (bytes[s] === ZERO) s++;
    q = s;
    while (CLASS[bytes[q]] !== 0) q++;
    if (bytes[q] !== TAB || q === p) return fault(start, line, count);
    if (s === q) s--; // all zeros: the serial 0
    const nibbles = q - s, odd = nibbles & 1;
    const keyBytes = (nibbles + 1) >> 1;
    if (count === maxEntries) throw overLimit(v);
    if (heapAt + keyBytes > heapLimit) {
      throw overLimit(
        v,
        `serials longer than ${HEAP_PER_ENTRY} bytes fill the memory reserved for ` +
          `${maxEntries} certificates; raise --ocsp-max-entries`,
      );
    }
    let k = s;
    if (odd) {
      const x = nibble(bytes[k++]);
      keyDiff |= heap[heapAt] ^ x;
      heap[heapAt++] = x;
    }
    while (k < q) {
      const x = (nibble(bytes[k]) << 4) | nibble(bytes[k + 1]);
      keyDiff |= heap[heapAt] ^ x;
      heap[heapAt++] = x;
      k += 2;
    }
    p = q + 1;
    // file: not empty
    q = p;
    while ((b = bytes[q]) !== TAB) {
      if (b === LF) return fault(start, line, count);
      q++;
    }
    if (q === p) return fault(start, line, count);
    p = q + 1;
    // subject: anything but TAB up to the newline
    while ((b = bytes[p]) !== LF) {
      if (b === TAB) return fault(start, line, count);
      p++;
    }
    p++;
    revoked[count] = revokedAt;
    const m = status | (reason << 2) | (odd << 7);
    keyDiff |= ((meta[count] ^ m) & ODD_KEY) | (keyEnd[count + 1] ^ heapAt);
    meta[count] = m;
    keyEnd[++count] = heapAt;
  }
  cursor.line = line;
  cursor.count = count;
  cursor.heapAt = heapAt;
  if (keyDiff !== 0) cursor.keysAsBefore = false;
}

function nibble(c: number): number {
  return c <= 0x39 ? c - 0x30 : c - 0x37;
}

/** The CRL reason of `,name[,argument]` (bytes from..to, after the comma), or -1. */
function reasonOf(bytes: Uint8Array, from: number, to: number): number {
  let text = "";
  for (let i = from; i < to; i++) text += String.fromCharCode(bytes[i]);
  try {
    return reasonCodeOf(text.split(","), 0);
  } catch {
    return -1;
  }
}

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const digitPair = (bytes: Uint8Array, at: number) => (bytes[at] - 0x30) * 10 + bytes[at + 1] - 0x30;

/**
 * Whether YYMMDDHHMMSS (12 digits) or YYYYMMDDHHMMSS (14 digits) at `at` is a time that exists.
 * Four-digit years below 100 are judged as 19YY, as `Date.UTC` (the line-by-line reader) reads them.
 */
function validTime(bytes: Uint8Array, at: number, digits: number): boolean {
  let year: number, o: number;
  if (digits === 12) {
    year = digitPair(bytes, at);
    year += year < 50 ? 2000 : 1900;
    o = at + 2;
  } else {
    year = digitPair(bytes, at) * 100 + digitPair(bytes, at + 2);
    if (year < 100) year += 1900;
    o = at + 4;
  }
  const mo = digitPair(bytes, o), da = digitPair(bytes, o + 2);
  if (mo < 1 || mo > 12 || da < 1) return false;
  if (digitPair(bytes, o + 4) > 23 || digitPair(bytes, o + 6) > 59) return false;
  if (digitPair(bytes, o + 8) > 59) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  return da <= (mo === 2 && leap ? 29 : DAYS[mo - 1]);
}

/** Seconds since 1970 of a valid UTCTime's 12 digits at `at` (years below 50 are 20YY). */
function unixSeconds(bytes: Uint8Array, at: number): number {
  const yy = digitPair(bytes, at);
  const d = (i: number) => digitPair(bytes, at + i);
  return Date.UTC(yy + (yy < 50 ? 2000 : 1900), d(2) - 1, d(4), d(6), d(8), d(10)) / 1000;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

const NOT_UTF8 = new IndexFormatError(0, "");
Object.defineProperty(NOT_UTF8, "message", { value: "not UTF-8 text" });

/** Whether an error is the file's not being UTF-8 (no line is named: the whole file is refused). */
export function isNotUtf8(e: unknown): boolean {
  return e === NOT_UTF8;
}

function countLines(bytes: Uint8Array, end: number): number {
  let lines = 0;
  for (let i = 0; i < end; i++) if (bytes[i] === LF) lines++;
  return lines;
}

function overLimit(v: Views, detail?: string): IndexLimitError {
  v.i32[H.overLimit] = 1;
  return new IndexLimitError(v.maxEntries, detail);
}

/**
 * The fault of the line at `start`: the first duplicate before it if any (the line-by-line reader
 * would stop there first), else the line-by-line reader's message for this line.
 */
function lineFault(v: Views, bytes: Uint8Array, start: number, line: number, count: number): never {
  if (!isUtf8(bytes)) throw NOT_UTF8;
  const duplicate = buildTable(v, count);
  if (duplicate) throw duplicateError(bytes, duplicate);
  let end = bytes.indexOf(LF, start);
  if (end < 0) end = bytes.length;
  const text = UTF8.decode(bytes.subarray(start, end));
  parseIndexLine(text, line); // throws the reference message
  throw new IndexFormatError(line, "not a line openssl ca writes");
}

/** Two entries (their numbers) with the same serial. */
interface Duplicate {
  first: number;
  second: number;
}

/**
 * Entries hashed before any of them is placed: the slots a batch probes are independent loads, so
 * the processor waits for their cache misses together rather than one after another.
 */
const PLACE_BATCH = 32;
const batchHashes = new Uint32Array(PLACE_BATCH);

/** Fills the hash table with the first `count` entries; the first repeated serial, if any. */
function buildTable(v: Views, count: number): Duplicate | null {
  const cap = tableCapacity(count);
  const table = v.table;
  table.fill(0, 0, cap);
  v.i32[H.tableCap] = cap;
  const tagMask = tagMaskOf(count), entryMask = ~tagMask;
  v.i32[H.tagMask] = tagMask;
  const { keyEnd, heap, meta } = v;
  for (let base = 0; base < count; base += PLACE_BATCH) {
    const n = Math.min(PLACE_BATCH, count - base);
    for (let j = 0; j < n; j++) {
      const e = base + j;
      batchHashes[j] = hashKey(heap, keyEnd[e], keyEnd[e + 1], meta[e] >> 7);
    }
    for (let j = 0; j < n; j++) {
      const e = base + j, from = keyEnd[e], to = keyEnd[e + 1], odd = meta[e] >> 7;
      const h = batchHashes[j], tag = h & tagMask;
      let slot = h % cap;
      for (;;) {
        const other = table[slot];
        if (other === 0) break;
        if ((other & tagMask) === tag) {
          const first = (other & entryMask) - 1;
          if (sameKey(v, first, heap, from, to, odd)) return { first, second: e };
        }
        if (++slot === cap) slot = 0;
      }
      table[slot] = tag | (e + 1);
    }
  }
  return null;
}

/** Bits of an entry number a table slot never needs while the index has fewer entries. */
const TAG_BITS = 6, TAGGED_ENTRIES = 2 ** (32 - TAG_BITS) - 1;

/**
 * The slot bits that carry the top bits of the key's hash beside the entry number: a probe skips
 * a slot whose tag differs without reading that entry's key (a cache miss in a large index).
 * Untagged (0) when entry numbers need all 32 bits.
 */
function tagMaskOf(count: number): number {
  return count < TAGGED_ENTRIES ? ~TAGGED_ENTRIES : 0;
}

function hashKey(key: Uint8Array, from: number, to: number, odd: number): number {
  let h = 0x811c9dc5 ^ odd;
  for (let i = from; i < to; i++) h = Math.imul(h ^ key[i], 0x01000193);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  return (h ^ (h >>> 12)) >>> 0;
}

function sameKey(
  v: Views,
  entry: number,
  key: Uint8Array,
  from: number,
  to: number,
  odd: number,
): boolean {
  const a = v.keyEnd[entry], b = v.keyEnd[entry + 1];
  if (b - a !== to - from) return false;
  const heap = v.heap;
  // From the last byte: serials issued in sequence differ there, random ones anywhere.
  for (let i = to - from - 1; i >= 0; i--) if (heap[a + i] !== key[from + i]) return false;
  return v.meta[entry] >> 7 === odd;
}

/** The line-by-line reader's message for a repeated serial: the second line, naming the first. */
function duplicateError(bytes: Uint8Array, d: Duplicate): IndexFormatError {
  const lines: Array<{ line: number; start: number }> = [];
  let entry = 0, line = 0;
  for (let p = 0; p < bytes.length && lines.length < 2; p = bytes.indexOf(LF, p) + 1) {
    line++;
    if (bytes[p] === HASH_SIGN) continue;
    if (entry === d.first || entry === d.second) lines.push({ line, start: p });
    entry++;
  }
  const [first, second] = lines;
  const text = UTF8.decode(bytes.subarray(second.start, bytes.indexOf(LF, second.start)));
  const serial = text.split("\t")[3];
  return new IndexFormatError(second.line, `serial ${serial} is already on line ${first.line}`);
}

/**
 * Lookups in a loaded memory. Not locked: ./index_source.ts holds the read lock around `find`.
 *
 * @example
 * ```ts
 * declare const memory: IndexMemory;
 * new CompactIndex(memory).find("0A")?.status; // "V" | "R" | "E"
 * ```
 */
export class CompactIndex {
  readonly #v: Views;
  readonly #key = new Uint8Array(64);

  constructor(memory: IndexMemory) {
    this.#v = viewsOf(memory);
  }

  /** Certificates in the database. */
  get size(): number {
    return this.#v.i32[H.count];
  }

  /** The entry of a serial given as unsigned hex (any case, any leading zeros), or undefined. */
  find(serialHex: string): RevocationEntry | undefined {
    const v = this.#v;
    let s = 0;
    while (s < serialHex.length - 1 && serialHex.charCodeAt(s) === ZERO) s++;
    const nibbles = serialHex.length - s, odd = nibbles & 1;
    const length = (nibbles + 1) >> 1;
    const key = length <= this.#key.length ? this.#key : new Uint8Array(length);
    let k = s, at = 0;
    const value = (i: number) => {
      const c = serialHex.charCodeAt(i) | 0x20; // lower case
      return c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;
    };
    if (odd) {
      const x = value(k++);
      if (x < 0) return undefined;
      key[at++] = x;
    }
    while (k < serialHex.length) {
      const hi = value(k), lo = value(k + 1);
      if (hi < 0 || lo < 0) return undefined;
      key[at++] = (hi << 4) | lo;
      k += 2;
    }
    const cap = v.i32[H.tableCap];
    if (cap === 0) return undefined;
    const tagMask = v.i32[H.tagMask], entryMask = ~tagMask;
    const h = hashKey(key, 0, length, odd), tag = h & tagMask;
    let slot = h % cap;
    for (;;) {
      const other = v.table[slot];
      if (other === 0) return undefined;
      if ((other & tagMask) === tag) {
        const e = (other & entryMask) - 1;
        if (sameKey(v, e, key, 0, length, odd)) return entryOf(v, e);
      }
      if (++slot === cap) slot = 0;
    }
  }
}

/**
 * Told of one revoked certificate: its serial's unsigned big-endian bytes are `key[from..to)` (the
 * canonical serial, so no leading zero byte; valid only during the call), the revocation time in
 * seconds since 1970, and its CRL reason (-1 when the line gives none).
 */
export type RevokedVisitor = (
  key: Uint8Array,
  from: number,
  to: number,
  revokedAtSeconds: number,
  reason: number,
) => void;

/**
 * Every revoked certificate of a loaded memory, in file order (what a CRL lists). Not locked:
 * ./index_source.ts holds the read lock around it.
 *
 * @example
 * ```ts
 * declare const memory: IndexMemory;
 * let n = 0;
 * forEachRevoked(memory, () => n++);
 * ```
 */
export function forEachRevoked(memory: IndexMemory, fn: RevokedVisitor): void {
  const v = viewsOf(memory);
  const { keyEnd, meta, revoked, heap } = v;
  const count = v.i32[H.count];
  for (let e = 0; e < count; e++) {
    const m = meta[e];
    if ((m & 3) !== 1) continue;
    const reason = (m >> 2) & 15;
    fn(
      heap,
      keyEnd[e],
      keyEnd[e + 1],
      revoked[e] - EPOCH_1950_S,
      reason === NO_REASON ? -1 : reason,
    );
  }
}

function entryOf(v: Views, e: number): RevocationEntry {
  const meta = v.meta[e];
  const status = STATUS_LETTERS[meta & 3];
  if (status !== "R") return { status };
  const reason = (meta >> 2) & 15;
  const revokedAt = (v.revoked[e] - EPOCH_1950_S) * 1000;
  return reason === NO_REASON ? { status, revokedAt } : { status, revokedAt, reason };
}

/** The content hash slot of the header. */
export function hashSlot(memory: IndexMemory): Uint8Array {
  return new Uint8Array(memory.buffer, HASH_AT, HASH_BYTES);
}

/** Stores the reason the database is unavailable, for every thread's `lastError`. */
export function setError(memory: IndexMemory, why: string | null): void {
  const v = viewsOf(memory);
  if (why === null) {
    v.i32[H.errorLength] = 0;
    return;
  }
  const room = v.bytes.subarray(ERROR_AT, HEADER_BYTES);
  const { written } = new TextEncoder().encodeInto(why, room);
  v.i32[H.errorLength] = written;
}

/** The stored reason, or null. */
export function errorOf(memory: IndexMemory): string | null {
  const v = viewsOf(memory);
  const length = v.i32[H.errorLength];
  if (length === 0) return null;
  return new TextDecoder().decode(v.bytes.slice(ERROR_AT, ERROR_AT + length));
}
