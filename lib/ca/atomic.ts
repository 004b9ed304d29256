/**
 * Replaces a file so that a reader (the daemon's OCSP responder, `openssl ocsp -index`) sees
 * either the old content or the new, never a mix, and a power cut keeps one of the two: write a
 * temporary file in the same folder, fsync it, rename it over the target, fsync the folder.
 * The replacement keeps the old file's owner, group and mode: `svcd ca revoke` run as root on a
 * `0640 root:svcd` index.txt must leave it readable by the daemon's group.
 *
 * @example
 * ```ts
 * declare const text: string;
 * await writeFileAtomic("/var/lib/svcd/ca/index.txt", new TextEncoder().encode(text));
 * ```
 */
import { basename, dirname, join } from "node:path";

/**
 * Writes `data` to `path` atomically and durably; `mode` for a new file (an existing file keeps
 * its owner, group and mode; when they cannot be kept, nothing is written and the error says why).
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
      if (existing) await keepOwnerAndMode(temp, existing, path);
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

// chown first: it clears set-id bits, which the chmod after it restores.
async function keepOwnerAndMode(temp: string, old: Deno.FileInfo, path: string): Promise<void> {
  const now = await Deno.stat(temp);
  if (old.uid !== null && old.gid !== null && (old.uid !== now.uid || old.gid !== now.gid)) {
    try {
      await Deno.chown(temp, old.uid, old.gid);
    } catch (err) {
      throw new Error(
        `cannot keep ${path}'s owner ${old.uid}:${old.gid} (${
          err instanceof Error ? err.message : err
        }); run this as root or as the file's owner`,
      );
    }
  }
  if (old.mode !== null) await Deno.chmod(temp, old.mode & 0o7777);
}
