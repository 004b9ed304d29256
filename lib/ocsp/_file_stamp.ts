/**
 * A file's stamp: what tells whether index.txt may have changed since it was read (device, inode,
 * size, mtime and ctime), and how long after its last change a rewrite could still leave the stamp
 * as it is. Taken by statx (nanosecond times) or, where FFI is not allowed, by Deno's stat
 * (milliseconds, ctime in whole seconds); kept in shared memory as a row of numbers, so every
 * thread compares the file with the stamp of the one the database was read from.
 *
 * @example
 * ```ts
 * const row = new SharedStamp(new Float64Array(STAMP_SLOTS));
 * const stamp = stampOf("/var/lib/svcd/ca/index.txt", false);
 * if (typeof stamp !== "string" && !row.same(stamp)) row.store(stamp); // read the file again
 * ```
 */
import { S_IFMT, S_IFREG, statx } from "../../ffi/libc.ts";

/** With times in whole seconds or milliseconds: a file changed this recently is compared by content. */
export const RACY_MS = 2000;
/**
 * With nanosecond times: how long after a file's last change a rewrite may still get the same
 * times (the kernel's file clock advances once per scheduler tick, 1–10 ms; twice that for margin).
 */
export const RACY_WINDOW_MS = 20;

/** A file's stamp. */
export interface FileStamp {
  /** Device and inode: which file. */
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

/** The fields that are one version of the file, in the order of their slots. */
const VERSION = ["dev", "ino", "size", "mtimeSec", "mtimeNsec", "ctimeSec", "ctimeNsec"] as const;
const PRESENT = 0, FIRST = 1, CHANGED_AT = FIRST + VERSION.length, RACY_WINDOW = CHANGED_AT + 1;

/** Float64 slots a {@link SharedStamp} takes. */
export const STAMP_SLOTS = RACY_WINDOW + 1;

/** A stamp kept in shared memory, read and written in place. */
export class SharedStamp {
  /** Example: `new SharedStamp(new Float64Array(new SharedArrayBuffer(8 * STAMP_SLOTS)))`. */
  constructor(private readonly slots: Float64Array) {}

  /** Keeps `stamp`. */
  store(stamp: FileStamp): void {
    const f = this.slots;
    for (let i = 0; i < VERSION.length; i++) f[FIRST + i] = stamp[VERSION[i]];
    f[CHANGED_AT] = stamp.changedAt;
    f[RACY_WINDOW] = stamp.racyWindow;
    f[PRESENT] = 1;
  }

  /** Keeps none: no stamp is then the same (a read that failed is tried again). */
  forget(): void {
    this.slots[PRESENT] = 0;
  }

  /** Whether `stamp` is the one kept: the same version of the same file, as far as stat tells. */
  same(stamp: FileStamp): boolean {
    const f = this.slots;
    if (f[PRESENT] !== 1) return false;
    for (let i = 0; i < VERSION.length; i++) if (f[FIRST + i] !== stamp[VERSION[i]]) return false;
    return true;
  }

  /** Whether a rewrite could no longer hide behind the kept stamp at `time` (ms). */
  settledAt(time: number): boolean {
    return this.slots[CHANGED_AT] + this.slots[RACY_WINDOW] <= time;
  }
}

let statxUsable = true;

/**
 * The stamp of the file at `path` (with Deno's stat only, where `coarseTimes`), or why there is
 * none (it cannot be stat'ed, or is not a file).
 */
export function stampOf(path: string, coarseTimes: boolean): FileStamp | string {
  const fine = coarseTimes ? null : fineStamp(path);
  if (fine) return fine;
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (e) {
    return `cannot stat ${path}: ${(e as Error).message}`;
  }
  return info.isFile ? coarseStamp(info) : `${path} is not a file`;
}

/** The stamp from statx, or null when statx is not available or fails (Deno's stat says why). */
function fineStamp(path: string): FileStamp | string | null {
  if (!statxUsable) return null;
  let s;
  try {
    s = statx(path);
  } catch {
    statxUsable = false; // no FFI permission, or no glibc
    return null;
  }
  if (!s) return null;
  if ((s.mode & S_IFMT) !== S_IFREG) return `${path} is not a file`;
  const { mtime, ctime } = s;
  const latest = Math.max(
    mtime.sec * 1000 + Math.ceil(mtime.nsec / 1e6),
    ctime.sec * 1000 + Math.ceil(ctime.nsec / 1e6),
  );
  return {
    dev: s.devMajor * 2 ** 20 + s.devMinor,
    ino: s.ino,
    size: s.size,
    mtimeSec: mtime.sec,
    mtimeNsec: mtime.nsec,
    ctimeSec: ctime.sec,
    ctimeNsec: ctime.nsec,
    changedAt: latest,
    // Both times on a whole second: a file system that keeps seconds only.
    racyWindow: mtime.nsec === 0 && ctime.nsec === 0 ? RACY_MS : RACY_WINDOW_MS,
  };
}

/** The stamp of Deno's stat: mtime in milliseconds, ctime in whole seconds (rounded up). */
function coarseStamp(info: Deno.FileInfo): FileStamp {
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
