/**
 * The revocation database in one compact block of shared memory, read straight from index.txt's
 * bytes: what every public thread answers from, built by one parse (./index_source.ts decides when).
 *
 * Only what an OCSP answer needs is kept: per certificate its serial (canonical: leading `0`
 * digits dropped, as `openssl ocsp -index` compares them), status, revocation time and reason. The
 * lines are read by index.txt's one parser (./_index_line.ts), the one `svcd ca`'s entry list
 * (./index_db.ts `parseIndex`) is read by too: a file is refused whole, with the same first fault
 * and message as `parseIndex` gives, or not at all.
 *
 * Layout of an {@link IndexMemory} (one SharedArrayBuffer, sized for `maxEntries` when it is made;
 * the kernel backs only the pages a database touches, so an unused reservation costs address space,
 * not memory):
 *
 * | bytes                           | what                                                           |
 * | ------------------------------- | -------------------------------------------------------------- |
 * | 0 … 4095                        | header: lock words, version, counts; the source's record of the file (stamp, content hash, error text) |
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
  HASH_SIGN,
  IndexFormatError,
  type IndexStore,
  LF,
  lineError,
  ParsedLine,
  parseLines,
  repeatedSerial,
  REVOKED,
  STATUS_LETTERS,
  TAB,
  unfinishedLine,
} from "./_index_line.ts";
import { type IndexReader, WholeReader } from "./_index_reader.ts";
import type { RevocationEntry } from "./index_db.ts";

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
  /** 1 when the database answers; 0 when never loaded or the last load failed. */
  loaded: 3,
  count: 4,
  tableCap: 5,
  maxEntries: 6,
  /** 1 when the last load failed because of the entry limit. */
  overLimit: 7,
  /** Checks of the file begun (under the write lock) and finished, by every thread. */
  checksBegun: 8,
  checksDone: 9,
  /** The hash table's tag bits (see `tagMaskOf`): a mask, 0 when the table holds no tags. */
  tagMask: 10,
} as const;

/**
 * Header bytes after the Int32 slots, kept for ./index_source.ts's record of the file the database
 * was read from (its stamp, its content hash, why it cannot be used); laid out there.
 */
export const FILE_RECORD = { at: 64, bytes: HEADER_BYTES - 64 } as const;

/** Seconds from 1970-01-01 to 1950-01-01, UTCTime's first year. */
const EPOCH_1950_S = 631152000;

const NO_REASON = 15;

/**
 * Shared memory holding one database; plain data, so it crosses to a Worker by `postMessage` and
 * every thread given it reads the same bytes.
 */
export interface IndexMemory {
  buffer: SharedArrayBuffer;
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
  const buffer = new SharedArrayBuffer(layoutOf(maxEntries).end);
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
  end: number;
}

