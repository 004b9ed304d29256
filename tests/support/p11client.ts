/**
 * The client module's test bed: a token with keys, svcd on it, Debian's nginx in front (TLS and a
 * client certificate, the packaged example configuration), and the environment that points
 * pkcs11-module/build/libsvcd-pkcs11.so at it (SVCD_ADDR, SVCD_CACERT, SVCD_CLIENT_CERT,
 * SVCD_CLIENT_KEY), as `svcd client` takes it.
 *
 * @example
 * ```ts
 * import { CLIENT_MODULE, run, startClientBed } from "./p11client.ts";
 * const bed = await startClientBed({ "k-ec": "ec-p256" });
 * await run(["pkcs11-tool", "--module", CLIENT_MODULE, "--list-slots"], bed.env);
 * await bed.stop();
 * ```
 */
import { moduleTempDir } from "./temp_dir.ts";
import { makePki, type Pki } from "./pki.ts";
import { curlTlsArgs, freePort, startNginx, type TestNginx } from "./nginx.ts";
import { makeTestToken, type TestToken } from "./token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./daemon.ts";
import type { TestModuleName } from "./modules.ts";
import { type TokenKey, writeSpkiPem } from "./oracle.ts";
import assert from "node:assert/strict";
import {
  CKA,
  CKO,
  CKR,
  ckrName,
  type Encoded,
  encodeMechanism,
  encodeTemplate,
  type Pkcs11Module,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";

/** The client module built by `make setup` (pkcs11-module). */
export const CLIENT_MODULE =
  new URL("../../pkcs11-module/build/libsvcd-pkcs11.so", import.meta.url).pathname;
/** The load and fault driver built beside it. */
export const CLIENT_DRIVER = new URL("../../pkcs11-module/build/p11drive", import.meta.url)
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

/** How a bed runs its daemon and nginx (benches set these; tests keep the defaults). */
export interface ClientBedOptions {
  module?: TestModuleName;
  daemonArgs?: string[];
  /** Script and leading arguments instead of `main.ts serve` (bench/serve.ts). */
  daemonEntry?: string[];
  /** nginx's `worker_processes` (default 1). */
  nginxWorkers?: string;
}

/** Starts a token with `keys` (label → key type), the daemon granting them all to alice, nginx. */
export async function startClientBed(
  keys: Record<string, string>,
  opts: ClientBedOptions = {},
): Promise<ClientBed> {
  const token = await makeTestToken({ keys, module: opts.module });
  const dir = moduleTempDir("svcd-p11client-");
  await Deno.chmod(dir, 0o711);
  const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
  const policy = token.keys.map((label) => `${ALICE}\t${label}\n`).join("");
  const pki = await makePki(dir, [ALICE]);
  const start = () =>
    startDaemon({
      token,
      workDir,
      proxyUid: WWW_DATA,
      policy,
      args: opts.daemonArgs,
      entry: opts.daemonEntry,
    });
  let daemon = await start();
  const nginx = await startNginx(
    dir,
    pki,
    { authSocket: daemon.socket },
    await bedExample(),
    opts.nginxWorkers,
  );
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

const EXAMPLE = new URL("../../packaging/nginx-svcd.conf", import.meta.url);

/**
 * The packaged nginx example with its metrics server on a free loopback port: the example's fixed
 * port 9464 may be held by another test's nginx on the same machine, and nginx that cannot bind
 * one listener binds none.
 */
async function bedExample(): Promise<string> {
  const text = await Deno.readTextFile(EXAMPLE);
  const metricsListen = "listen 9464;";
  if (!text.includes(metricsListen)) throw new Error(`the nginx example lacks '${metricsListen}'`);
  return text.replace(metricsListen, `listen 127.0.0.1:${freePort()};`);
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
): Promise<{ keys: Map<string, TokenKey> }> {
  const r = await runOk([
    "curl",
    "-sS",
    "--fail",
    ...curlTlsArgs(bed.env.SVCD_CACERT, {
      cert: bed.env.SVCD_CLIENT_CERT,
      key: bed.env.SVCD_CLIENT_KEY,
    }),
    `${bed.env.SVCD_ADDR}/token`,
  ], {});
  const body = JSON.parse(r.stdout) as { keys: TokenKey[] };
  return { keys: new Map(body.keys.map((k) => [k.label, k])) };
}

export type { TokenKey };

/** Writes the key's SPKI as a PEM file for openssl, and returns its path. */
export async function writePublicPem(dir: string, key: TokenKey): Promise<string> {
  const path = `${dir}/${key.label}.pub.pem`;
  await writeSpkiPem(path, key.public_key!);
  return path;
}

/**
 * The public key of `label`, as the bed's GET /token lists it, written as a PEM file in the bed's
 * folder for openssl; returns its path.
 *
 * @example
 * ```ts
 * declare const bed: ClientBed;
 * const pem = await bedPublicPem(bed, "k-ec");
 * ```
 */
export async function bedPublicPem(
  bed: Pick<ClientBed, "dir" | "env">,
  label: string,
): Promise<string> {
  return await writePublicPem(bed.dir, (await tokenListing(bed)).keys.get(label)!);
}

/**
 * A test on a bed of `keys` (see `startClientBed`): skipped where no bed can run here; the bed is
 * stopped after `fn`, whatever happened.
 *
 * @example
 * ```ts
 * clientBedTest("client module: lists a slot", { "k-ec": "ec-p256" }, async (bed) => {
 *   await runOk(["pkcs11-tool", "--module", CLIENT_MODULE, "--list-slots"], bed.env);
 * });
 * ```
 */
export function clientBedTest(
  name: string,
  keys: Record<string, string>,
  fn: (bed: ClientBed, t: Deno.TestContext) => Promise<void>,
  opts: ClientBedOptions = {},
): void {
  Deno.test({
    name,
    ignore: !canRunClientBed,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async (t) => {
      const bed = await startClientBed(keys, opts);
      try {
        await fn(bed, t);
      } finally {
        await bed.stop();
      }
    },
  });
}

const CKF_SERIAL_SESSION = 4;

/** A session of the client module through the FFI binding. */
export class ClientSession {
  readonly handle: bigint;
  constructor(readonly mod: Pkcs11Module) {
    const out = new BigUint64Array(1);
    this.ok(
      mod.fn.C_OpenSession(0, CKF_SERIAL_SESSION, null, null, new Uint8Array(out.buffer)),
      "C_OpenSession",
    );
    this.handle = out[0];
  }

  ok(rv: number, what: string): void {
    assert.equal(rv, CKR.OK, `${what}: ${ckrName(rv)}`);
  }

  privateKey(label: string): bigint {
    const tpl = encodeTemplate([
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      { type: CKA.LABEL, value: new TextEncoder().encode(label) },
    ]);
    const found = new BigUint64Array(2);
    const count = new BigUint64Array(1);
    this.ok(this.mod.fn.C_FindObjectsInit(this.handle, tpl.bytes, 2), "C_FindObjectsInit");
    this.ok(
      this.mod.fn.C_FindObjects(
        this.handle,
        new Uint8Array(found.buffer),
        2,
        new Uint8Array(count.buffer),
      ),
      "C_FindObjects",
    );
    this.ok(this.mod.fn.C_FindObjectsFinal(this.handle), "C_FindObjectsFinal");
    assert.equal(count[0], 1n, `one private key labelled ${label}`);
    return found[0];
  }

  signInit(key: bigint, mechanism: number, param?: Encoded): number {
    const mech = encodeMechanism(mechanism, param);
    return this.mod.fn.C_SignInit(this.handle, mech.bytes, key);
  }

  /** Single-part C_Sign (length query first, as tools do). */
  sign(key: bigint, mechanism: number, message: Uint8Array, param?: Encoded): Uint8Array {
    const { rv, signature } = this.trySign(key, mechanism, message, param);
    this.ok(rv, "C_Sign");
    return signature!;
  }

  /** Single-part C_Sign; the CK_RV of the first call that failed, or the signature. */
  trySign(
    key: bigint,
    mechanism: number,
    message: Uint8Array,
    param?: Encoded,
  ): { rv: number; signature?: Uint8Array } {
    this.ok(this.signInit(key, mechanism, param), "C_SignInit");
    const len = new BigUint64Array(1);
    const lenBytes = new Uint8Array(len.buffer);
    let rv = this.mod.fn.C_Sign(this.handle, message, message.length, null, lenBytes);
    if (rv !== CKR.OK) return { rv };
    const sig = new Uint8Array(Number(len[0]));
    rv = this.mod.fn.C_Sign(this.handle, message, message.length, sig, lenBytes);
    if (rv !== CKR.OK) return { rv };
    return { rv, signature: sig.subarray(0, Number(len[0])) };
  }

  /** Multi-part: C_SignUpdate in `chunk`-byte parts, then C_SignFinal; the CK_RV of the first failure. */
  signParts(
    key: bigint,
    mechanism: number,
    parts: Iterable<Uint8Array>,
  ): { rv: number; signature?: Uint8Array } {
    this.ok(this.signInit(key, mechanism), "C_SignInit");
    for (const part of parts) {
      const rv = this.mod.fn.C_SignUpdate(this.handle, part, part.length);
      if (rv !== CKR.OK) return { rv };
    }
    const len = new BigUint64Array(1);
    const sig = new Uint8Array(8192);
    len[0] = BigInt(sig.length);
    const rv = this.mod.fn.C_SignFinal(this.handle, sig, new Uint8Array(len.buffer));
    return { rv, signature: sig.slice(0, Number(len[0])) };
  }

  close(): void {
    this.mod.fn.C_CloseSession(this.handle);
  }
}
