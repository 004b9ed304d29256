/**
 * File systems for tests that need one of a given kind (root only): a ramfs (what systemd uses for
 * credentials: "secure"), a tmpfs ("weak"), or a read-only tmpfs (a folder nobody, not even root,
 * may write in). Each is unmounted and its mount point removed by `cleanup()`.
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
