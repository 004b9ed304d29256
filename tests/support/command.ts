/**
 * Runs a command to completion for a test and returns its exit code and output as text.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * const r = await runCommand("openssl", ["version"]);
 * assert.equal(r.code, 0, r.text);
 * ```
 */

/** Exit code, the two streams, and both together (for assertion messages). */
export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
  text: string;
}

/** Runs `program args…` with stdin closed; `env` is added to (or, with clearEnv, replaces) ours. */
export async function runCommand(
  program: string,
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string; clearEnv?: boolean } = {},
): Promise<CommandResult> {
  const out = await new Deno.Command(program, {
    args,
    env: opts.env,
    cwd: opts.cwd,
    clearEnv: opts.clearEnv,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  const stdout = decoder.decode(out.stdout), stderr = decoder.decode(out.stderr);
  return { code: out.code, stdout, stderr, text: stdout + stderr };
}

/**
 * Runs `deno run -A <script> args…` with this test's Deno.
 *
 * @example
 * ```ts
 * await runDeno(["main.ts", "--help"]);
 * ```
 */
export function runDeno(
  args: string[],
  opts: { env?: Record<string, string>; cwd?: string; clearEnv?: boolean } = {},
): Promise<CommandResult> {
  return runCommand(Deno.execPath(), ["run", "-A", ...args], opts);
}

/**
 * Runs `fn` with a throw-away system user (no home) and a temporary folder; both are removed
 * afterwards, whatever `fn` does. Root only.
 *
 * @example
 * ```ts
 * await withTempUser("svcd-t", "svcd-runas-", async (user, dir) => {
 *   await Deno.chown(dir, user.uid, null); // a folder the user may write in
 * });
 * ```
 */
export async function withTempUser(
  userPrefix: string,
  dirPrefix: string,
  fn: (user: { name: string; uid: number }, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: dirPrefix });
  const name = `${userPrefix}${crypto.getRandomValues(new Uint32Array(1))[0] % 100000}`;
  const added = await runCommand("useradd", ["--system", "--no-create-home", name]);
  if (added.code !== 0) throw new Error(`useradd ${name}: ${added.text}`);
  try {
    const uid = Number((await runCommand("id", ["-u", name])).stdout);
    await fn({ name, uid }, dir);
  } finally {
    await runCommand("userdel", [name]);
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * The secret in a systemd-creds credential named svc-pin, as text (to check no output holds it).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * declare const output: string;
 * assert.ok(!output.includes(await decryptCredential("/etc/svcd/svc-pin.cred")));
 * ```
 */
export async function decryptCredential(path: string): Promise<string> {
  const r = await runCommand("systemd-creds", ["decrypt", "--name=svc-pin", path, "-"]);
  if (r.code !== 0) throw new Error(`systemd-creds decrypt ${path}: ${r.stderr}`);
  return r.stdout;
}
