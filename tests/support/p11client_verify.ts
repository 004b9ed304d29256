/**
 * C_Verify through the client module, for the p11client tests: the public key object of a label,
 * single-part C_Verify, and multi-part C_VerifyUpdate/C_VerifyFinal. ffi/pkcs11 binds neither of
 * the multi-part entries, so they are bound here from the module's own exports (the same loaded
 * library, so the same sessions).
 *
 * @example
 * ```ts
 * import { CKM } from "../../ffi/pkcs11/mod.ts";
 * import type { ClientSession } from "./p11client.ts";
 * import { publicKeyHandle, verifyRv } from "./p11client_verify.ts";
 * declare const session: ClientSession, message: Uint8Array, signature: Uint8Array;
 * const rv = verifyRv(session, publicKeyHandle(session, "k-65"), CKM.ML_DSA, message, signature);
 * ```
 */
import assert from "node:assert/strict";
import {
  CKA,
  CKO,
  CKR,
  encodeMechanism,
  encodeTemplate,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import type { ClientSession } from "./p11client.ts";

/** The public key object labelled `label` (exactly one). */
export function publicKeyHandle(session: ClientSession, label: string): bigint {
  const tpl = encodeTemplate([
    { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
    { type: CKA.LABEL, value: new TextEncoder().encode(label) },
  ]);
  const found = new BigUint64Array(2);
  const count = new BigUint64Array(1);
  const fn = session.mod.fn;
  session.ok(fn.C_FindObjectsInit(session.handle, tpl.bytes, 2), "C_FindObjectsInit");
  session.ok(
    fn.C_FindObjects(session.handle, new Uint8Array(found.buffer), 2, new Uint8Array(count.buffer)),
    "C_FindObjects",
  );
  session.ok(fn.C_FindObjectsFinal(session.handle), "C_FindObjectsFinal");
  assert.equal(count[0], 1n, `one public key labelled ${label}`);
  return found[0];
}

/** Single-part C_Verify: its CK_RV. */
export function verifyRv(
  session: ClientSession,
  key: bigint,
  mechanism: number,
  message: Uint8Array,
  signature: Uint8Array,
): number {
  const mech = encodeMechanism(mechanism);
  session.ok(session.mod.fn.C_VerifyInit(session.handle, mech.bytes, key), "C_VerifyInit");
  return session.mod.fn.C_Verify(
    session.handle,
    message,
    message.length,
    signature,
    signature.length,
  );
}

const MULTI_PART = {
  C_VerifyUpdate: { parameters: ["u64", "buffer", "u64"], result: "u64" },
  C_VerifyFinal: { parameters: ["u64", "buffer", "u64"], result: "u64" },
} as const;
const multiPart = new Map<string, Deno.DynamicLibrary<typeof MULTI_PART>["symbols"]>();

/** C_VerifyUpdate per part, then C_VerifyFinal: the CK_RV of the first call that failed. */
export function verifyPartsRv(
  session: ClientSession,
  key: bigint,
  mechanism: number,
  parts: Iterable<Uint8Array>,
  signature: Uint8Array,
): number {
  const path = session.mod.path;
  const fn = multiPart.get(path) ?? Deno.dlopen(path, MULTI_PART).symbols;
  multiPart.set(path, fn);
  const mech = encodeMechanism(mechanism);
  session.ok(session.mod.fn.C_VerifyInit(session.handle, mech.bytes, key), "C_VerifyInit");
  for (const part of parts) {
    const rv = Number(fn.C_VerifyUpdate(session.handle, part, BigInt(part.length)));
    if (rv !== CKR.OK) return rv;
  }
  return Number(fn.C_VerifyFinal(session.handle, signature, BigInt(signature.length)));
}
