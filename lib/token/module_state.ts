/**
 * One opening of a PKCS#11 module per process (per isolate): C_Initialize with CKF_OS_LOCKING_OK on
 * the first open, C_Finalize when the last holder closes — but only if this isolate's C_Initialize
 * did the initialising (a Worker that found the module initialised must not finalise it).
 *
 * @example
 * ```ts
 * import { acquireModule, releaseModule } from "./module_state.ts";
 * const mod = acquireModule("/usr/lib/softhsm/libsofthsm2.so");
 * releaseModule(mod);
 * ```
 */
import {
  check,
  CKF_INIT,
  CKR,
  encodeInitializeArgs,
  loadModule,
  Pkcs11Error,
  type Pkcs11Module,
} from "../../ffi/pkcs11/mod.ts";

interface State {
  refs: number;
  ownsInitialize: boolean;
}

const states = new Map<Pkcs11Module, State>();

/** Loads and initialises a module (once); pair every call with releaseModule. */
export function acquireModule(path: string): Pkcs11Module {
  const mod = loadModule(path);
  const state = states.get(mod) ?? { refs: 0, ownsInitialize: false };
  if (state.refs === 0) {
    const rv = mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK));
    if (rv !== CKR.OK && rv !== CKR.CRYPTOKI_ALREADY_INITIALIZED) {
      throw new Pkcs11Error("C_Initialize", rv, initializeHint(path, rv));
    }
    state.ownsInitialize = rv === CKR.OK;
  }
  state.refs++;
  states.set(mod, state);
  return mod;
}

/** Drops one hold; the last finalises the module if this isolate initialised it. */
export function releaseModule(mod: Pkcs11Module): void {
  const state = states.get(mod);
  if (!state || state.refs === 0) return;
  state.refs--;
  if (state.refs === 0 && state.ownsInitialize) {
    check("C_Finalize", mod.fn.C_Finalize(null));
    state.ownsInitialize = false;
  }
}

function initializeHint(path: string, rv: number): string | undefined {
  if (rv === CKR.GENERAL_ERROR && path.includes("softhsm")) {
    return "SoftHSM could not read its configuration: check SOFTHSM2_CONF and that its tokendir exists";
  }
  if (rv === CKR.FUNCTION_FAILED) {
    return "the module refuses to initialise here (a process forked from an initialised parent?)";
  }
  return undefined;
}
