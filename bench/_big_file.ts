/**
 * The big file the client benches sign: `bytes` of 64 random KiB repeated, each MiB marked with
 * its number, so no two MiB are alike and making it costs no hashing.
 *
 * @example
 * ```ts
 * import { writeBigFile } from "./_big_file.ts";
 * await writeBigFile("/mnt/tmpfs/big", 1 << 30);
 * ```
 */

/** `bytes` of 64 random KiB repeated, each MiB marked with its number (no hashing to make it). */
export async function writeBigFile(path: string, bytes: number): Promise<void> {
  const block = crypto.getRandomValues(new Uint8Array(1 << 16));
  const mib = new Uint8Array(1 << 20);
  for (let i = 0; i < 16; i++) mib.set(block, i << 16);
  using f = await Deno.open(path, { write: true, create: true, truncate: true });
  for (let i = 0; i < bytes >> 20; i++) {
    new DataView(mib.buffer).setUint32(0, i);
    for (let at = 0; at < mib.length;) at += await f.write(mib.subarray(at));
  }
}
