/**
 * File systems for tests that need one of a given kind (root only): a ramfs (what systemd uses for
 * credentials: "secure"), a tmpfs ("weak"), or a read-only tmpfs (a folder nobody, not even root,
 * may write in). Each is unmounted and its mount point removed by `cleanup()`. For tests of a full
 * disk: a 64 KiB tmpfs on a folder of the test's (`mountSmallTmpfs`), and `fillFs` to fill it.
 *
 * @example
 * ```ts
 * declare const pin: string;
 * const ram = await mountFs("ramfs");
 * try { await Deno.copyFile(pin, `${ram.path}/svc-pin`); } finally { await ram.cleanup(); }
 * ```
 */

/** A mounted file system. */
export interface TestMount {
  path: string;
  cleanup(): Promise<void>;
}

/** Whether this process may mount (root). */
export const canMount = Deno.uid() === 0;

async function run(program: string, args: string[]): Promise<void> {
  const out = await new Deno.Command(program, { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) {
    throw new Error(`${program} ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/**
 * Mounts a fresh file system of `kind` on a new temporary folder (mode 0700 unless given; a tmpfs
 * holds 1 MiB unless `sizeMiB` says more).
 *
 * @example
 * ```ts
 * const ro = await mountFs("tmpfs", { readOnly: true });
 * ```
 */
export async function mountFs(
  kind: "ramfs" | "tmpfs",
  opts: { readOnly?: boolean; mode?: number; sizeMiB?: number } = {},
): Promise<TestMount> {
  const path = await Deno.makeTempDir({ prefix: `svcd-${kind}-` });
  const options = [`mode=${(opts.mode ?? 0o700).toString(8)}`];
  if (kind === "tmpfs") options.push(`size=${opts.sizeMiB ?? 1}m`);
  if (opts.readOnly) options.push("ro");
  try {
    await run("mount", ["-t", kind, "-o", options.join(","), kind, path]);
  } catch (err) {
    await Deno.remove(path);
    throw err;
  }
  return {
    path,
    cleanup: async () => {
      await run("umount", [path]);
      await Deno.remove(path);
    },
  };
}

/** A small tmpfs mounted on a folder of the test's: see `mountSmallTmpfs`. */
export interface SmallTmpfs {
  /** Unmounts lazily: a file a failed test left open cannot keep the mount. The folder stays. */
  unmount(): Promise<void>;
}

/**
 * Mounts a 64 KiB tmpfs (mode 0750 unless given) on the existing folder `path`, for tests of a
 * full disk; undefined where this process may not mount one (not root, or the mount is refused).
 *
 * @example
 * ```ts
 * const dir = await Deno.makeTempDir();
 * const small = await mountSmallTmpfs(dir);
 * try {
 *   if (small) await fillFs(dir); // writes in dir now fail with ENOSPC
 * } finally {
 *   await small?.unmount();
 * }
 * ```
 */
export async function mountSmallTmpfs(
  path: string,
  opts: { mode?: number } = {},
): Promise<SmallTmpfs | undefined> {
  if (Deno.uid() !== 0) return undefined;
  const mode = (opts.mode ?? 0o750).toString(8);
  const r = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", `size=64k,mode=${mode}`, "tmpfs", path],
    stderr: "null",
  }).output();
  if (!r.success) return undefined;
  return {
    unmount: async () => {
      await new Deno.Command("umount", { args: ["-l", path] }).output();
    },
  };
}

/**
 * Whether `mountSmallTmpfs` works here, found by mounting one on a probe folder (root may still be
 * refused, e.g. in a container). For a test's `ignore`.
 *
 * @example
 * ```ts
 * const canFill = await smallTmpfsAvailable();
 * ```
 */
export async function smallTmpfsAvailable(): Promise<boolean> {
  const probe = await Deno.makeTempDir();
  const small = await mountSmallTmpfs(probe);
  await small?.unmount();
  await Deno.remove(probe);
  return small !== undefined;
}

/**
 * Fills the file system of `dir` with one file, `filler`, until it says no space is left; returns
 * its path (removing it gives the space back).
 *
 * @example
 * ```ts
 * declare const dir: string;
 * await Deno.remove(await fillFs(dir));
 * ```
 */
export async function fillFs(dir: string): Promise<string> {
  const path = `${dir}/filler`;
  using f = await Deno.open(path, { create: true, write: true });
  const chunk = new Uint8Array(4096);
  try {
    for (;;) await f.write(chunk);
  } catch (err) {
    if (!(err instanceof Error) || !/No space left|ENOSPC/i.test(String(err))) throw err;
  }
  return path;
}