function layoutOf(maxEntries: number): Layout {
  const keyEnd = HEADER_BYTES;
  const revoked = keyEnd + 4 * (maxEntries + 1);
  const meta = revoked + 4 * maxEntries;
  const heap = meta + maxEntries;
  const heapBytes = HEAP_PER_ENTRY * maxEntries;
  // The table's Uint32 view needs a 4-byte aligned offset.
  const table = (heap + heapBytes + 3) & ~3;
  return {
    keyEnd,
    revoked,
    meta,
    heap,
    heapBytes,
    table,
    end: table + 4 * tableCapacity(maxEntries),
  };
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
  readonly keyEnd: Uint32Array;
  readonly revoked: Uint32Array;
  readonly meta: Uint8Array;
  readonly heap: Uint8Array;
  readonly table: Uint32Array;
  readonly maxEntries: number;

  constructor(buffer: SharedArrayBuffer) {
    this.i32 = new Int32Array(buffer, 0, 16);
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

function viewsOf(memory: IndexMemory): Views {
  let v = viewCache.get(memory.buffer);
  if (!v) viewCache.set(memory.buffer, v = new Views(memory.buffer));
  return v;
}

/** The header's Int32 slots ({@link H}) of a memory, one view per thread. */
export function headerOf(memory: IndexMemory): Int32Array {
  return viewsOf(memory).i32;
}

/**
 * Loads index.txt from `reader` into `memory`, replacing what it held; the caller holds the write
 * lock (./index_source.ts) or is the memory's only user. The parts are parsed as they come; a file
 * with a fault (or more certificates than the memory holds) is loaded again from
 * `reader.whole()`, where its error is found exactly. Throws IndexFormatError (the same first fault
 * and message as `parseIndex`) or IndexLimitError; the memory then holds no database (`loaded` 0).
 * Returns the number of certificates.
 *
 * @example
 * ```ts
 * import { ChunkedReader } from "./_index_reader.ts";
 * declare const memory: IndexMemory;
 * using file = Deno.openSync("/var/lib/svcd/ca/index.txt");
 * loadIndex(memory, new ChunkedReader(file)); // → certificates loaded
 * ```
 */
export function loadIndex(memory: IndexMemory, reader: IndexReader): number {
  const v = viewsOf(memory);
  try {
    return loadInParts(v, reader);
  } catch (e) {
    if (e !== NAME_THE_FAULT && !(e instanceof IndexLimitError)) throw e;
  }
  return loadWhole(v, reader.whole());
}

/**
 * {@link loadIndex} of bytes in memory.
 *
 * @example
 * ```ts
 * declare const memory: IndexMemory;
 * loadIndexBytes(memory, await Deno.readFile("index.txt")); // → 3
 * ```
 */
export function loadIndexBytes(memory: IndexMemory, bytes: Uint8Array): number {
  return loadIndex(memory, new WholeReader(bytes));
}

/** Thrown by a load in parts at a fault: the whole file is read for the exact error. */
const NAME_THE_FAULT = new Error("read the whole file for the error");

function loadInParts(v: Views, reader: IndexReader): number {
  const load = new CompactLoad(v);
  const line = new ParsedLine();
  for (let part; (part = reader.next()) !== null;) {
    // Whole lines only: a UTF-8 sequence never spans an LF, so each part is checked on its own.
    if (part[part.length - 1] !== LF || !isUtf8(part)) throw NAME_THE_FAULT;
    if (!parseLines(part, line, load)) throw NAME_THE_FAULT;
  }
  if (load.placeKeys()) throw NAME_THE_FAULT;
  return load.finish();
}

/** Loads the whole file, naming its first fault as `parseIndex` names it. */
function loadWhole(v: Views, bytes: Uint8Array): number {
  const load = new CompactLoad(v);
  // The whole file at once, natively: the parser then treats every byte ≥ 0x80 as text.
  if (!isUtf8(bytes)) throw NOT_UTF8;
  const unfinished = unfinishedLine(bytes);
  if (unfinished) throw unfinished;
  const line = new ParsedLine();
  if (!parseLines(bytes, line, load)) {
    // The first repeated serial before the faulty line comes first.
    const duplicate = buildTable(v, load.count);
    if (duplicate) throw duplicateError(bytes, duplicate);
    throw lineError(bytes, line);
  }
  const duplicate = load.placeKeys();
  if (duplicate) throw duplicateError(bytes, duplicate);
  return load.finish();
}

/** A load under way: the parser's store, writing each line's entry into the memory. */
class CompactLoad implements IndexStore {
  count = 0;
  heapAt = 0;
  /**
   * Every key so far is the one the memory held at the same place after the last complete load:
   * with the same count at the end, that load's hash table still maps every serial to its entry.
   */
  keysAsBefore: boolean;
  readonly countBefore: number;

  constructor(readonly v: Views) {
    this.keysAsBefore = Atomics.load(v.i32, H.loaded) === 1;
    this.countBefore = v.i32[H.count];
    Atomics.store(v.i32, H.loaded, 0);
    v.i32[H.overLimit] = 0;
    v.keyEnd[0] = 0;
  }

  add(bytes: Uint8Array, line: ParsedLine): void {
    const { keyEnd, revoked, meta, heap, maxEntries } = this.v;
    const count = this.count;
    // The serial without leading zeros, packed two digits a byte.
    let k = line.key, heapAt = this.heapAt;
    const to = line.serialEnd, odd = (to - k) & 1;
    if (count === maxEntries || heapAt + ((to - k + 1) >> 1) > heap.length) {
      throw overLimit(this.v, count);
    }
    // Any difference from the keys the memory held before (bytes, lengths, odd digit counts).
    let keyDiff = 0;
    if (odd) {
      const x = NIBBLE[bytes[k++]];
      keyDiff = heap[heapAt] ^ x;
      heap[heapAt++] = x;
    }
    for (; k < to; k += 2) {
      const x = (NIBBLE[bytes[k]] << 4) | NIBBLE[bytes[k + 1]];
      keyDiff |= heap[heapAt] ^ x;
      heap[heapAt++] = x;
    }
    const status = line.status;
    revoked[count] = status === REVOKED ? line.revokedAt + EPOCH_1950_S : 0;
    const m = status | ((line.reason < 0 ? NO_REASON : line.reason) << 2) | (odd << 7);
    keyDiff |= ((meta[count] ^ m) & ODD_KEY) | (keyEnd[count + 1] ^ heapAt);
    meta[count] = m;
    keyEnd[count + 1] = heapAt;
    this.count = count + 1;
    this.heapAt = heapAt;
    if (keyDiff !== 0) this.keysAsBefore = false;
  }

  /**
   * Fills the hash table unless the serials are the ones it was filled with (a revocation changes
   * a status, not a serial): then it stands as it is. The first repeated serial, if any.
   */
  placeKeys(): Duplicate | null {
    if (this.keysAsBefore && this.count === this.countBefore) return null;
    return buildTable(this.v, this.count);
  }

  finish(): number {
    this.v.i32[H.count] = this.count;
    Atomics.store(this.v.i32, H.loaded, 1);
    return this.count;
  }
}

/** The bit of an entry's meta byte that says its key has an odd number of hex digits. */
const ODD_KEY = 0x80;

const ZERO = 0x30;

/** The value of an upper-case hex digit's byte. */
const NIBBLE = new Uint8Array(256);
for (let c = 0x30; c <= 0x39; c++) NIBBLE[c] = c - 0x30;
for (let c = 0x41; c <= 0x46; c++) NIBBLE[c] = c - 0x37;

const NOT_UTF8 = new IndexFormatError(0, "");
Object.defineProperty(NOT_UTF8, "message", { value: "not UTF-8 text" });

/** Whether an error is the file's not being UTF-8 (no line is named: the whole file is refused). */
export function isNotUtf8(e: unknown): boolean {
  return e === NOT_UTF8;
}

/** The memory is full at entry `count`: no room for another entry, or for its serial. */
function overLimit(v: Views, count: number): IndexLimitError {
  v.i32[H.overLimit] = 1;
  const detail = count < v.maxEntries
    ? `serials longer than ${HEAP_PER_ENTRY} bytes fill the memory reserved for ` +
      `${v.maxEntries} certificates; raise --ocsp-max-entries`
    : undefined;
  return new IndexLimitError(v.maxEntries, detail);
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

/** The parser's message for a repeated serial: the second line, naming the first. */
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
  let from = second.start;
  for (let tabs = 0; tabs < 3; from++) if (bytes[from] === TAB) tabs++;
  const serial = String.fromCharCode(...bytes.subarray(from, bytes.indexOf(TAB, from)));
  return repeatedSerial(second.line, serial, first.line);
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
