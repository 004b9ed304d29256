/**
 * The audit directory as files: which `audit.log.NNNNNN` exist, where each one's complete lines
 * end, and the chain head (seq and MAC of the last complete line) a new file continues from.
 *
 * @example
 * ```ts
 * const tail = await findChainTail("/var/log/svcd"); // { nextNumber, prevFile, prevSize, seq, mac }
 * ```
 */
import { auditFileName, auditFileNumber, splitMac, ZERO_MAC } from "./format.ts";

/** Where a new file starts: its number, the file before it, and the chain head it continues. */
export interface ChainTail {
  /** Number of the file to create: one more than the highest present. */
  nextNumber: number;
  /** Name of the highest file present, or null in an empty directory. */
  prevFile: string | null;
  /** Bytes of `prevFile` up to and including its last newline (a torn tail after it is left alone). */
  prevSize: number | null;
  /** Bytes of `prevFile` after `prevSize` (a line torn by a crash); null in an empty directory. */
  prevTorn: number | null;
  /** Seq of the last complete line in the newest file that has one; 0 when none. */
  seq: number;
  /** MAC of that line; 32 zero bytes when none. */
  mac: Uint8Array;
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
 * const { nextNumber, seq, mac } = await findChainTail(dir);
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
      mac: ZERO_MAC,
    };
  }
  const newest = names[names.length - 1];
  const nextNumber = auditFileNumber(newest)! + 1;
  auditFileName(nextNumber); // throws a clear error past 999999
  let prev: { prevSize: number; prevTorn: number } | undefined;
  for (let i = names.length - 1; i >= 0; i--) {
    const last = await readLastLine(`${dir}/${names[i]}`);
    prev ??= { prevSize: last.completeSize, prevTorn: last.size - last.completeSize };
    if (last.line === undefined) continue; // an empty file, or only a torn line: look further back
    const head = parseHead(last.line);
    if (typeof head === "string") {
      throw new AuditDirectoryError(
        `cannot continue the audit chain: the last complete line of ${dir}/${
          names[i]
        } is damaged ` +
          `(${head}); run 'svcd audit verify --dir ${dir}' and have the log examined`,
      );
    }
    return { nextNumber, prevFile: newest, ...prev, ...head };
  }
  return { nextNumber, prevFile: newest, ...prev!, seq: 0, mac: ZERO_MAC };
}

function parseHead(line: Uint8Array): { seq: number; mac: Uint8Array } | string {
  const parts = splitMac(line);
  if (!parts) return "it does not end with a MAC";
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(line));
  } catch (err) {
    return `not JSON: ${(err as Error).message}`;
  }
  const seq = (parsed as { seq?: unknown }).seq;
  if (typeof seq !== "number" || !Number.isSafeInteger(seq) || seq < 1) return "no valid seq";
  return { seq, mac: parts.mac };
}

/**
 * The last `\n`-terminated line of a file (without the `\n`), the size through that `\n` and the
 * whole size.
 */
export async function readLastLine(
  path: string,
): Promise<{ line?: Uint8Array; completeSize: number; size: number }> {
  using file = await Deno.open(path, { read: true });
  const size = (await file.stat()).size;
  let window = Math.min(size, 64 * 1024);
  for (;;) {
    const start = size - window;
    const buf = await readAt(file, start, window);
    const lastNl = buf.lastIndexOf(0x0a);
    if (lastNl < 0 && start === 0) return { completeSize: 0, size };
    if (lastNl >= 0) {
      // lastIndexOf with a negative start would search from the end: guard the first byte.
      const prevNl = lastNl > 0 ? buf.lastIndexOf(0x0a, lastNl - 1) : -1;
      if (prevNl >= 0 || start === 0) {
        return { line: buf.slice(prevNl + 1, lastNl), completeSize: start + lastNl + 1, size };
      }
    }
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
