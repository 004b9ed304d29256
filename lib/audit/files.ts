/**
 * The audit directory as files: which `audit.log.NNNNNN` exist, where each one's sealed lines end,
 * the chain head (seq and chain value of the last sealed line) a new file continues from, and the
 * creation of the next file.
 *
 * @example
 * ```ts
 * const tail = await findChainTail("/var/log/svcd"); // { nextNumber, prevFile, prevSize, seq, value }
 * ```
 */
import { auditFileName, auditFileNumber, splitTrailer, ZERO_MAC } from "./format.ts";

/** Where a new file starts: its number, the file before it, and the chain head it continues. */
export interface ChainTail {
  /** Number of the file to create: one more than the highest present. */
  nextNumber: number;
  /** Name of the highest file present, or null in an empty directory. */
  prevFile: string | null;
  /**
   * Bytes of `prevFile` through its last sealed line (a torn or unsealed tail after it is left
   * alone: it was never acknowledged, and no key vouches for it).
   */
  prevSize: number | null;
  /**
   * Bytes of `prevFile` after `prevSize` (a partial line, or whole lines no seal covers, left by a
   * crash); null in an empty directory.
   */
  prevTorn: number | null;
  /** Seq of the last sealed line in the newest file that has one; 0 when none. */
  seq: number;
  /** Chain value of that line (its hash, or a v1 line's MAC); 32 zero bytes when none. */
  value: Uint8Array;
}

/** A directory that cannot be continued (unreadable, or a damaged last line). */
export class AuditDirectoryError extends Error {
  override name = "AuditDirectoryError";
}

/**
 * The audit files in `dir`, oldest first, as names (other files are ignored).
 *
 * @example
 * ```ts
 * await listAuditFiles("/var/log/svcd"); // ["audit.log.000001", "audit.log.000002"]
 * ```
 */
export async function listAuditFiles(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isFile && auditFileNumber(entry.name) !== undefined) names.push(entry.name);
  }
  return names.sort((a, b) => auditFileNumber(a)! - auditFileNumber(b)!);
}

/**
 * The chain head a new file in `dir` must continue from (see {@link ChainTail}).
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const { nextNumber, seq, value } = await findChainTail(dir);
 * ```
 */
export async function findChainTail(dir: string): Promise<ChainTail> {
  let names: string[];
  try {
    names = await listAuditFiles(dir);
  } catch (err) {
    throw new AuditDirectoryError(
      `audit directory ${dir} cannot be read: ${(err as Error).message}`,
    );
  }
  if (names.length === 0) {
    return {
      nextNumber: 1,
      prevFile: null,
      prevSize: null,
      prevTorn: null,
      seq: 0,
      value: ZERO_MAC,
    };
  }
  const newest = names[names.length - 1];
  const nextNumber = auditFileNumber(newest)! + 1;
  auditFileName(nextNumber); // throws a clear error past 999999
  let prev: { prevSize: number; prevTorn: number } | undefined;
  for (let i = names.length - 1; i >= 0; i--) {
    const last = await readLastSealedLine(`${dir}/${names[i]}`);
    prev ??= { prevSize: last.sealedSize, prevTorn: last.size - last.sealedSize };
    if (last.line === undefined) continue; // nothing sealed (empty, torn, unsealed): look further back
    const head = parseHead(last.line);
    if (typeof head === "string") {
      throw new AuditDirectoryError(
        `cannot continue the audit chain: the last complete line of ${dir}/${
          names[i]
        } is damaged ` +
          `(${head}); run 'svcd audit verify --audit-dir ${dir}' and have the log examined`,
      );
    }
    return { nextNumber, prevFile: newest, ...prev, ...head };
  }
  return { nextNumber, prevFile: newest, ...prev!, seq: 0, value: ZERO_MAC };
}

function parseHead(line: Uint8Array): { seq: number; value: Uint8Array } | string {
  const parts = splitTrailer(line);
  if (!parts) return "it does not end with a hash or a MAC";
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(line));
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  const seq = (parsed as { seq?: unknown }).seq;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1) return "no valid seq";
  return { seq, value: parts.value };
}

/**
 * The last sealed line of a file (without its `\n`: a v2 line carrying a seal, or a v1 line), the
 * file's size through it and its whole size; a line that ends in no hash or MAC at all is returned as it is, for
 * the caller to call damaged. Complete lines after it without a seal are passed over: a group
 * whose sync never finished (the seal is written last) or lines added by someone without the key.
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const { line, sealedSize } = await readLastSealedLine(`${dir}/audit.log.000003`);
 * ```
 */
export async function readLastSealedLine(
  path: string,
): Promise<{ line?: Uint8Array; sealedSize: number; size: number }> {
  using file = await Deno.open(path, { read: true });
  const size = (await file.stat()).size;
  let window = Math.min(size, 64 * 1024);
  for (;;) {
    const start = size - window;
    const buf = await readAt(file, start, window);
    for (let end = buf.lastIndexOf(0x0a); end >= 0;) {
      // lastIndexOf with a negative start would search from the end: guard the first byte.
      const prevNl = end > 0 ? buf.lastIndexOf(0x0a, end - 1) : -1;
      if (prevNl < 0 && start > 0) break; // the line may begin before this window
      const line = buf.slice(prevNl + 1, end);
      const trailer = splitTrailer(line);
      if (!trailer || trailer.version === 1 || trailer.seal) {
        return { line, sealedSize: start + end + 1, size };
      }
      end = prevNl;
    }
    if (start === 0) return { sealedSize: 0, size };
    window = Math.min(size, window * 4);
  }
}

async function readAt(file: Deno.FsFile, offset: number, length: number): Promise<Uint8Array> {
  await file.seek(offset, Deno.SeekMode.Start);
  const buf = new Uint8Array(length);
  let got = 0;
  while (got < length) {
    const n = await file.read(buf.subarray(got));
    if (n === null) break;
    got += n;
  }
  return buf.subarray(0, got);
}

/**
 * The name of the file after `current` (undefined: none yet), past every audit file in `dir`: a
 * new file never takes the number of one that exists or existed before it.
 *
 * @example
 * ```ts
 * nextAuditFileName("/var/log/svcd", "audit.log.000004"); // "audit.log.000005" in a tidy folder
 * ```
 */
export function nextAuditFileName(dir: string, current: string | undefined): string {
  let highest = current ? auditFileNumber(current)! : 0;
  try {
    for (const e of Deno.readDirSync(dir)) {
      highest = Math.max(highest, auditFileNumber(e.name) ?? 0);
    }
  } catch { /* the directory itself may be gone: creating the file will say so */ }
  return auditFileName(highest + 1);
}

/**
 * Creates `name` in `dir` for writing, mode 0640, never over an existing file (O_EXCL). Its
 * directory entry is durable only after {@link syncDirectory}.
 *
 * @example
 * ```ts
 * const file = await createAuditFile("/var/log/svcd", "audit.log.000005");
 * ```
 */
export async function createAuditFile(dir: string, name: string): Promise<Deno.FsFile> {
  const path = `${dir}/${name}`;
  try {
    return await Deno.open(path, { createNew: true, write: true, mode: 0o640 });
  } catch (err) {
    if (err instanceof Deno.errors.AlreadyExists) {
      throw new Error(`${path} already exists: is another svcd writing ${dir}?`);
    }
    throw err;
  }
}

/**
 * A new file's directory entry is durable only once the directory itself is synced.
 *
 * @example
 * ```ts
 * await syncDirectory("/var/log/svcd");
 * ```
 */
export async function syncDirectory(dir: string): Promise<void> {
  using d = await Deno.open(dir, { read: true });
  await d.sync();
}
