/**
 * The index file on disk as the responder sees it: checked on every query, re-read when it changed,
 * and read once for every thread that shares its {@link IndexMemory}.
 *
 * Every query stats the file (device, inode, size, mtime, ctime) and compares the stamp with the
 * one the shared database was read from. Deno gives mtime in milliseconds and ctime in whole
 * seconds, too coarse to tell two rewrites in the same instant apart, so while the file is less
 * than `RACY_MS` old its content is also compared with what was parsed (by SHA-256; the "racy"
 * check git uses for its index): a same-second rewrite is seen on the very next query, and a file
 * left alone costs one stat per query.
 *
 * When the file changed, the first thread to see it takes the shared write lock and re-reads it
 * into the shared memory; a query in any thread that arrives meanwhile waits for that one re-read
 * (`Atomics.waitAsync`), then answers from it. Lookups hold a read lock for the few microseconds
 * they take, and a snapshot taken before a re-read refuses to answer (StaleSnapshotError) rather
 * than answer from a half-written database. A file that cannot be read, holds more certificates
 * than the memory was made for, or does not parse is unavailable (null) until it is fixed; the
 * previous good content is never answered from.
 *
 * @example
 * ```ts
 * const memory = createIndexMemory(); // once, handed to every thread
 * const source = new IndexFileSource("/var/lib/svcd/index.txt", { memory });
 * const snap = await source.current(); // null when the file cannot be loaded
 * snap?.lookup("1A2B")?.status; // "V" | "R" | "E"
 * ```
 */
import { createHash } from "node:crypto";
import { bytesEqual } from "../bytes/mod.ts";
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
  errorOf,
  F,
  H,
  hashSlot,
  IndexLimitError,
  type IndexMemory,
  isNotUtf8,
  loadIndexBytes,
  MAX_INDEX_ENTRIES,
  setError,
  viewsOf,
} from "./index_compact.ts";

export { createIndexMemory, IndexLimitError, type IndexMemory, MAX_INDEX_ENTRIES };

/** A file modified this recently is also compared by content (see the module comment). */
export const RACY_MS = 2000;

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
}

const IDLE = 0, WRITING = 1;

