/**
 * Runs a command to completion for a test and returns its exit code and output as text.
 *
 * @example
 * ```ts ignore
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
