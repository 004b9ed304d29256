/**
 * The PKCS#11 module and its slots: loaded and initialised once per process (per isolate), the
 * token found by its label, and what the token and the module say of themselves.
 *
 * - One opening per isolate: C_Initialize with CKF_OS_LOCKING_OK on the first open, C_Finalize
 *   when the last holder closes — but only if this isolate's C_Initialize did the initialising (a
 *   Worker that found the module initialised must not finalise it).
 * - The token is found by label, never by slot number: slot ids change after C_InitToken.
 * - What they say of themselves (C_GetTokenInfo, C_GetInfo) in the shape the daemon reports:
 *   versions as "major.minor", counts null where the module withholds them.
 *
 * @example
 * ```ts
 * import { acquireModule, findSlotByLabel, releaseModule } from "./module.ts";
 * const mod = acquireModule("/usr/lib/softhsm/libsofthsm2.so");
 * const slot = findSlotByLabel(mod, "svcd");
 * releaseModule(mod);
 * ```
 */
import {
  check,
  CKF_INIT,
  CKF_TOKEN,
  type CkInfo,
  CKR,
  type CkTokenInfo,
  decodeInfo,
  decodeTokenInfo,
  encodeInitializeArgs,
  formatVersion,
  loadModule,
  Pkcs11Error,
  type Pkcs11Module,
  SIZE,
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

/**
 * Slot ids (C_GetSlotList).
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module;
 * listSlots(mod, true); // slots with a token present
 * ```
 */
export function listSlots(mod: Pkcs11Module, tokenPresent: boolean): number[] {
  const count = new BigUint64Array(1);
  check(
    "C_GetSlotList",
    mod.fn.C_GetSlotList(tokenPresent ? 1 : 0, null, new Uint8Array(count.buffer)),
  );
  const slots = new BigUint64Array(Math.max(1, Number(count[0])));
  check(
    "C_GetSlotList",
    mod.fn.C_GetSlotList(
      tokenPresent ? 1 : 0,
      new Uint8Array(slots.buffer),
      new Uint8Array(count.buffer),
    ),
  );
  return Array.from(slots.subarray(0, Number(count[0])), Number);
}

/**
 * The slot of the one initialised token labelled `label`; the error names the labels found and
 * what to do.
 */
export function findSlotByLabel(mod: Pkcs11Module, label: string): number {
  const matches: number[] = [];
  const seen: string[] = [];
  for (const slot of listSlots(mod, true)) {
    const buf = new Uint8Array(SIZE.CK_TOKEN_INFO);
    const rv = mod.fn.C_GetTokenInfo(slot, buf);
    if (rv === CKR.TOKEN_NOT_PRESENT || rv === CKR.TOKEN_NOT_RECOGNIZED) continue;
    check("C_GetTokenInfo", rv);
    const info = decodeTokenInfo(buf);
    if (!(info.flags & CKF_TOKEN.TOKEN_INITIALIZED)) continue;
    seen.push(info.label);
    if (info.label === label) matches.push(slot);
  }
  if (matches.length === 1) return matches[0];
  if (matches.length > 1) {
    throw new Error(
      `${matches.length} tokens are labelled '${label}' in ${mod.path}; labels must be unique`,
    );
  }
  throw new Error(
    `no initialised token labelled '${label}' in ${mod.path} (found: ${
      seen.map((l) => `'${l}'`).join(", ") || "none"
    }); ` +
      `run 'svcd token init --token ${label}' or pass --token with the right label`,
  );
}

/**
 * What the token and module say about themselves. Counts are null where the module withholds them.
 * A type alias (not an interface) so it is assignable to Record<string, unknown>.
 */
export type TokenInfo =
  & Pick<
    CkTokenInfo,
    | "label"
    | "manufacturerId"
    | "model"
    | "serialNumber"
    | "flags"
    | "maxSessionCount"
    | "sessionCount"
  >
  & {
    /** CK_TOKEN_INFO's versions as "major.minor". */
    hardwareVersion: string;
    firmwareVersion: string;
    /** The PKCS#11 version the module reports in C_GetInfo. */
    cryptokiVersion: string;
    /** The version stored in the function table svcd calls through. */
    functionTableVersion: string;
    libraryDescription: string;
    libraryVersion: string;
    slotId: number;
  };

/** C_GetInfo answers once per module: what it says of itself does not change while loaded. */
const moduleInfos = new WeakMap<Pkcs11Module, CkInfo>();

/** C_GetTokenInfo for `slot`, decoded; Pkcs11Error when the module refuses. */
export function readTokenInfo(mod: Pkcs11Module, slot: number): CkTokenInfo {
  const buf = new Uint8Array(SIZE.CK_TOKEN_INFO);
  check("C_GetTokenInfo", mod.fn.C_GetTokenInfo(slot, buf));
  return decodeTokenInfo(buf);
}

/** The TokenInfo of a token whose CK_TOKEN_INFO is `t`, with the module's own facts added. */
export function describeToken(mod: Pkcs11Module, slot: number, t: CkTokenInfo): TokenInfo {
  const m = moduleInfo(mod);
  return {
    label: t.label,
    manufacturerId: t.manufacturerId,
    model: t.model,
    serialNumber: t.serialNumber,
    flags: t.flags,
    maxSessionCount: t.maxSessionCount,
    sessionCount: t.sessionCount,
    hardwareVersion: formatVersion(t.hardwareVersion),
    firmwareVersion: formatVersion(t.firmwareVersion),
    cryptokiVersion: formatVersion(m.cryptokiVersion),
    functionTableVersion: formatVersion(mod.tableVersion),
    libraryDescription: m.libraryDescription,
    libraryVersion: formatVersion(m.libraryVersion),
    slotId: slot,
  };
}

function moduleInfo(mod: Pkcs11Module): CkInfo {
  let info = moduleInfos.get(mod);
  if (!info) {
    const buf = new Uint8Array(SIZE.CK_INFO);
    check("C_GetInfo", mod.fn.C_GetInfo(buf));
    info = decodeInfo(buf);
    moduleInfos.set(mod, info);
  }
  return info;
}
