/**
 * cRLNumbers that only grow (RFC 5280 §5.2.3), across restarts, `svcd ca` runs, `openssl ca
 * -gencrl` and several daemons reading one CA folder.
 *
 * A number is the larger of two: the counter file's value (openssl's `crlnumber` format: the next
 * number, in hex) and the CRL's thisUpdate in milliseconds since 1970. The counter is read and
 * advanced under an exclusive lock (flock) on a lock file beside it, so two processes sharing the
 * folder never take the same number, and each takes one above every number taken before. The
 * time makes a number larger than any taken earlier by a process that could not reach the counter
 * (a node whose own counter stands in for an unwritable shared one): numbers then follow the
 * clocks, which agree to the millisecond under NTP.
 *
 * @example
 * ```ts
 * const n = await advanceCrlNumber("/var/lib/svcd/ca/crlnumber", "/var/lib/svcd/ca/.lock", 1700000000000n);
 * ```
 */
import { writeFileAtomic } from "./atomic.ts";

/** The counter file does not hold a number. */
export class CrlNumberError extends Error {
  override name = "CrlNumberError";
}

/**
 * Takes a cRLNumber of at least `atLeast` from the counter at `path` (1 when it does not exist),
 * under an exclusive lock on `lockPath`, and stores the number after it. The file is replaced
 * atomically where its folder is writable, else rewritten in place (a folder that is root's, a
 * counter file the daemon's group may write). Throws when it can be neither (the caller keeps a
 * counter of its own then).
 *
 * @example
 * ```ts
 * await advanceCrlNumber("crlnumber", ".lock", BigInt(Date.now())); // e.g. 1767225600000n
 * ```
 */
export async function advanceCrlNumber(
  path: string,
  lockPath: string,
  atLeast: bigint,
): Promise<bigint> {
  const lock = await openLock(lockPath);
  try {
    await lock.lock(true);
    const stored = await readCounter(path);
    const value = stored > atLeast ? stored : atLeast;
    await writeCounter(path, value + 1n);
    return value;
  } finally {
    lock.close();
  }
}

/** The lock file, created when it can be; an existing one only read (flock needs no write access). */
async function openLock(path: string): Promise<Deno.FsFile> {
  try {
    return await Deno.open(path, { write: true, create: true, mode: 0o644 });
  } catch (err) {
    if (!(err instanceof Deno.errors.PermissionDenied)) throw err;
    return await Deno.open(path, { read: true });
  }
}

async function readCounter(path: string): Promise<bigint> {
  let text: string;
  try {
    text = (await Deno.readTextFile(path)).trim();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return 1n;
    throw err;
  }
  if (!/^[0-9A-Fa-f]{1,40}$/.test(text)) {
    throw new CrlNumberError(`${path} holds '${text.slice(0, 40)}', not a number in hex`);
  }
  return BigInt("0x" + text);
}

async function writeCounter(path: string, next: bigint): Promise<void> {
  let hex = next.toString(16).toUpperCase();
  if (hex.length % 2) hex = "0" + hex;
  const data = new TextEncoder().encode(hex + "\n");
  try {
    await writeFileAtomic(path, data);
    return;
  } catch (err) {
    if (!(err instanceof Deno.errors.PermissionDenied)) throw err;
  }
  // The folder is not ours, the file may be: rewritten in place, under the lock.
  const file = await Deno.open(path, { write: true });
  try {
    let written = 0;
    while (written < data.length) written += await file.write(data.subarray(written));
    await file.truncate(data.length);
    await file.sync();
  } finally {
    file.close();
  }
}
