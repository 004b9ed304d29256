/**
 * A throw-away token for tests: temp directory, module config, `svcd token init` and `keygen` run as
 * subprocesses (exactly what an operator runs), PIN credential in a plain directory.
 *
 * @example
 * ```ts
 * import { makeTestToken } from "./token.ts";
 * const token = await makeTestToken({ keys: { "k-ec": "ec-p256", "k-mldsa": "ml-dsa-65" } });
 * // token.keys: the labels made; a type the module does not offer is in token.skipped instead
 * await token.cleanup();
 * ```
 */
import { Token, type TokenOptions } from "../../lib/token/mod.ts";
import { type TestModule, testModule, type TestModuleName } from "./modules.ts";
import { type CommandResult, runDeno } from "./command.ts";

const CLI = new URL("../../lib/token_admin/cli.ts", import.meta.url).pathname;
const CA_CLI = new URL("../../lib/ca/cli.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;
/** Exit code of `svcd token keygen` when the module does not offer a requested type. */
const EXIT_NOT_OFFERED = 3;

/** What makeTestToken builds. */
export interface TestToken {
  dir: string;
  /** Module config variable plus CREDENTIALS_DIRECTORY: the environment of a process using it. */
  env: Record<string, string>;
  module: TestModule;
  modulePath: string;
  tokenLabel: string;
  credentialsDir: string;
  /** Labels of the key pairs created (besides svc-audit-sign, which init always creates). */
  keys: string[];
  /** Requested labels whose type the module does not offer (C_GetMechanismInfo), with the reason. */
  skipped: Record<string, string>;
  cleanup(): Promise<void>;
}

/** Options: key pairs to create (label → key type name) and the token label (default "svcd"). */
export interface TestTokenOptions {
  keys?: Record<string, string>;
  tokenLabel?: string;
  /** svcmod only: its secure heap (KiB). */
  secureHeapKb?: number;
  /** This module whatever SVCD_TEST_MODULE says (tests of svcmod's fault hook). */
  module?: TestModuleName;
}

/** Result of one CLI run. */
export type CliResult = CommandResult;

// Variables that select a token or PIN: a child gets only the ones the caller passes.
const TOKEN_VARIABLES = ["SOFTHSM2_CONF", "SVCMOD_CONF", "CREDENTIALS_DIRECTORY"];

/**
 * Runs `svcd token <args>` as a subprocess: this process's environment without its token
 * variables, plus `env`. Example: `await runTokenCli(["list"], token.env)`.
 */
export function runTokenCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return runTool(CLI, args, env);
}

/**
 * Runs `svcd ca <args>` as a subprocess, with the same environment rules as runTokenCli.
 * Example: `await runCaCli(["list", "--ca-dir", dir], token.env)`.
 */
export function runCaCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  return runTool(CA_CLI, args, env);
}

async function runTool(
  script: string,
  args: string[],
  env: Record<string, string>,
): Promise<CliResult> {
  const inherited = Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([k]) => !TOKEN_VARIABLES.includes(k)),
  );
  return await runDeno(["--config", CONFIG, script, ...args], {
    env: { ...inherited, NO_COLOR: "1", ...env },
    clearEnv: true,
  });
}