interface Stamp {
  dev: number;
  ino: number;
  size: number;
  mtime: number;
  ctime: number;
}

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
  readonly #f64: Float64Array;
  /** Why this thread could not stat or read the file (not shared: each thread sees that itself). */
  #localError: string | null = null;
  #reported: string | null = null;
  #snapshot: SharedSnapshot | null = null;

  /** Example: `new IndexFileSource("/var/lib/svcd/index.txt", { memory })`. */
  constructor(readonly path: string, private readonly options: IndexFileSourceOptions = {}) {
    this.memory = options.memory ?? createIndexMemory(options.maxEntries ?? MAX_INDEX_ENTRIES);
    const v = viewsOf(this.memory);
    this.#i32 = v.i32;
    this.#f64 = v.f64;
    this.#index = new CompactIndex(this.memory);
  }

  /** Why the file is unavailable now, or null. Example: `source.lastError`. */
  get lastError(): string | null {
    if (this.#localError !== null) return this.#localError;
    return Atomics.load(this.#i32, H.loaded) === 1 ? null : errorOf(this.memory);
  }

  /** Whether the last load failed because the file holds more certificates than allowed. */
  get overLimit(): boolean {
    return this.#localError === null && this.#i32[H.overLimit] === 1;
  }

  /** Parses done in the shared memory so far, by every thread. Example: `source.parses`. */
  get parses(): number {
    return Atomics.load(this.#i32, H.parses);
  }

  /**
   * The database now, or null when it cannot be loaded; a promise while another thread re-reads
   * the file. Never throws. Example: `await source.current()`.
   */
  current(): RevocationSnapshot | null | Promise<RevocationSnapshot | null> {
    const stamp = this.#stat();
    if (!stamp) return null;
    if (Atomics.load(this.#i32, H.state) === IDLE && this.#sameStamp(stamp) && this.#settled()) {
      return this.#answer();
    }
    if (Atomics.compareExchange(this.#i32, H.state, IDLE, WRITING) !== IDLE) return this.#wait();
    try {
      return this.#refresh();
    } finally {
      Atomics.store(this.#i32, H.state, IDLE);
      Atomics.notify(this.#i32, H.state);
    }
  }

  async #wait(): Promise<RevocationSnapshot | null> {
    const waiting = Atomics.waitAsync(this.#i32, H.state, WRITING);
    if (waiting.async) await waiting.value;
    return await this.current();
  }

  #stat(): Stamp | null {
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(this.path);
    } catch (e) {
      return this.#localFail(`cannot stat ${this.path}: ${(e as Error).message}`);
    }
    if (!info.isFile) return this.#localFail(`${this.path} is not a file`);
    this.#localError = null;
    return {
      dev: info.dev,
      ino: info.ino ?? 0,
      size: info.size,
      mtime: info.mtime?.getTime() ?? NaN,
      ctime: info.ctime?.getTime() ?? NaN,
    };
  }

  #sameStamp(s: Stamp): boolean {
    const f = this.#f64;
    return f[F.hasStamp] === 1 && f[F.dev] === s.dev && f[F.ino] === s.ino &&
      f[F.size] === s.size && f[F.mtime] === s.mtime && f[F.ctime] === s.ctime;
  }

  /** No content check is due: the file had been left alone for RACY_MS when last verified. */
  #settled(): boolean {
    return this.#f64[F.changedAt] + RACY_MS <= this.#f64[F.verifiedAt];
  }

  /** Under the write lock: the file is stat'ed again (another thread may have re-read it). */
  #refresh(): RevocationSnapshot | null {
    const stamp = this.#stat();
    if (!stamp) return null;
    this.#waitForReaders();
    const same = this.#sameStamp(stamp);
    if (same && this.#settled()) return this.#answer();
    const verifiedAt = Date.now();
    let bytes: Uint8Array;
    try {
      bytes = Deno.readFileSync(this.path);
    } catch (e) {
      this.options.onLoad?.(false);
      return this.#localFail(`cannot read ${this.path}: ${(e as Error).message}`);
    }
    const changedAt = Math.max(stamp.mtime, stamp.ctime + 999);
    const racy = changedAt + RACY_MS > verifiedAt;
    const hash = same || racy ? createHash("sha256").update(bytes).digest() : null;
    if (same && this.#i32[H.hashed] === 1 && bytesEqual(hashSlot(this.memory), hash!)) {
      this.#f64[F.verifiedAt] = verifiedAt;
      return this.#answer();
    }
    this.#load(bytes, stamp);
    this.#f64[F.changedAt] = changedAt;
    this.#f64[F.verifiedAt] = verifiedAt;
    this.#i32[H.hashed] = hash ? 1 : 0;
    if (hash) hashSlot(this.memory).set(hash);
    return this.#answer();
  }

  #load(bytes: Uint8Array, stamp: Stamp): void {
    const f = this.#f64;
    f[F.hasStamp] = 1;
    f[F.dev] = stamp.dev;
    f[F.ino] = stamp.ino;
    f[F.size] = stamp.size;
    f[F.mtime] = stamp.mtime;
    f[F.ctime] = stamp.ctime;
    Atomics.add(this.#i32, H.version, 1);
    try {
      loadIndexBytes(this.memory, bytes);
      setError(this.memory, null);
      this.#reported = null;
      this.options.onLoad?.(true);
    } catch (e) {
      const why = e instanceof IndexLimitError || e instanceof IndexFormatError
        ? `${this.path}: ${isNotUtf8(e) ? "not UTF-8 text" : e.message}`
        : `${this.path}: cannot be read (${(e as Error).message})`;
      setError(this.memory, why);
      this.#report(why);
      this.options.onLoad?.(false);
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
