/**
 * The index file on disk as the responder sees it: checked on every query, re-read when it changed,
 * and read once for every thread that shares its {@link IndexMemory}.
 *
 * Every query stats the file (device, inode, size, mtime and ctime to the nanosecond, by statx)
 * and compares the stamp with the one the shared database was read from. A rewrite can leave the
 * stamp unchanged only while the file system's clock has not moved on from the file's last change:
 * the kernel stamps files from a clock that advances in ticks of a few milliseconds. So a re-read
 * of a file changed less than `RACY_WINDOW_MS` ago first waits for that window to pass; once read
 * after it, any later rewrite changes the stamp, and a file left alone costs one stat per query.
 * Where only coarse times are available (no statx; a file system storing whole seconds) the window
 * is `RACY_MS`, too long to wait: a file read within it is compared by content (SHA-256, computed
 * once per read) until a read falls outside it (the "racy" check git uses for its index).
 *
 * When the file changed, the first thread to see it takes the shared write lock and checks it (and
 * re-reads it into the shared memory if needed); a query in any thread that arrives meanwhile waits
 * (`Atomics.waitAsync`), and a check that began after a query arrived answers for that query too,
 * so queries arriving together cost one check. Lookups hold a read lock for the few microseconds
 * they take, and a snapshot taken before a re-read refuses to answer (StaleSnapshotError) rather
 * than answer from a half-written database. A file that cannot be read, holds more certificates
 * than the memory was made for, or does not parse is unavailable (null) until it is fixed; the
 * previous good content is never answered from.
 *
 * @example
 * ```ts
 * import { createIndexMemory } from "./index_compact.ts";
 * const memory = createIndexMemory(); // once, handed to every thread
 * const source = new IndexFileSource("/var/lib/svcd/index.txt", { memory });
 * const snap = await source.current(); // null when the file cannot be loaded
 * snap?.lookup("1A2B")?.status; // "V" | "R" | "E"
 * ```
 */
import { createHash } from "node:crypto";
import { bytesEqual } from "../bytes/mod.ts";
import {
  type FileStamp,
  RACY_WINDOW_MS,
  SharedStamp,
  STAMP_SLOTS,
  stampOf,
} from "./_file_stamp.ts";
import { ChunkedReader, type IndexReader, WholeReader } from "./_index_reader.ts";
import {
  IndexFormatError,
  type RevocationEntry,
  type RevocationSnapshot,
  type RevocationSource,
  StaleSnapshotError,
} from "./index_db.ts";
import {
  CompactIndex,
  createIndexMemory,
  FILE_RECORD,
  forEachRevoked,
  H,
  headerOf,
  IndexLimitError,
  type IndexMemory,
  isNotUtf8,
  loadIndex,
  MAX_INDEX_ENTRIES,
  type RevokedVisitor,
} from "./index_compact.ts";

/**
 * How far a file's change time, rounded up to the millisecond, may stand ahead of Date.now(),
 * rounded down: file systems with fine-grained ("multigrain") times, such as tmpfs on current
 * kernels, stamp a file from the same fine clock Date.now() reads, so the two roundings alone can
 * put the file up to 2 ms in Date.now()'s future.
 */
const ROUNDING_MS = 2;

/**
 * Told of the work a source does on the file: tests count it (an implementation over shared
 * memory counts every thread's); the daemon passes none.
 */
export interface IndexFileObserver {
  /** The file was read after a change, whole or in chunks. */
  read(): void;
  /** Its bytes were parsed into the shared memory. */
  parsed(): void;
}

/** Options of an IndexFileSource. */
export interface IndexFileSourceOptions {
  /** Memory shared with the other threads answering from the same file (default: a private one). */
  memory?: IndexMemory;
  /** Most certificates, for a private memory (default MAX_INDEX_ENTRIES). */
  maxEntries?: number;
  /** Told once per change of state, with why the file cannot be used (for the daemon's log). */
  onUnavailable?: (reason: string) => void;
  /** Told of each read of the file after a change: loaded (true) or not (false). */
  onLoad?: (ok: boolean) => void;
  /** Told of each read and parse of the file (default: none). */
  observer?: IndexFileObserver;
  /**
   * Stat with Deno's millisecond times instead of statx's nanoseconds (default false; also used
   * when FFI is not allowed). Tests use it to exercise the content comparison.
   */
  coarseTimes?: boolean;
}

