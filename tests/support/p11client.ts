/**
 * The client module's test bed: a token with keys, svcd on it, Debian's nginx in front (TLS and a
 * client certificate, the packaged example configuration), and the environment that points
 * client/pkcs11/build/libsvcd-pkcs11.so at it (SVCD_ADDR, SVCD_CACERT, SVCD_CLIENT_CERT,
 * SVCD_CLIENT_KEY), as `svcd client` takes it.
 *
 * @example
 * ```ts ignore
 * const bed = await startClientBed({ "k-ec": "ec-p256" });
 * await run(["pkcs11-tool", "--module", CLIENT_MODULE, "--list-slots"], bed.env);
 * await bed.stop();
 * ```
 */
import { moduleTempDir } from "./temp_dir.ts";
import { makePki, type Pki } from "./pki.ts";
import { startNginx, type TestNginx } from "./nginx.ts";
import { makeTestToken, type TestToken } from "./token.ts";
import { startDaemon, type TestDaemon } from "./daemon.ts";
import type { TestModuleName } from "./modules.ts";

/** The client module built by `make setup` (client/pkcs11). */
export const CLIENT_MODULE =
  new URL("../../client/pkcs11/build/libsvcd-pkcs11.so", import.meta.url).pathname;
/** The load and fault driver built beside it. */
export const CLIENT_DRIVER = new URL("../../client/pkcs11/build/p11drive", import.meta.url)
  .pathname;

export const ALICE = "CN=alice,O=Example,C=DE";
const WWW_DATA = 33;

/** What a test bed needs from the host: root (nginx's workers run as www-data) and nginx. */
export const canRunClientBed = Deno.uid() === 0 && exists("/usr/sbin/nginx") &&
  exists(CLIENT_MODULE);

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** A running test bed. `env` selects it for the client module; `keys` are the labels made. */
export interface ClientBed {
  dir: string;
  pki: Pki;
  token: TestToken;
  daemon: TestDaemon;
  nginx: TestNginx;
  env: Record<string, string>;
  keys: string[];
  /** Starts the daemon again on the same folders after `daemon.stop()`. */
  restartDaemon(): Promise<void>;
  stop(): Promise<void>;
}

/** Starts a token with `keys` (label → key type), the daemon granting them all to alice, nginx. */
export async function startClientBed(
  keys: Record<string, string>,
  opts: { module?: TestModuleName; daemonArgs?: string[] } = {},
): Promise<ClientBed> {
  const token = await makeTestToken({ keys, module: opts.module });
  const dir = moduleTempDir("svcd-p11client-");
  await Deno.chmod(dir, 0o711);
  const workDir = `${dir}/daemon`;
  await Deno.mkdir(workDir);
  await Deno.chown(workDir, 0, WWW_DATA);
  await Deno.chmod(workDir, 0o2750);
  const policy = token.keys.map((label) => `${ALICE}\t${label}\n`).join("");
  const pki = await makePki(dir, [ALICE]);
  const start = () =>
    startDaemon({ token, workDir, proxyUid: WWW_DATA, policy, args: opts.daemonArgs });
  let daemon = await start();
  const nginx = await startNginx(dir, pki, { authSocket: daemon.socket });
  const alice = pki.clients[0];
  const bed: ClientBed = {
    dir,
    pki,
    token,
    daemon,
    nginx,
    keys: token.keys,
    env: {
      SVCD_ADDR: `https://localhost:${nginx.port}`,
      SVCD_CACERT: pki.caCert,
      SVCD_CLIENT_CERT: alice.cert,
      SVCD_CLIENT_KEY: alice.key,
    },
    restartDaemon: async () => {
      daemon = await start();
      bed.daemon = daemon;
    },
    stop: async () => {
      await nginx.stop();
      await bed.daemon.stop();
      await token.cleanup();
    },
  };
  return bed;
}

/** What a command printed and how it ended. */
export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command with `env` added to this process's environment (minus the token variables). */
export async function run(
  cmd: string[],
  env: Record<string, string>,
  opts: { stdin?: Uint8Array } = {},
): Promise<Ran> {
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    env,
    stdin: opts.stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin) {
    const w = child.stdin.getWriter();
    await w.write(opts.stdin);
    await w.close();
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** Runs a command that must succeed; throws with its output otherwise. */
export async function runOk(
  cmd: string[],
  env: Record<string, string>,
  opts: { stdin?: Uint8Array } = {},
): Promise<Ran> {
  const r = await run(cmd, env, opts);
  if (r.code !== 0) {
    throw new Error(`${cmd.join(" ")} exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  }
  return r;
}

/** The daemon's /token keys as the client sees them (through nginx), by label. */
export async function tokenListing(
  bed: Pick<ClientBed, "env">,
): Promise<{ digests: boolean; keys: Map<string, TokenKey> }> {
  const r = await runOk([
    "curl",
    "-sS",
    "--fail",
    "--cacert",
    bed.env.SVCD_CACERT,
    "--cert",
    bed.env.SVCD_CLIENT_CERT,
    "--key",
    bed.env.SVCD_CLIENT_KEY,
    `${bed.env.SVCD_ADDR}/token`,
  ], {});
  const body = JSON.parse(r.stdout) as { keys: TokenKey[] };
  return {
    digests: body.keys.some((k) => Array.isArray(k.digests)),
    keys: new Map(body.keys.map((k) => [k.label, k])),
  };
}

/** One key of /token. */
export interface TokenKey {
  label: string;
  key_type: string;
  public_key: string | null;
  public_key_raw: string;
  digests?: string[];
}

/** Writes the key's SPKI as a PEM file for openssl, and returns its path. */
export async function writePublicPem(dir: string, key: TokenKey): Promise<string> {
  const b64 = key.public_key!.match(/.{1,64}/g)!.join("\n");
  const path = `${dir}/${key.label}.pub.pem`;
  await Deno.writeTextFile(path, `-----BEGIN PUBLIC KEY-----\n${b64}\n-----END PUBLIC KEY-----\n`);
  return path;
}
