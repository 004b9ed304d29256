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
 * const memory = createIndexMemory(); // once, handed to every thread
 * const source = new IndexFileSource("/var/lib/svcd/index.txt", { memory });
 * const snap = await source.current(); // null when the file cannot be loaded
 * snap?.lookup("1A2B")?.status; // "V" | "R" | "E"
 * ```
 */
import { createHash } from "node:crypto";
import { bytesEqual } from "../bytes/mod.ts";
import { fileStamp } from "../../ffi/libc.ts";
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
  forEachRevoked,
  H,
  hashSlot,
  IndexLimitError,
  type IndexMemory,
  isNotUtf8,
  loadIndexBytes,
  loadIndexFile,
  MAX_INDEX_ENTRIES,
  type RevokedVisitor,
  setError,
  viewsOf,
} from "./index_compact.ts";

export {
  createIndexMemory,
  IndexLimitError,
  type IndexMemory,
  MAX_INDEX_ENTRIES,
  type RevokedVisitor,
};

/** With times in whole seconds or milliseconds: a file changed this recently is compared by content. */
export const RACY_MS = 2000;
/**
 * With nanosecond times: how long after a file's last change a rewrite may still get the same
 * times (the kernel's file clock advances once per scheduler tick, 1–10 ms; twice that for margin).
 */
export const RACY_WINDOW_MS = 20;
/**
 * How far a file's change time, rounded up to the millisecond, may stand ahead of Date.now(),
 * rounded down: file systems with fine-grained ("multigrain") times, such as tmpfs on current
 * kernels, stamp a file from the same fine clock Date.now() reads, so the two roundings alone can
 * put the file up to 2 ms in Date.now()'s future.
 */
const ROUNDING_MS = 2;

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
  /**
   * Stat with Deno's millisecond times instead of statx's nanoseconds (default false; also used
   * when FFI is not allowed). Tests use it to exercise the content comparison.
   */
  coarseTimes?: boolean;
}

const IDLE = 0, WRITING = 1;

interface Stamp {
  dev: number;
  ino: number;
  size: number;
  mtimeSec: number;
  mtimeNsec: number;
  ctimeSec: number;
  ctimeNsec: number;
  /** Latest change the times tell of, ms, rounded up. */
  changedAt: number;
  /** How long after changedAt a rewrite may leave these times unchanged, ms. */
  racyWindow: number;
}

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

  /** Whole reads of the file so far, by every thread. Example: `source.reads`. */
  get reads(): number {
    return Atomics.load(this.#i32, H.reads);
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
  #verified(stamp: Stamp, arrival: number): boolean {
    return this.#sameStamp(stamp) &&
      (this.#settled() || Atomics.load(this.#i32, H.checksDone) > arrival);
  }

  #stat(): Stamp | null {
    const fine = this.options.coarseTimes ? null : fineStamp(this.path);
    if (fine) {
      if (!fine.isFile) return this.#localFail(`${this.path} is not a file`);
      this.#localError = null;
      return fine;
    }
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(this.path);
    } catch (e) {
      return this.#localFail(`cannot stat ${this.path}: ${(e as Error).message}`);
    }
    if (!info.isFile) return this.#localFail(`${this.path} is not a file`);
    this.#localError = null;
    return coarseStamp(info);
  }

  #sameStamp(s: Stamp): boolean {
    const f = this.#f64;
    return f[F.hasStamp] === 1 && f[F.dev] === s.dev && f[F.ino] === s.ino &&
      f[F.size] === s.size && f[F.mtimeNsec] === s.mtimeNsec && f[F.ctimeNsec] === s.ctimeNsec &&
      f[F.mtimeSec] === s.mtimeSec && f[F.ctimeSec] === s.ctimeSec;
  }

  /** No content check is due: the file's racy window had passed when its content was last read. */
  #settled(): boolean {
    const f = this.#f64;
    return f[F.changedAt] + f[F.racyWindow] <= f[F.verifiedAt];
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
    const same = this.#sameStamp(stamp);
    const racy = stamp.changedAt + stamp.racyWindow > verifiedAt;
    let hash: Uint8Array | null = null;
    if (same || racy) {
      // Its content may be all that changed: read whole, hashed, and parsed only when it differs.
      let bytes: Uint8Array;
      try {
        bytes = Deno.readFileSync(this.path);
      } catch (e) {
        this.options.onLoad?.(false);
        return this.#localFail(`cannot read ${this.path}: ${(e as Error).message}`);
      }
      Atomics.add(this.#i32, H.reads, 1);
      hash = createHash("sha256").update(bytes).digest();
      if (same && this.#i32[H.hashed] === 1 && bytesEqual(hashSlot(this.memory), hash)) {
        this.#f64[F.verifiedAt] = verifiedAt;
        return this.#answer();
      }
      this.#load(() => loadIndexBytes(this.memory, bytes), stamp);
    } else {
      let file: Deno.FsFile;
      try {
        file = Deno.openSync(this.path, { read: true });
      } catch (e) {
        this.options.onLoad?.(false);
        return this.#localFail(`cannot read ${this.path}: ${(e as Error).message}`);
      }
      Atomics.add(this.#i32, H.reads, 1);
      try {
        this.#load(() => loadIndexFile(this.memory, file), stamp);
      } finally {
        file.close();
      }
    }
    this.#f64[F.changedAt] = stamp.changedAt;
    this.#f64[F.racyWindow] = stamp.racyWindow;
    this.#f64[F.verifiedAt] = verifiedAt;
    this.#i32[H.hashed] = hash ? 1 : 0;
    if (hash) hashSlot(this.memory).set(hash);
    return this.#answer();
  }

  /** Loads the database with `load` (the file's bytes, or the file itself) for this stamp. */
  #load(load: () => number, stamp: Stamp): void {
    const f = this.#f64;
    f[F.hasStamp] = 1;
    f[F.dev] = stamp.dev;
    f[F.ino] = stamp.ino;
    f[F.size] = stamp.size;
    f[F.mtimeSec] = stamp.mtimeSec;
    f[F.mtimeNsec] = stamp.mtimeNsec;
    f[F.ctimeSec] = stamp.ctimeSec;
    f[F.ctimeNsec] = stamp.ctimeNsec;
    Atomics.add(this.#i32, H.version, 1);
    try {
      load();
      setError(this.memory, null);
      this.#reported = null;
      this.options.onLoad?.(true);
    } catch (e) {
      const fileAtFault = e instanceof IndexLimitError || e instanceof IndexFormatError;
      const why = fileAtFault
        ? `${this.path}: ${isNotUtf8(e) ? "not UTF-8 text" : e.message}`
        : `${this.path}: cannot be read (${(e as Error).message})`;
      // A read that failed (not the file's content) is tried again at the next query.
      if (!fileAtFault) f[F.hasStamp] = 0;
      setError(this.memory, why);
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

let statxUsable = true;

/** The file's stamp from statx, or null when statx is not available or fails (Deno says why). */
function fineStamp(path: string): (Stamp & { isFile: boolean }) | null {
  if (!statxUsable) return null;
  let s;
  try {
    s = fileStamp(path);
  } catch {
    statxUsable = false; // no FFI permission, or no glibc
    return null;
  }
  if (!s) return null;
  const latest = Math.max(
    s.mtimeSec * 1000 + Math.ceil(s.mtimeNsec / 1e6),
    s.ctimeSec * 1000 + Math.ceil(s.ctimeNsec / 1e6),
  );
  // Both times on a whole second: a file system that keeps seconds only.
  const racyWindow = s.mtimeNsec === 0 && s.ctimeNsec === 0 ? RACY_MS : RACY_WINDOW_MS;
  return { ...s, changedAt: latest, racyWindow };
}

/** The stamp of Deno's stat: mtime in milliseconds, ctime in whole seconds (rounded up). */
function coarseStamp(info: Deno.FileInfo): Stamp {
  const mtime = info.mtime?.getTime() ?? NaN, ctime = info.ctime?.getTime() ?? NaN;
  return {
    dev: info.dev,
    ino: info.ino ?? 0,
    size: info.size,
    mtimeSec: Math.floor(mtime / 1000),
    mtimeNsec: (mtime % 1000) * 1e6,
    ctimeSec: Math.floor(ctime / 1000),
    ctimeNsec: (ctime % 1000) * 1e6,
    changedAt: Math.max(mtime, ctime + 999),
    racyWindow: RACY_MS,
  };
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
