/**
 * A private svcmod token for tests of the module itself: its own token directory and config
 * (SVCMOD_CONF), the module initialised in this process through the project's binding, the token
 * initialised, the user PIN set and the user logged in on one read-write session.
 *
 * @example
 * ```ts
 * const t = await openSvcmod();
 * // t.mod.fn.C_SignInit(t.session, ...)
 * await t.close();
 * ```
 */
import {
  check,
  CKF_INIT, CKF_SESSION,
  CKR,
  CKU,
  encodeInitializeArgs,
  loadModule,
  padText,
  type Pkcs11Module,
} from "../../ffi/pkcs11/mod.ts";

/** The module under test (built by `make -C tests/module`). */
export const SVCMOD_LIB = new URL("./build/libsvcmod.so", import.meta.url).pathname;
/** Test programs built beside it. */
export const SVCMOD_BUILD = new URL("./build/", import.meta.url).pathname;

/** An open, logged-in svcmod token. */
export interface SvcmodToken {
  mod: Pkcs11Module;
  dir: string;
  conf: string;
  /** A read-write session, logged in as the user. */
  session: number;
  /** The user PIN (bytes, never a string). */
  userPin: Uint8Array;
  soPin: Uint8Array;
  /** C_Finalize and remove the directory. */
  close(): Promise<void>;
}

/** Options of the module's config file. */
export interface SvcmodOptions {
  secureHeapKb?: number;
  maxSessions?: number;
}

/** Writes a config for a fresh token directory under `dir`; returns the config path. */
export async function writeSvcmodConfig(dir: string, opts: SvcmodOptions = {}): Promise<string> {
  const tokens = `${dir}/tokens`;
  await Deno.mkdir(tokens, { recursive: true });
  const lines = [`tokendir = ${tokens}`];
  if (opts.secureHeapKb) lines.push(`secure_heap_kb = ${opts.secureHeapKb}`);
  if (opts.maxSessions) lines.push(`max_sessions = ${opts.maxSessions}`);
  const conf = `${dir}/svcmod.conf`;
  await Deno.writeTextFile(conf, lines.join("\n") + "\n");
  return conf;
}

/** Loads svcmod, failing with the command that builds it when it is missing. */
export function loadSvcmod(): Pkcs11Module {
  try {
    Deno.statSync(SVCMOD_LIB);
  } catch {
    throw new Error(`${SVCMOD_LIB} is missing: build it with 'make -C tests/module'`);
  }
  return loadModule(SVCMOD_LIB);
}

/** C_Initialize with OS locking; a leftover initialisation in this process is finalised first. */
export function initialize(mod: Pkcs11Module): void {
  let rv = mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK));
  if (rv === CKR.CRYPTOKI_ALREADY_INITIALIZED) {
    check("C_Finalize", mod.fn.C_Finalize(null));
    rv = mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK));
  }
  check("C_Initialize", rv);
}

/** Opens a session (read-write unless `readOnly`). */
export function openSession(mod: Pkcs11Module, readOnly = false): number {
  const out = new BigUint64Array(1);
  const flags = CKF_SESSION.SERIAL_SESSION | (readOnly ? 0 : CKF_SESSION.RW_SESSION);
  check("C_OpenSession", mod.fn.C_OpenSession(0, flags, null, null, new Uint8Array(out.buffer)));
  return Number(out[0]);
}

/** Initialises the token of slot 0 and its user PIN; no session stays open. */
export function initToken(mod: Pkcs11Module, soPin: Uint8Array, userPin: Uint8Array): void {
  check("C_InitToken", mod.fn.C_InitToken(0, soPin, soPin.length, padText("svcmod-test", 32)));
  const s = openSession(mod);
  check("C_Login", mod.fn.C_Login(s, CKU.SO, soPin, soPin.length));
  check("C_InitPIN", mod.fn.C_InitPIN(s, userPin, userPin.length));
  check("C_Logout", mod.fn.C_Logout(s));
  check("C_CloseSession", mod.fn.C_CloseSession(s));
}

/** A fresh token with the user logged in. Example: `const t = await openSvcmod()`. */
export async function openSvcmod(opts: SvcmodOptions = {}): Promise<SvcmodToken> {
  const dir = await Deno.makeTempDir({ prefix: "svcmod-" });
  const conf = await writeSvcmodConfig(dir, opts);
  Deno.env.set("SVCMOD_CONF", conf);
  const mod = loadSvcmod();
  initialize(mod);
  const soPin = crypto.getRandomValues(new Uint8Array(16));
  const userPin = new TextEncoder().encode(crypto.randomUUID());
  initToken(mod, soPin, userPin);
  const session = openSession(mod);
  check("C_Login", mod.fn.C_Login(session, CKU.USER, userPin, userPin.length));
  return {
    mod,
    dir,
    conf,
    session,
    userPin,
    soPin,
    async close() {
      mod.fn.C_Finalize(null);
      userPin.fill(0);
      soPin.fill(0);
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/**
 * C_VerifySignatureInit and C_VerifySignature (3.2 entries at table offsets 760 and 768), which
 * the binding does not expose, read straight from the table C_GetInterface returns.
 */
export function verifySignatureEntries(): {
  init: (s: number, mech: Uint8Array, key: number, sig: Uint8Array, len: number) => number;
  verify: (s: number, data: Uint8Array, len: number) => number;
} {
  const lib = Deno.dlopen(SVCMOD_LIB, {
    C_GetInterface: { parameters: ["buffer", "pointer", "buffer", "u64"], result: "u32" },
  } as const);
  const out = new BigUint64Array(1);
  const name = new TextEncoder().encode("PKCS 11\0");
  check("C_GetInterface", lib.symbols.C_GetInterface(name, null, new Uint8Array(out.buffer), 0n));
  const iface = new Deno.UnsafePointerView(Deno.UnsafePointer.create(out[0])!);
  const table = new Deno.UnsafePointerView(iface.getPointer(8)!);
  const init = new Deno.UnsafeFnPointer(table.getPointer(760)!, {
    parameters: ["u64", "buffer", "u64", "buffer", "u64"],
    result: "u32",
  } as const);
  const verify = new Deno.UnsafeFnPointer(table.getPointer(768)!, {
    parameters: ["u64", "buffer", "u64"],
    result: "u32",
  } as const);
  return {
    init: (s, mech, key, sig, len) => init.call(BigInt(s), mech, BigInt(key), sig, BigInt(len)),
    verify: (s, data, len) => verify.call(BigInt(s), data, BigInt(len)),
  };
}
