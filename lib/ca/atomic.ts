/**
 * Replaces a file so that a reader (the daemon's OCSP responder, `openssl ocsp -index`) sees
 * either the old content or the new, never a mix, and a power cut keeps one of the two: write a
 * temporary file in the same folder, fsync it, rename it over the target, fsync the folder.
 *
 * @example
 * ```ts ignore
 * import { writeFileAtomic } from "./atomic.ts";
 * await writeFileAtomic("/var/lib/svcd/ca/index.txt", new TextEncoder().encode(text));
 * ```
 */
import { basename, dirname, join } from "node:path";

/**
 * Writes `data` to `path` atomically and durably; `mode` for a new file (an existing file keeps
 * its mode).
 *
 * @example
 * ```ts
 * await writeFileAtomic("serial", new TextEncoder().encode("1A\n"), 0o644);
 * ```
 */
export async function writeFileAtomic(
  path: string,
  data: Uint8Array,
  mode = 0o644,
): Promise<void> {
  const dir = dirname(path);
  const existing = await Deno.stat(path).catch(() => null);
  const random = crypto.getRandomValues(new Uint8Array(6)).toHex();
  const temp = join(dir, `.${basename(path)}.${random}.tmp`);
  const file = await Deno.open(temp, { write: true, createNew: true, mode });
  try {
    try {
      if (existing?.mode != null) await Deno.chmod(temp, existing.mode & 0o7777);
      let written = 0;
      while (written < data.length) written += await file.write(data.subarray(written));
      await file.sync();
    } finally {
      file.close();
    }
    await Deno.rename(temp, path);
  } catch (err) {
    await Deno.remove(temp).catch(() => {});
    throw err;
  }
  const folder = await Deno.open(dir, { read: true });
  try {
    await folder.sync();
  } finally {
    folder.close();
  }
}
