/**
 * What a test runs as another user must be readable by that user, and a checkout may not be (a
 * clone in a 0700 temporary folder, as CI makes one): these put Deno's executable and the source
 * a child imports in a folder of the test that any user may read.
 *
 * @example
 * ```ts
 * import { denoAnyUserCanRun, sourceAnyUserCanRead } from "./any_user.ts";
 * declare const dir: string; // mode 0755
 * const deno = denoAnyUserCanRun(dir);
 * const child = sourceAnyUserCanRead(dir, ["lib", "ffi", "tests/support/index_unreadable_child.ts"]);
 * ```
 */
import { cpSync } from "node:fs";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Deno's executable at `dir/bin/deno` (a hard link where it can be, else a copy), mode 0755. */
export function denoAnyUserCanRun(dir: string): string {
  Deno.mkdirSync(`${dir}/bin`, { mode: 0o755 });
  Deno.chmodSync(`${dir}/bin`, 0o755);
  const path = `${dir}/bin/deno`;
  try {
    Deno.linkSync(Deno.execPath(), path);
  } catch {
    Deno.copyFileSync(Deno.execPath(), path);
  }
  Deno.chmodSync(path, 0o755);
  return path;
}

/**
 * Copies `paths` (files or folders, relative to the repository) to `dir/src`, keeping their
 * places, readable by any user; returns `dir/src`.
 */
export function sourceAnyUserCanRead(dir: string, paths: string[]): string {
  const src = `${dir}/src`;
  for (const path of paths) cpSync(`${ROOT}${path}`, `${src}/${path}`, { recursive: true });
  makeReadable(src);
  return src;
}

function makeReadable(path: string): void {
  const info = Deno.statSync(path);
  Deno.chmodSync(path, info.isDirectory ? 0o755 : 0o644);
  if (!info.isDirectory) return;
  for (const entry of Deno.readDirSync(path)) makeReadable(`${path}/${entry.name}`);
}
