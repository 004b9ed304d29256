/**
 * The PKCS#11 function table: entry order (v2.40 → 3.0 → 3.2) and the C signatures of the entries
 * the service calls. Every table starts with a CK_VERSION padded to 8 bytes; entry N (1-based) is
 * the function pointer at byte 8 + 8·(N−1).
 *
 * CK_RV is a CK_ULONG, but results are declared "u32": on the LP64 ABIs we support the value is in
 * the low half of the return register, every defined CKR_ code fits in 32 bits, and a u32 result
 * avoids a BigInt allocation on every call.
 *
 * @example
 * ```ts
 * import { tableOffset } from "./functions.ts";
 * tableOffset("C_Sign"); // 352
 * ```
 */

/** Entries of the v2.40 table (68), in order. */
const V2_40 = [
  "C_Initialize",
  "C_Finalize",
  "C_GetInfo",
  "C_GetFunctionList",
  "C_GetSlotList",
  "C_GetSlotInfo",
  "C_GetTokenInfo",
  "C_GetMechanismList",
  "C_GetMechanismInfo",
  "C_InitToken",
  "C_InitPIN",
  "C_SetPIN",
  "C_OpenSession",
  "C_CloseSession",
  "C_CloseAllSessions",
  "C_GetSessionInfo",
  "C_GetOperationState",
  "C_SetOperationState",
  "C_Login",
  "C_Logout",
  "C_CreateObject",
  "C_CopyObject",
  "C_DestroyObject",
  "C_GetObjectSize",
  "C_GetAttributeValue",
  "C_SetAttributeValue",
  "C_FindObjectsInit",
  "C_FindObjects",
  "C_FindObjectsFinal",
  "C_EncryptInit",
  "C_Encrypt",
  "C_EncryptUpdate",
  "C_EncryptFinal",
  "C_DecryptInit",
  "C_Decrypt",
  "C_DecryptUpdate",
  "C_DecryptFinal",
  "C_DigestInit",
  "C_Digest",
  "C_DigestUpdate",
  "C_DigestKey",
  "C_DigestFinal",
  "C_SignInit",
  "C_Sign",
  "C_SignUpdate",
  "C_SignFinal",
  "C_SignRecoverInit",
  "C_SignRecover",
  "C_VerifyInit",
  "C_Verify",
  "C_VerifyUpdate",
  "C_VerifyFinal",
  "C_VerifyRecoverInit",
  "C_VerifyRecover",
  "C_DigestEncryptUpdate",
  "C_DecryptDigestUpdate",
  "C_SignEncryptUpdate",
  "C_DecryptVerifyUpdate",
  "C_GenerateKey",
  "C_GenerateKeyPair",
  "C_WrapKey",
  "C_UnwrapKey",
  "C_DeriveKey",
  "C_SeedRandom",
  "C_GenerateRandom",
  "C_GetFunctionStatus",
  "C_CancelFunction",
  "C_WaitForSlotEvent",
] as const;

/** Entries added by v3.0 (69–92). */
const V3_0 = [
  "C_GetInterfaceList",
  "C_GetInterface",
  "C_LoginUser",
  "C_SessionCancel",
  "C_MessageEncryptInit",
  "C_EncryptMessage",
  "C_EncryptMessageBegin",
  "C_EncryptMessageNext",
  "C_MessageEncryptFinal",
  "C_MessageDecryptInit",
  "C_DecryptMessage",
  "C_DecryptMessageBegin",
  "C_DecryptMessageNext",
  "C_MessageDecryptFinal",
  "C_MessageSignInit",
  "C_SignMessage",
  "C_SignMessageBegin",
  "C_SignMessageNext",
  "C_MessageSignFinal",
  "C_MessageVerifyInit",
  "C_VerifyMessage",
  "C_VerifyMessageBegin",
  "C_VerifyMessageNext",
  "C_MessageVerifyFinal",
] as const;

/** Entries added by v3.2 (93–104). */
const V3_2 = [
  "C_EncapsulateKey",
  "C_DecapsulateKey",
  "C_VerifySignatureInit",
  "C_VerifySignature",
  "C_VerifySignatureUpdate",
  "C_VerifySignatureFinal",
  "C_GetSessionValidationFlags",
  "C_AsyncComplete",
  "C_AsyncGetID",
  "C_AsyncJoin",
  "C_WrapKeyAuthenticated",
  "C_UnwrapKeyAuthenticated",
] as const;

/**
 * The name of any entry of the 3.2 function table, e.g. "C_Sign".
 *
 * @example
 * ```ts
 * const fn: Pkcs11FunctionName = "C_GetTokenInfo";
 * ```
 */
export type Pkcs11FunctionName =
  | (typeof V2_40)[number]
  | (typeof V3_0)[number]
  | (typeof V3_2)[number];

/** All entries of the 3.2 table, in order. Example: `FUNCTION_ORDER.length === 104`. */
export const FUNCTION_ORDER: readonly Pkcs11FunctionName[] = [...V2_40, ...V3_0, ...V3_2];