const IDLE = 0, WRITING = 1;

/**
 * The source's record in the shared header ({@link FILE_RECORD}) of the file the database was read
 * from: its stamp and three Float64 slots, its content hash (SHA-256), why it cannot be used (text).
 */
const RECORD_SLOTS = STAMP_SLOTS + 3;
/** When the content was last read and matched, ms. */
const VERIFIED_AT = STAMP_SLOTS;
/** 1 when the content hash is that of the bytes parsed (a file read within its racy window). */
const HASHED = STAMP_SLOTS + 1;
/** Bytes of the text of why the database is unavailable, 0 when it is not. */
const ERROR_LENGTH = STAMP_SLOTS + 2;
const HASH_AT = FILE_RECORD.at + 8 * RECORD_SLOTS, ERROR_AT = HASH_AT + 32;

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The index file on disk, checked on every `current()`.
 *
 * @example
 * ```ts
 * const source = new IndexFileSource("index.txt", { onUnavailable: (why) => console.error(why) });
 * (await source.current())?.lookup("0A");
 * ```
 */
export class IndexFileSource implements RevocationSource {
  readonly memory: IndexMemory;
  readonly #index: CompactIndex;
  readonly #i32: Int32Array;
  readonly #record: Float64Array;
  readonly #stamp: SharedStamp;
  readonly #hash: Uint8Array;
  readonly #errorText: Uint8Array;
  /** Why this thread could not stat or read the file (not shared: each thread sees that itself). */
  #localError: string | null = null;
  #reported: string | null = null;
  #snapshot: SharedSnapshot | null = null;

