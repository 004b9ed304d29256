/**
 * Outside test data lives in the steering repository's shared/testdata, beside this checkout (in
 * CI too); it is read from there, never copied into the repo.
 *
 * @example
 * ```ts
 * const vectors = await readSharedJson("composite-sigs-draft19.json");
 * ```
 */

const SHARED = new URL("../../../shared/testdata/", import.meta.url);

/** Parses a JSON file of shared/testdata; a missing file fails naming where it was looked for. */
export async function readSharedJson<T = unknown>(name: string): Promise<T> {
  const url = new URL(name, SHARED);
  try {
    return JSON.parse(await Deno.readTextFile(url)) as T;
  } catch (err) {
    throw new Error(
      `test data ${url.pathname} is unreadable (${(err as Error).message}); ` +
        "shared/ must sit beside the checkout",
    );
  }
}