/** Number of entries in a table of this version. Example: `entryCount({major:3,minor:0})` → 92. */
export function entryCount(version: { major: number; minor: number }): number {
  if (version.major < 3) return V2_40.length;
  if (version.major === 3 && version.minor < 2) return V2_40.length + V3_0.length;
  return FUNCTION_ORDER.length;
}

/** Byte offset of a function's pointer in the table. Example: `tableOffset("C_Login") === 152`. */
export function tableOffset(name: string): number {
  const index = FUNCTION_ORDER.findIndex((entry) => entry === name);
  if (index < 0) throw new Error(`${name} is not a PKCS#11 function`);
  return 8 + 8 * index;
}

const RV = "u32" as const;

/** C signatures of the entries the service calls (argument names in comments). */
export const SIGNATURES = {
  C_Initialize: { parameters: ["buffer"], result: RV }, // pInitArgs
  C_Finalize: { parameters: ["pointer"], result: RV }, // pReserved
  C_GetInfo: { parameters: ["buffer"], result: RV }, // pInfo
  C_GetSlotList: { parameters: ["u8", "buffer", "buffer"], result: RV }, // tokenPresent, pSlotList, pulCount
  C_GetSlotInfo: { parameters: ["u64", "buffer"], result: RV },
  C_GetTokenInfo: { parameters: ["u64", "buffer"], result: RV },
  C_GetMechanismList: { parameters: ["u64", "buffer", "buffer"], result: RV },
  C_GetMechanismInfo: { parameters: ["u64", "u64", "buffer"], result: RV }, // slot, type, pInfo
  C_InitToken: { parameters: ["u64", "buffer", "u64", "buffer"], result: RV }, // slot, pPin, len, pLabel[32]
  C_InitPIN: { parameters: ["u64", "buffer", "u64"], result: RV }, // hSession, pPin, len
  // hSession, pOldPin, oldLen, pNewPin, newLen
  C_SetPIN: { parameters: ["u64", "buffer", "u64", "buffer", "u64"], result: RV },
  C_OpenSession: { parameters: ["u64", "u64", "pointer", "pointer", "buffer"], result: RV },
  C_CloseSession: { parameters: ["u64"], result: RV },
  C_CloseAllSessions: { parameters: ["u64"], result: RV },
  C_GetSessionInfo: { parameters: ["u64", "buffer"], result: RV },
  C_Login: { parameters: ["u64", "u64", "buffer", "u64"], result: RV }, // hSession, userType, pPin, len
  C_Logout: { parameters: ["u64"], result: RV },
  C_CreateObject: { parameters: ["u64", "buffer", "u64", "buffer"], result: RV },
  C_CopyObject: { parameters: ["u64", "u64", "buffer", "u64", "buffer"], result: RV }, // hSession, hObject, pTemplate, count, phNewObject
  C_DestroyObject: { parameters: ["u64", "u64"], result: RV },
  C_GetAttributeValue: { parameters: ["u64", "u64", "buffer", "u64"], result: RV },
  C_FindObjectsInit: { parameters: ["u64", "buffer", "u64"], result: RV },
  C_FindObjects: { parameters: ["u64", "buffer", "u64", "buffer"], result: RV },
  C_FindObjectsFinal: { parameters: ["u64"], result: RV },
  C_SignInit: { parameters: ["u64", "buffer", "u64"], result: RV }, // hSession, pMechanism, hKey
  C_Sign: { parameters: ["u64", "buffer", "u64", "buffer", "buffer"], result: RV }, // data, len, sig, pulSigLen
  C_SignUpdate: { parameters: ["u64", "buffer", "u64"], result: RV }, // hSession, pPart, ulPartLen
  C_SignFinal: { parameters: ["u64", "buffer", "buffer"], result: RV }, // hSession, pSignature, pulSigLen
  C_VerifyInit: { parameters: ["u64", "buffer", "u64"], result: RV },
  C_Verify: { parameters: ["u64", "buffer", "u64", "buffer", "u64"], result: RV }, // data, len, sig, sigLen
  C_GenerateKey: { parameters: ["u64", "buffer", "buffer", "u64", "buffer"], result: RV },
  C_GenerateKeyPair: {
    // hSession, pMechanism, pPublicTemplate, count, pPrivateTemplate, count, phPublic, phPrivate
    parameters: ["u64", "buffer", "buffer", "u64", "buffer", "u64", "buffer", "buffer"],
    result: RV,
  },
  C_GenerateRandom: { parameters: ["u64", "buffer", "u64"], result: RV },
} as const satisfies Record<string, Deno.UnsafeCallbackDefinition | Deno.ForeignFunction>;

/** Names of the entries the binding exposes. */
export type FunctionName = keyof typeof SIGNATURES;

/** Work calls that also get a `nonblocking` variant (run on a thread off the event loop). */
export const NONBLOCKING = ["C_Sign", "C_Verify", "C_GenerateKeyPair", "C_Login"] as const;