  /** Example: `new IndexFileSource("/var/lib/svcd/index.txt", { memory })`. */
  constructor(readonly path: string, private readonly options: IndexFileSourceOptions = {}) {
    this.memory = options.memory ?? createIndexMemory(options.maxEntries ?? MAX_INDEX_ENTRIES);
    this.#i32 = headerOf(this.memory);
    const buffer = this.memory.buffer;
    this.#record = new Float64Array(buffer, FILE_RECORD.at, RECORD_SLOTS);
    this.#stamp = new SharedStamp(this.#record.subarray(0, STAMP_SLOTS));
    this.#hash = new Uint8Array(buffer, HASH_AT, ERROR_AT - HASH_AT);
    this.#errorText = new Uint8Array(
      buffer,
      ERROR_AT,
      FILE_RECORD.at + FILE_RECORD.bytes - ERROR_AT,
    );
    this.#index = new CompactIndex(this.memory);
  }

  /** Why the file is unavailable now, or null. Example: `source.lastError`. */
  get lastError(): string | null {
    if (this.#localError !== null) return this.#localError;
    if (Atomics.load(this.#i32, H.loaded) === 1 || this.#record[ERROR_LENGTH] === 0) return null;
    return new TextDecoder().decode(this.#errorText.slice(0, this.#record[ERROR_LENGTH]));
  }

  /** Whether the last load failed because the file holds more certificates than allowed. */
  get overLimit(): boolean {
    return this.#localError === null && this.#i32[H.overLimit] === 1;
  }

  /**
   * The database now, or null when it cannot be loaded; a promise while another thread re-reads
   * the file. Never throws. Example: `await source.current()`.
   */
  current(): RevocationSnapshot | null | Promise<RevocationSnapshot | null> {
    return this.#currentSince(Atomics.load(this.#i32, H.checksBegun));
  }

  /** `current()` for a query that arrived when `arrival` checks had begun. */
  #currentSince(arrival: number): RevocationSnapshot | null | Promise<RevocationSnapshot | null> {
    const stamp = this.#stat();
    if (!stamp) return null;
    if (Atomics.load(this.#i32, H.state) === IDLE && this.#verified(stamp, arrival)) {
      return this.#answer();
    }
    if (Atomics.compareExchange(this.#i32, H.state, IDLE, WRITING) !== IDLE) {
      return this.#wait(arrival);
    }
    Atomics.add(this.#i32, H.checksBegun, 1);
    try {
      return this.#refresh(arrival);
    } finally {
      Atomics.add(this.#i32, H.checksDone, 1);
      Atomics.store(this.#i32, H.state, IDLE);
      Atomics.notify(this.#i32, H.state);
    }
  }

  async #wait(arrival: number): Promise<RevocationSnapshot | null> {
    const waiting = Atomics.waitAsync(this.#i32, H.state, WRITING);
    if (waiting.async) await waiting.value;
    return await this.#currentSince(arrival);
  }

  /**
   * The database answers for a file with this stamp: the stamp is the one read, and either no
   * rewrite can hide behind it or a check that began after the query arrived saw this stamp.
   */
  #verified(stamp: FileStamp, arrival: number): boolean {
    return this.#stamp.same(stamp) &&
      (this.#settled() || Atomics.load(this.#i32, H.checksDone) > arrival);
  }

  #stat(): FileStamp | null {
    const stamp = stampOf(this.path, this.options.coarseTimes ?? false);
    if (typeof stamp === "string") return this.#localFail(stamp);
    this.#localError = null;
    return stamp;
  }

  /** No content check is due: the file's racy window had passed when its content was last read. */
  #settled(): boolean {
    return this.#stamp.settledAt(this.#record[VERIFIED_AT]);
  }

  /**
   * Under the write lock: the file is stat'ed again (another thread may have checked it since),
   * then read, parsed only when its content may have changed.
   */
  #refresh(arrival: number): RevocationSnapshot | null {
    let stamp = this.#stat();
    if (!stamp) return null;
    this.#waitForReaders();
    if (this.#verified(stamp, arrival)) return this.#answer();
    const wait = stamp.changedAt + stamp.racyWindow - Date.now();
    if (wait > 0 && wait <= RACY_WINDOW_MS + ROUNDING_MS && stamp.racyWindow === RACY_WINDOW_MS) {
      // A read after the window needs no content comparison, now or on later queries.
      Atomics.wait(pause, 0, 0, wait + 1);
      stamp = this.#stat();
      if (!stamp) return null;
      if (this.#verified(stamp, arrival)) return this.#answer();
    }
    const verifiedAt = Date.now();
    const same = this.#stamp.same(stamp);
    const racy = stamp.changedAt + stamp.racyWindow > verifiedAt;
    let hash: Uint8Array | null = null;
    if (same || racy) {
      // Its content may be all that changed: read whole, hashed, and parsed only when it differs.
      let bytes: Uint8Array;
      try {
        bytes = Deno.readFileSync(this.path);
      } catch (e) {
        return this.#readFailed(e);
      }
      this.options.observer?.read();
      hash = createHash("sha256").update(bytes).digest();
      if (same && this.#record[HASHED] === 1 && bytesEqual(this.#hash, hash)) {
        this.#record[VERIFIED_AT] = verifiedAt;
        return this.#answer();
      }
      this.#load(new WholeReader(bytes), stamp);
    } else {
      let file: Deno.FsFile;
      try {
        file = Deno.openSync(this.path, { read: true });
      } catch (e) {
        return this.#readFailed(e);
      }
      this.options.observer?.read();
      try {
        this.#load(new ChunkedReader(file), stamp);
      } finally {
        file.close();
      }
    }
    this.#record[VERIFIED_AT] = verifiedAt;
    this.#record[HASHED] = hash ? 1 : 0;
    if (hash) this.#hash.set(hash);
    return this.#answer();
  }

  #readFailed(e: unknown): null {
    this.options.onLoad?.(false);
    return this.#localFail(`cannot read ${this.path}: ${(e as Error).message}`);
  }

  /** Loads the database from `reader` (the file's bytes, or the file itself) for this stamp. */
  #load(reader: IndexReader, stamp: FileStamp): void {
    this.#stamp.store(stamp);
    Atomics.add(this.#i32, H.version, 1);
    this.options.observer?.parsed();
    try {
      loadIndex(this.memory, reader);
      this.#record[ERROR_LENGTH] = 0;
      this.#reported = null;
      this.options.onLoad?.(true);
    } catch (e) {
      const fileAtFault = e instanceof IndexLimitError || e instanceof IndexFormatError;
      const why = fileAtFault
        ? `${this.path}: ${isNotUtf8(e) ? "not UTF-8 text" : e.message}`
        : `${this.path}: cannot be read (${(e as Error).message})`;
      // A read that failed (not the file's content) is tried again at the next query.
      if (!fileAtFault) this.#stamp.forget();
      // For every thread's `lastError`.
      this.#record[ERROR_LENGTH] = new TextEncoder().encodeInto(why, this.#errorText).written;
      this.#report(why);
      this.options.onLoad?.(false);
    }
  }

  /**
   * Every revoked certificate of the database as it is now (checked as `current()` checks it), in
   * file order, under the read lock so no re-read changes it meanwhile; the version told of, or
   * null when the database cannot be loaded. Example: `await source.forEachRevoked((…) => …)`.
   */
  async forEachRevoked(fn: RevokedVisitor): Promise<number | null> {
    for (;;) {
      const snapshot = await this.current();
      if (snapshot === null) return null;
      const i32 = this.#i32;
      Atomics.add(i32, H.readers, 1);
      try {
        if (
          Atomics.load(i32, H.state) !== IDLE ||
          Atomics.load(i32, H.version) !== snapshot.version || Atomics.load(i32, H.loaded) !== 1
        ) {
          continue; // re-read meanwhile: ask again
        }
        forEachRevoked(this.memory, fn);
        return snapshot.version;
      } finally {
        if (Atomics.sub(i32, H.readers, 1) === 1) Atomics.notify(i32, H.readers);
      }
    }
  }

  /** Readers that started before the write lock was taken finish first. */
  #waitForReaders(): void {
    for (let r; (r = Atomics.load(this.#i32, H.readers)) !== 0;) {
      Atomics.wait(this.#i32, H.readers, r, 1);
    }
  }

  #answer(): RevocationSnapshot | null {
    if (Atomics.load(this.#i32, H.loaded) !== 1) return null;
    const version = Atomics.load(this.#i32, H.version);
    if (this.#snapshot?.version !== version) {
      this.#snapshot = new SharedSnapshot(version, this.#i32, this.#index);
    }
    return this.#snapshot;
  }

  #localFail(why: string): null {
    this.#localError = why;
    this.#report(why);
    return null;
  }

  #report(why: string): void {
    if (this.#reported !== why) this.options.onUnavailable?.(why);
    this.#reported = why;
  }
}

/** One version of the shared database; refuses to answer once another version replaced it. */
class SharedSnapshot implements RevocationSnapshot {
  readonly size: number;

  constructor(
    readonly version: number,
    private readonly i32: Int32Array,
    private readonly index: CompactIndex,
  ) {
    this.size = index.size;
  }

  lookup(serialHex: string): RevocationEntry | undefined {
    const i32 = this.i32;
    Atomics.add(i32, H.readers, 1);
    try {
      if (
        Atomics.load(i32, H.state) !== IDLE || Atomics.load(i32, H.version) !== this.version ||
        Atomics.load(i32, H.loaded) !== 1
      ) {
        throw new StaleSnapshotError();
      }
      return this.index.find(serialHex);
    } finally {
      if (Atomics.sub(i32, H.readers, 1) === 1) Atomics.notify(i32, H.readers);
    }
  }
}
