/**
 * The raw PKCS#11 v3.2 C ABI for Deno: constants, hand-written LP64 layouts, the function table.
 * Safe use (sessions, keys, errors) lives in lib/token.
 *
 * @example
 * ```ts
 * import { CKF_INIT, encodeInitializeArgs, loadModule } from "./mod.ts";
 * const mod = loadModule("/usr/lib/softhsm/libsofthsm2.so");
 * mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK));
 * ```
 */
export * from "./constants.ts";
export * from "./layouts.ts";
export * from "./errors.ts";
export { entryCount, FUNCTION_ORDER, NONBLOCKING, SIGNATURES, tableOffset } from "./functions.ts";
export type { FunctionName, Pkcs11FunctionName } from "./functions.ts";
export { loadModule, type TableEntry, wrapFunctionTable } from "./module.ts";
export type { AsyncFunctions, Pkcs11Module, SyncFunctions } from "./module.ts";
