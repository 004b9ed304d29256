/**
 * Temporary folders that outlive a test but not its test module: removed when the module ends
 * (the `unload` event, which `deno test` fires), whatever the tests did with them.
 *
 * @example
 * ```ts
 * const dir = moduleTempDir("svcd-public-");
 * ```
 */

/**
 * A new temporary folder, removed with everything in it when the test module ends.
 */
export function moduleTempDir(prefix: string): string {
  const dir = Deno.makeTempDirSync({ prefix });
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch {
      // Removed already by the test itself.
    }
  });
  return dir;
}
