/**
 * Loads a PKCS#11 module and its function table, and calls the table's entries through function
 * pointers. `C_GetInterface("PKCS 11")` is used when the module exports it (the version stored in
 * the returned table decides how many entries exist), else `C_GetFunctionList`.
 *
 * @example
 * ```ts
 * import { loadModule } from "./module.ts";
 * const mod = loadModule("/usr/lib/softhsm/libsofthsm2.so");
 * const rv = mod.fn.C_Finalize(null); // CKR_CRYPTOKI_NOT_INITIALIZED before C_Initialize
 * ```
 */
import { libcrypto, OPENSSL_INIT } from "../libcrypto.ts";
import { CKR } from "./constants.ts";
import { type CkVersion, readInterface, readVersion } from "./layouts.ts";
import {
  entryCount,
  FUNCTION_ORDER,
  type FunctionName,
  NONBLOCKING,
  SIGNATURES,
  tableOffset,
} from "./functions.ts";

type Sig<K extends FunctionName> = (typeof SIGNATURES)[K];
type NonblockingName = (typeof NONBLOCKING)[number];

// Deno types CK_ULONG ("u64") arguments as bigint; at run time it takes numbers as well, and
// handles and lengths are small, so the binding accepts either.
type Widen<T> = T extends bigint ? number | bigint : T;
type WidenArgs<F> = F extends (...args: infer A) => infer R
  ? (...args: { [I in keyof A]: Widen<A[I]> }) => R
  : never;

/** Synchronous entries: each returns the CK_RV. */
export type SyncFunctions = {
  [K in FunctionName]: WidenArgs<Deno.UnsafeFnPointer<Sig<K>>["call"]>;
};

/** Nonblocking variants (`C_SignAsync`, …): run on a thread, resolve to the CK_RV. */
export type AsyncFunctions = {
  [K in NonblockingName as `${K}Async`]: WidenArgs<
    Deno.UnsafeFnPointer<Sig<K> & { nonblocking: true }>["call"]
  >;
};

/** A loaded module: its function table and the table's version. */
export interface Pkcs11Module {
  readonly path: string;
  /** How the table was obtained. */
  readonly via: "C_GetInterface" | "C_GetFunctionList";
  /** The version stored at the start of the function table. */
  readonly tableVersion: CkVersion;
  /** Entries in the table, from its version (68, 92 or 104). */
  readonly tableEntries: number;
  /** Callable entries; an entry the module leaves NULL answers CKR_FUNCTION_NOT_SUPPORTED. */
  readonly fn: SyncFunctions & AsyncFunctions;
  /** True when the table has a non-NULL pointer for this function. */
  provides(name: string): boolean;
  /**
   * The function's address in the table (null when the module leaves it NULL), for a thread of
   * the process that binds the entry itself; it stays valid while the module is loaded.
   */
  entry(name: string): Deno.PointerObject | null;
}

const loaded = new Map<string, Pkcs11Module>();

/** Loads the module at `path` once per isolate. Example: `loadModule(path).fn.C_GetInfo(buf)`. */
export function loadModule(path: string): Pkcs11Module {
  const cached = loaded.get(path);
  if (cached) return cached;
  keepOpenSslStateUntilExit();
  const mod = openModule(path);
  loaded.set(path, mod);
  return mod;
}

/** One callable entry of the function table, as {@link wrapFunctionTable} sees it. */
export type TableEntry = (...args: never[]) => unknown;

/**
 * Test seam: replaces every entry of `mod.fn` with `wrap(name, entry)`, so every later call through
 * the table (by any holder of `mod`, which loadModule shares per isolate) goes through the wrapper.
 * Nonblocking variants are wrapped under their own names (`C_SignAsync`). The daemon never calls
 * it; the tests count PKCS#11 calls with it (tests/support/pkcs11_calls.ts).
 *
 * @example
 * ```ts
 * import { loadModule, wrapFunctionTable } from "./module.ts";
 * const seen: string[] = [];
 * wrapFunctionTable(loadModule("/usr/lib/softhsm/libsofthsm2.so"), (name, entry) => (...args) => {
 *   seen.push(name);
 *   return entry(...args);
 * });
 * ```
 */
export function wrapFunctionTable(
  mod: Pkcs11Module,
  wrap: (name: string, entry: TableEntry) => TableEntry,
): void {
  const fn = mod.fn as unknown as Record<string, TableEntry>;
  for (const name of Object.keys(fn)) fn[name] = wrap(name, fn[name]);
}

/**
 * Modules built on OpenSSL 3 (SoftHSM2, svcmod) would otherwise have it register an atexit cleanup
 * that frees every thread's OpenSSL state. At exit the runtime's worker threads end at the same
 * time and free their own: a double free, and a process that made nonblocking calls may abort
 * instead of exiting 0. The first initialisation in a process decides, so it
 * is made here, before any module can load libcrypto; where libcrypto.so.3 is absent this does
 * nothing. It covers modules linked to the system's libcrypto.so.3, not one that brings its own
 * OpenSSL or uses 1.1. The operating system reclaims the memory either way.
 */
