/**
 * Outside test data lives in the steering repository's shared/testdata, beside this checkout (in
 * CI too); it is read from there, never copied into the repo. Looked for, in order: $SVCD_SHARED_DIR,
 * shared/ beside this checkout, and shared/ beside the checkout this one was cloned from (a scratch
 * clone in /tmp made from a local work tree).
 *
 * @example
 * ```ts
 * const vectors = await readSharedJson("composite-sigs-draft19.json");
 * ```
 */

const REPO = new URL("../../", import.meta.url).pathname;

/** Candidate shared/ folders, most specific first. */
async function sharedDirs(): Promise<string[]> {
  const dirs: string[] = [];
  const fromEnv = Deno.env.get("SVCD_SHARED_DIR");
  if (fromEnv) dirs.push(fromEnv);
  dirs.push(`${REPO}../shared`);
  const origin = await new Deno.Command("git", {
    args: ["-C", REPO, "config", "--get", "remote.origin.url"],
    stdout: "piped",
    stderr: "null",
  }).output().catch(() => undefined);
  const url = origin?.success ? new TextDecoder().decode(origin.stdout).trim() : "";
  if (url.startsWith("/")) dirs.push(`${url.replace(/\/(\.git)?\/?$/, "")}/../shared`);
  return dirs;
}

/** Parses a JSON file of shared/testdata; a missing file fails naming where it was looked for. */
export async function readSharedJson<T = unknown>(name: string): Promise<T> {
  const tried: string[] = [];
  for (const dir of await sharedDirs()) {
    const path = `${dir}/testdata/${name}`;
    try {
      return JSON.parse(await Deno.readTextFile(path)) as T;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      tried.push(path);
    }
  }
  throw new Error(
    `test data ${name} not found (looked at ${tried.join(", ")}); shared/ must sit beside the ` +
      "checkout, or set SVCD_SHARED_DIR",
  );
}
