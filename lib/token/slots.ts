/**
 * Finding the token: slots by C_GetSlotList, the one initialised token with a given label (never a
 * slot number: ids change after C_InitToken).
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * declare const mod: Pkcs11Module;
 * const slot = findSlotByLabel(mod, "svcd");
 * ```
 */
import {
  check,
  CKF_TOKEN,
  CKR,
  decodeTokenInfo,
  type Pkcs11Module,
  SIZE,
} from "../../ffi/pkcs11/mod.ts";

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