/** Creates and initialises a token with the requested keys. Always `cleanup()` it. */
export async function makeTestToken(opts: TestTokenOptions = {}): Promise<TestToken> {
  const dir = await Deno.makeTempDir({ prefix: "svcd-token-" });
  const cleanup = () => Deno.remove(dir, { recursive: true }).catch(() => {});
  try {
    const module = await testModule(dir, { secureHeapKb: opts.secureHeapKb, name: opts.module });
    const tokenLabel = opts.tokenLabel ?? "svcd";
    const credentialsDir = `${dir}/credentials`;
    const base = module.env;
    const common = ["--module", module.path, "--token", tokenLabel];
    const init = await runTokenCli(
      ["init", ...common, "--plain-credential-dir", credentialsDir],
      base,
    );
    if (init.code !== 0) {
      throw new Error(`svcd token init failed (${init.code}):\n${init.stdout}${init.stderr}`);
    }
    const env = { ...module.env, CREDENTIALS_DIRECTORY: credentialsDir };
    const wanted = Object.entries(opts.keys ?? {});
    const skipped: Record<string, string> = {};
    if (wanted.length > 0) {
      const pairs = wanted.flatMap(([label, type]) => ["--key-label", label, "--key-type", type]);
      const gen = await runTokenCli(["keygen", ...common, ...pairs], { ...base, ...env });
      if (gen.code !== 0 && gen.code !== EXIT_NOT_OFFERED) {
        throw new Error(`svcd token keygen failed (${gen.code}):\n${gen.stdout}${gen.stderr}`);
      }
      for (const line of gen.stderr.split("\n")) {
        const m = line.match(/not offered: ([\w-]+): (.*)$/);
        if (!m) continue;
        for (const [label, type] of wanted) if (type === m[1]) skipped[label] = m[2];
      }
    }
    const keys = wanted.map(([label]) => label).filter((label) => !(label in skipped));
    for (const [label, reason] of Object.entries(skipped)) {
      console.log(`makeTestToken: ${module.name} does not offer the type of '${label}': ${reason}`);
    }
    return {
      dir,
      env,
      module,
      modulePath: module.path,
      tokenLabel,
      credentialsDir,
      keys,
      skipped,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/**
 * Removes the token-selecting variables an earlier test file set in this process (openTestToken
 * sets them; the module reads them at C_Initialize), for a test that stands for a host where an
 * operator's shell has none: the test files of one `deno test` run share the process environment.
 *
 * @example
 * ```ts
 * forgetTestTokenEnvironment(); // then run the installed svcd as an operator would
 * ```
 */
export function forgetTestTokenEnvironment(): void {
  for (const name of TOKEN_VARIABLES) Deno.env.delete(name);
}

/**
 * Opens a test token in this process: sets its module variable in this process's environment
 * (the module reads it at C_Initialize) and opens it. Close it in a `finally`: the last close
 * finalises the module, so the next test file can point it at another directory.
 * Example: `const t = openTestToken(token); try { … } finally { t.close(); }`.
 */
export function openTestToken(
  token: Pick<TestToken, "module" | "modulePath" | "tokenLabel">,
  opts: Omit<TokenOptions, "modulePath" | "tokenLabel"> = {},
): Token {
  for (const [k, v] of Object.entries(token.module.env)) Deno.env.set(k, v);
  return Token.open({ modulePath: token.modulePath, tokenLabel: token.tokenLabel, ...opts });
}

/**
 * A fresh test token with `keys`, opened in this process and logged in, for the length of `fn`;
 * closed and removed afterwards whatever `fn` did.
 * Example: `await withLoggedInToken({ k: "ed25519" }, async (token) => token.key("k"))`.
 */
export async function withLoggedInToken(
  keys: Record<string, string>,
  fn: (token: Token, made: TestToken) => Promise<void>,
  opts: Omit<TokenOptions, "modulePath" | "tokenLabel"> = {},
): Promise<void> {
  const made = await makeTestToken({ keys });
  const token = openTestToken(made, opts);
  try {
    await token.login(testTokenPin(made));
    await fn(token, made);
  } finally {
    token.close();
    await made.cleanup();
  }
}

/** The user PIN of a test token, as the daemon reads it. */
export function testTokenPin(token: Pick<TestToken, "credentialsDir">): Uint8Array {
  return Token.readPinCredential(token.credentialsDir);
}

/**
 * Deletes the key pair `label` from the token with pkcs11-tool, as another application would,
 * behind the daemon's back. Example: `await deleteKeyWithPkcs11Tool(token, "k1")`.
 */
export async function deleteKeyWithPkcs11Tool(t: TestToken, label: string): Promise<void> {
  for (const type of ["privkey", "pubkey"]) {
    await runPkcs11Tool(t, ["--delete-object", "--type", type, "--label", label]);
  }
}

/**
 * Makes an EC P-256 key pair labelled `label` on the token with pkcs11-tool, as another
 * application would, whatever is on the token already (a second key with a label in use, too).
 * Example: `await makeEcKeyWithPkcs11Tool(token, "k1")`.
 */
export async function makeEcKeyWithPkcs11Tool(t: TestToken, label: string): Promise<void> {
  await runPkcs11Tool(t, ["--keypairgen", "--key-type", "EC:prime256v1", "--label", label]);
}

/** One object as `pkcs11-tool --list-objects` shows it. */
export interface ListedObject {
  label: string;
  /** CKA_ID, hex; "" when it shows none. */
  id: string;
}

/**
 * The objects of one type (`privkey`, `pubkey`, `cert`, …) pkcs11-tool lists when logged in to
 * the test token. Example: `await objectsWithPkcs11Tool(token, "cert")`.
 */
export async function objectsWithPkcs11Tool(t: TestToken, type: string): Promise<ListedObject[]> {
  const listed = await runPkcs11Tool(t, ["--list-objects", "--type", type]);
  return listed.split(/\n(?=\S)/).filter((o) => o.trim() !== "").map((object) => {
    const field = (name: string) =>
      object.split("\n").map((l) => l.trim()).find((l) => l.startsWith(`${name}:`))
        ?.slice(name.length + 1).trim() ?? "";
    return { label: field("label"), id: field("ID") };
  });
}

/**
 * The CKA_ID (hex) of the private key `label`, as pkcs11-tool lists it.
 * Example: `await keyIdWithPkcs11Tool(token, "k1") // "3f0a…"`.
 */
export async function keyIdWithPkcs11Tool(t: TestToken, label: string): Promise<string> {
  const found = (await objectsWithPkcs11Tool(t, "privkey")).find((o) => o.label === label);
  if (!found?.id) throw new Error(`pkcs11-tool lists no private key '${label}' with an ID`);
  return found.id;
}

/**
 * Stores the DER certificate in `derPath` on the token as a CKO_CERTIFICATE object with CKA_ID
 * `idHex` and CKA_LABEL `label`, with pkcs11-tool, as another application would.
 */
export async function writeCertificateWithPkcs11Tool(
  t: TestToken,
  derPath: string,
  idHex: string,
  label: string,
): Promise<void> {
  await runPkcs11Tool(t, [
    ...["--write-object", derPath, "--type", "cert", "--id", idHex, "--label", label],
  ]);
}

/**
 * Runs pkcs11-tool logged in to the test token; returns its stdout, throws with its stderr when it
 * fails.
 */
async function runPkcs11Tool(t: TestToken, args: string[]): Promise<string> {
  const pin = new TextDecoder().decode(testTokenPin(t)); // a test token's PIN, on the command line
  const out = await new Deno.Command("pkcs11-tool", {
    args: [
      ...["--module", t.modulePath, "--token-label", t.tokenLabel, "--login", "--pin", pin],
      ...args,
    ],
    env: t.module.env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (out.code !== 0) {
    throw new Error(`pkcs11-tool ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return new TextDecoder().decode(out.stdout);
}