function keepOpenSslStateUntilExit(): void {
  libcrypto()?.OPENSSL_init_crypto(BigInt(OPENSSL_INIT.NO_ATEXIT), null);
}

function dlopenModule(path: string) {
  try {
    return Deno.dlopen(
      path,
      {
        C_GetFunctionList: { parameters: ["buffer"], result: "u32", optional: true },
        C_GetInterface: {
          parameters: ["buffer", "pointer", "buffer", "u64"],
          result: "u32",
          optional: true,
        },
      } as const,
    );
  } catch (err) {
    throw new Error(
      `cannot load the PKCS#11 module ${path}: ${(err as Error).message}; ` +
        `check --module (Debian's SoftHSM2 is /usr/lib/softhsm/libsofthsm2.so)`,
    );
  }
}

function openModule(path: string): Pkcs11Module {
  const lib = dlopenModule(path);
  const found = tableFromInterface(lib.symbols.C_GetInterface as GetInterface) ??
    tableFromFunctionList(path, lib.symbols.C_GetFunctionList);
  return bindTable(path, found.table, found.via);
}

/**
 * Binds a function table in memory. Only the entries its own version says exist are read: a module
 * may report 3.2 in C_GetInfo yet hand out a shorter 3.0 table, and reading past it is undefined.
 * Exported for tests, which build tables by hand. Example: `bindTable(path, ptr, "C_GetFunctionList")`.
 */
export function bindTable(
  path: string,
  table: Deno.PointerObject,
  via: Pkcs11Module["via"],
): Pkcs11Module {
  const view = new Deno.UnsafePointerView(table);
  const tableVersion = readVersion(new Uint8Array(view.getArrayBuffer(2)), 0);
  const tableEntries = entryCount(tableVersion);
  const pointers = new Map<string, Deno.PointerObject>();
  for (const name of FUNCTION_ORDER.slice(0, tableEntries)) {
    const ptr = view.getPointer(tableOffset(name));
    if (ptr) pointers.set(name, ptr);
  }
  const fn = {} as Record<string, unknown>;
  for (const [name, def] of Object.entries(SIGNATURES)) {
    fn[name] = bindEntry(pointers.get(name), def);
    if ((NONBLOCKING as readonly string[]).includes(name)) {
      fn[`${name}Async`] = bindEntry(pointers.get(name), { ...def, nonblocking: true });
    }
  }
  return {
    path,
    via,
    tableVersion,
    tableEntries,
    fn: fn as SyncFunctions & AsyncFunctions,
    provides: (name) => pointers.has(name),
    entry: (name) => pointers.get(name) ?? null,
  };
}

function bindEntry(ptr: Deno.PointerObject | undefined, def: Deno.ForeignFunction): unknown {
  if (!ptr) {
    const missing = () => CKR.FUNCTION_NOT_SUPPORTED;
    return def.nonblocking ? () => Promise.resolve(missing()) : missing;
  }
  const fp = new Deno.UnsafeFnPointer(ptr as Deno.PointerObject<typeof def>, def);
  // deno-lint-ignore no-explicit-any
  return (...args: Deno.NativeType[]) => (fp.call as (...a: any[]) => unknown)(...args);
}

interface FoundTable {
  table: Deno.PointerObject;
  via: Pkcs11Module["via"];
}

type GetInterface =
  | ((name: Uint8Array, version: null, out: Uint8Array, flags: number) => number)
  | null;

function tableFromInterface(getInterface: GetInterface): FoundTable | null {
  if (!getInterface) return null;
  const out = new BigUint64Array(1);
  const name = new TextEncoder().encode("PKCS 11\0");
  const rv = getInterface(name, null, new Uint8Array(out.buffer), 0);
  if (rv !== CKR.OK || out[0] === 0n) return null;
  const iface = readInterface(Deno.UnsafePointer.create(out[0])!);
  if (!iface.functionList) return null;
  return { table: iface.functionList, via: "C_GetInterface" };
}

function tableFromFunctionList(
  path: string,
  getFunctionList: ((out: Uint8Array) => number) | null,
): FoundTable {
  if (!getFunctionList) {
    throw new Error(
      `${path} exports neither C_GetInterface nor C_GetFunctionList: not a PKCS#11 module`,
    );
  }
  const out = new BigUint64Array(1);
  const rv = getFunctionList(new Uint8Array(out.buffer));
  if (rv !== CKR.OK || out[0] === 0n) {
    throw new Error(`${path}: C_GetFunctionList failed (rv 0x${rv.toString(16)})`);
  }
  return { table: Deno.UnsafePointer.create(out[0])!, via: "C_GetFunctionList" };
}
