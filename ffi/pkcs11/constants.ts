/**
 * PKCS#11 v3.2 constants (values from the OASIS published headers, LP64). Plain numbers: every
 * CK_ULONG value the service uses fits in a JS number.
 *
 * @example
 * ```ts
 * import { CKR, ckrName } from "./constants.ts";
 * ckrName(CKR.SIGNATURE_INVALID); // "CKR_SIGNATURE_INVALID"
 * ```
 */

/** Return values (CKR_*), without the prefix. Example: `CKR.PIN_INCORRECT === 0xa0`. */
export const CKR = {
  OK: 0x0,
  CANCEL: 0x1,
  HOST_MEMORY: 0x2,
  SLOT_ID_INVALID: 0x3,
  GENERAL_ERROR: 0x5,
  FUNCTION_FAILED: 0x6,
  ARGUMENTS_BAD: 0x7,
  NO_EVENT: 0x8,
  NEED_TO_CREATE_THREADS: 0x9,
  CANT_LOCK: 0xa,
  ATTRIBUTE_READ_ONLY: 0x10,
  ATTRIBUTE_SENSITIVE: 0x11,
  ATTRIBUTE_TYPE_INVALID: 0x12,
  ATTRIBUTE_VALUE_INVALID: 0x13,
  ACTION_PROHIBITED: 0x1b,
  DATA_INVALID: 0x20,
  DATA_LEN_RANGE: 0x21,
  DEVICE_ERROR: 0x30,
  DEVICE_MEMORY: 0x31,
  DEVICE_REMOVED: 0x32,
  ENCRYPTED_DATA_INVALID: 0x40,
  ENCRYPTED_DATA_LEN_RANGE: 0x41,
  AEAD_DECRYPT_FAILED: 0x42,
  FUNCTION_CANCELED: 0x50,
  FUNCTION_NOT_PARALLEL: 0x51,
  FUNCTION_NOT_SUPPORTED: 0x54,
  KEY_HANDLE_INVALID: 0x60,
  KEY_SIZE_RANGE: 0x62,
  KEY_TYPE_INCONSISTENT: 0x63,
  KEY_NOT_NEEDED: 0x64,
  KEY_CHANGED: 0x65,
  KEY_NEEDED: 0x66,
  KEY_INDIGESTIBLE: 0x67,
  KEY_FUNCTION_NOT_PERMITTED: 0x68,
  KEY_NOT_WRAPPABLE: 0x69,
  KEY_UNEXTRACTABLE: 0x6a,
  MECHANISM_INVALID: 0x70,
  MECHANISM_PARAM_INVALID: 0x71,
  OBJECT_HANDLE_INVALID: 0x82,
  OPERATION_ACTIVE: 0x90,
  OPERATION_NOT_INITIALIZED: 0x91,
  PIN_INCORRECT: 0xa0,
  PIN_INVALID: 0xa1,
  PIN_LEN_RANGE: 0xa2,
  PIN_EXPIRED: 0xa3,
  PIN_LOCKED: 0xa4,
  SESSION_CLOSED: 0xb0,
  SESSION_COUNT: 0xb1,
  SESSION_HANDLE_INVALID: 0xb3,
  SESSION_PARALLEL_NOT_SUPPORTED: 0xb4,
  SESSION_READ_ONLY: 0xb5,
  SESSION_EXISTS: 0xb6,
  SESSION_READ_ONLY_EXISTS: 0xb7,
  SESSION_READ_WRITE_SO_EXISTS: 0xb8,
  SIGNATURE_INVALID: 0xc0,
  SIGNATURE_LEN_RANGE: 0xc1,
  TEMPLATE_INCOMPLETE: 0xd0,
  TEMPLATE_INCONSISTENT: 0xd1,
  TOKEN_NOT_PRESENT: 0xe0,
  TOKEN_NOT_RECOGNIZED: 0xe1,
  TOKEN_WRITE_PROTECTED: 0xe2,
  UNWRAPPING_KEY_HANDLE_INVALID: 0xf0,
  UNWRAPPING_KEY_SIZE_RANGE: 0xf1,
  UNWRAPPING_KEY_TYPE_INCONSISTENT: 0xf2,
  USER_ALREADY_LOGGED_IN: 0x100,
  USER_NOT_LOGGED_IN: 0x101,
  USER_PIN_NOT_INITIALIZED: 0x102,
  USER_TYPE_INVALID: 0x103,
  USER_ANOTHER_ALREADY_LOGGED_IN: 0x104,
  USER_TOO_MANY_TYPES: 0x105,
  WRAPPED_KEY_INVALID: 0x110,
  WRAPPED_KEY_LEN_RANGE: 0x112,
  WRAPPING_KEY_HANDLE_INVALID: 0x113,
  WRAPPING_KEY_SIZE_RANGE: 0x114,
  WRAPPING_KEY_TYPE_INCONSISTENT: 0x115,
  RANDOM_SEED_NOT_SUPPORTED: 0x120,
  RANDOM_NO_RNG: 0x121,
  DOMAIN_PARAMS_INVALID: 0x130,
  CURVE_NOT_SUPPORTED: 0x140,
  BUFFER_TOO_SMALL: 0x150,
  SAVED_STATE_INVALID: 0x160,
  INFORMATION_SENSITIVE: 0x170,
  STATE_UNSAVEABLE: 0x180,
  CRYPTOKI_NOT_INITIALIZED: 0x190,
  CRYPTOKI_ALREADY_INITIALIZED: 0x191,
  MUTEX_BAD: 0x1a0,
  MUTEX_NOT_LOCKED: 0x1a1,
  NEW_PIN_MODE: 0x1b0,
  NEXT_OTP: 0x1b1,
  EXCEEDED_MAX_ITERATIONS: 0x1b5,
  FIPS_SELF_TEST_FAILED: 0x1b6,
  LIBRARY_LOAD_FAILED: 0x1b7,
  PIN_TOO_WEAK: 0x1b8,
  PUBLIC_KEY_INVALID: 0x1b9,
  FUNCTION_REJECTED: 0x200,
  TOKEN_RESOURCE_EXCEEDED: 0x201,
  OPERATION_CANCEL_FAILED: 0x202,
  KEY_EXHAUSTED: 0x203,
  PENDING: 0x204,
  SESSION_ASYNC_NOT_SUPPORTED: 0x205,
  SEED_RANDOM_REQUIRED: 0x206,
  OPERATION_NOT_VALIDATED: 0x207,
  TOKEN_NOT_INITIALIZED: 0x208,
  PARAMETER_SET_NOT_SUPPORTED: 0x209,
  VENDOR_DEFINED: 0x80000000,
} as const;

const CKR_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(CKR).map(([name, value]) => [value, `CKR_${name}`]),
);

/** Name of a return value. Example: `ckrName(0xc1) === "CKR_SIGNATURE_LEN_RANGE"`. */
export function ckrName(rv: number): string {
  const name = CKR_NAMES.get(rv);
  if (name) return name;
  if (rv >= CKR.VENDOR_DEFINED) {
    return `CKR_VENDOR_DEFINED+0x${(rv - CKR.VENDOR_DEFINED).toString(16)}`;
  }
  return "CKR_UNKNOWN";
}

/** Object classes. Example: `CKO.PRIVATE_KEY === 3`. */
export const CKO = {
  DATA: 0x0,
  CERTIFICATE: 0x1,
  PUBLIC_KEY: 0x2,
  PRIVATE_KEY: 0x3,
  SECRET_KEY: 0x4,
} as const;

/** Certificate types (CKA_CERTIFICATE_TYPE). Example: `CKC.X_509 === 0`. */
export const CKC = {
  X_509: 0x0,
} as const;

/** The vendor-defined composite ML-DSA-65 + Ed25519 mechanism, also used as its key type. */
export const CK_COMPOSITE_MLDSA65_ED25519 = 0x80004202;

/** Key types. Example: `CKK.ML_DSA === 0x4a`. */
export const CKK = {
  RSA: 0x0,
  DSA: 0x1,
  DH: 0x2,
  EC: 0x3,
  GENERIC_SECRET: 0x10,
  AES: 0x1f,
  EC_EDWARDS: 0x40,
  EC_MONTGOMERY: 0x41,
  HKDF: 0x42,
  ML_KEM: 0x49,
  ML_DSA: 0x4a,
  SLH_DSA: 0x4b,
  COMPOSITE_MLDSA65_ED25519: CK_COMPOSITE_MLDSA65_ED25519,
} as const;

/** Attribute types. Example: `CKA.LABEL === 3`. */
export const CKA = {
  CLASS: 0x0,
  TOKEN: 0x1,
  PRIVATE: 0x2,
  LABEL: 0x3,
  VALUE: 0x11,
  CERTIFICATE_TYPE: 0x80,
  ISSUER: 0x81,
  SERIAL_NUMBER: 0x82,
  TRUSTED: 0x86,
  KEY_TYPE: 0x100,
  SUBJECT: 0x101,
  ID: 0x102,
  SENSITIVE: 0x103,
  ENCRYPT: 0x104,
  DECRYPT: 0x105,
  WRAP: 0x106,
  UNWRAP: 0x107,
  SIGN: 0x108,
  SIGN_RECOVER: 0x109,
  VERIFY: 0x10a,
  VERIFY_RECOVER: 0x10b,
  DERIVE: 0x10c,
  MODULUS: 0x120,
  MODULUS_BITS: 0x121,
  PUBLIC_EXPONENT: 0x122,
  PUBLIC_KEY_INFO: 0x129,
  VALUE_LEN: 0x161,
  EXTRACTABLE: 0x162,
  LOCAL: 0x163,
  NEVER_EXTRACTABLE: 0x164,
  ALWAYS_SENSITIVE: 0x165,
  KEY_GEN_MECHANISM: 0x166,
  MODIFIABLE: 0x170,
  COPYABLE: 0x171,
  DESTROYABLE: 0x172,
  EC_PARAMS: 0x180,
  EC_POINT: 0x181,
  ALWAYS_AUTHENTICATE: 0x202,
  WRAP_WITH_TRUSTED: 0x210,
  PARAMETER_SET: 0x61d,
  SEED: 0x637,
} as const;

/** Mechanism types. Example: `CKM.ML_DSA === 0x1d`. */
export const CKM = {
  RSA_PKCS_KEY_PAIR_GEN: 0x0,
  RSA_PKCS: 0x1,
  RSA_PKCS_PSS: 0xd,
  ML_KEM_KEY_PAIR_GEN: 0xf,
  ML_KEM: 0x17,
  ML_DSA_KEY_PAIR_GEN: 0x1c,
  ML_DSA: 0x1d,
  HASH_ML_DSA: 0x1f,
  SLH_DSA_KEY_PAIR_GEN: 0x2d,
  SLH_DSA: 0x2e,
  SHA256_RSA_PKCS: 0x40,
  SHA256_RSA_PKCS_PSS: 0x43,
  SHA384_RSA_PKCS_PSS: 0x44,
  SHA512_RSA_PKCS_PSS: 0x45,
  SHA256: 0x250,
  SHA256_HMAC: 0x251,
  SHA384: 0x260,
  SHA512: 0x270,
  GENERIC_SECRET_KEY_GEN: 0x350,
  EC_KEY_PAIR_GEN: 0x1040,
  ECDSA: 0x1041,
  ECDSA_SHA256: 0x1044,
  ECDSA_SHA384: 0x1045,
  ECDSA_SHA512: 0x1046,
  EC_EDWARDS_KEY_PAIR_GEN: 0x1055,
  EDDSA: 0x1057,
  AES_KEY_GEN: 0x1080,
  /** PKCS#11 3.3 working draft: ML-DSA over a given μ (FIPS 204 Algorithm 7 line 6), 64 bytes in. */
  ML_DSA_EXTERNAL_MU: 0x403c,
  COMPOSITE_MLDSA65_ED25519: CK_COMPOSITE_MLDSA65_ED25519,
} as const;

const CKM_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(CKM).map(([name, value]) => [value, `CKM_${name}`]),
);

/** Name of a mechanism. Example: `ckmName(0x1d) === "CKM_ML_DSA"`. */
export function ckmName(mechanism: number): string {
  return CKM_NAMES.get(mechanism) ?? `CKM_0x${mechanism.toString(16)}`;
}

/** ML-DSA parameter sets (CKA_PARAMETER_SET values; distinct from the CKP_ profile ids). */
export const CKP_ML_DSA = { ML_DSA_44: 0x1, ML_DSA_65: 0x2, ML_DSA_87: 0x3 } as const;

/** Hedge variants of CK_SIGN_ADDITIONAL_CONTEXT. Example: `CKH.HEDGE_PREFERRED === 0`. */
export const CKH = {
  HEDGE_PREFERRED: 0x0,
  HEDGE_REQUIRED: 0x1,
  DETERMINISTIC_REQUIRED: 0x2,
} as const;

/** MGF ids for CK_RSA_PKCS_PSS_PARAMS. Example: `CKG.MGF1_SHA256 === 2`. */
export const CKG = {
  MGF1_SHA1: 0x1,
  MGF1_SHA256: 0x2,
  MGF1_SHA384: 0x3,
  MGF1_SHA512: 0x4,
  MGF1_SHA224: 0x5,
} as const;

/** User types. Example: `CKU.USER === 1`. */
export const CKU = { SO: 0x0, USER: 0x1, CONTEXT_SPECIFIC: 0x2 } as const;

/** CK_STATE: a session's login state (CK_SESSION_INFO.state). */
export const CKS = {
  RO_PUBLIC_SESSION: 0x0,
  RO_USER_FUNCTIONS: 0x1,
  RW_PUBLIC_SESSION: 0x2,
  RW_USER_FUNCTIONS: 0x3,
  RW_SO_FUNCTIONS: 0x4,
} as const;

declare const flagOf: unique symbol;

/**
 * A CKF_ bit of one structure's flags: the bits of different structures share values (CKF_RW_SESSION
 * and CKF_OS_LOCKING_OK are both 0x2), so each structure has its own type and one cannot be passed
 * where another is expected.
 *
 * @example
 * ```ts
 * const sign: Flag<"mechanism"> = CKF_MECHANISM.SIGN;
 * ```
 */
export type Flag<Of extends string> = number & { readonly [flagOf]: Of };

/** A bit of CK_C_INITIALIZE_ARGS.flags. Example: `CKF_INIT.OS_LOCKING_OK`. */
export type InitFlag = Flag<"init">;
/** A bit of a session's flags (C_OpenSession, CK_SESSION_INFO). Example: `CKF_SESSION.RW_SESSION`. */
export type SessionFlag = Flag<"session">;
/** A bit of CK_SLOT_INFO.flags. Example: `CKF_SLOT.TOKEN_PRESENT`. */
export type SlotFlag = Flag<"slot">;
/** A bit of CK_TOKEN_INFO.flags. Example: `CKF_TOKEN.TOKEN_INITIALIZED`. */
export type TokenFlag = Flag<"token">;
/** A bit of CK_MECHANISM_INFO.flags. Example: `CKF_MECHANISM.SIGN`. */
export type MechanismFlag = Flag<"mechanism">;
/** A bit of CK_INTERFACE.flags. Example: `CKF_INTERFACE.FORK_SAFE`. */
export type InterfaceFlag = Flag<"interface">;

function flags<Of extends string>() {
  return <T extends Record<string, number>>(bits: T) =>
    Object.freeze(bits) as unknown as { readonly [K in keyof T]: Flag<Of> };
}

/**
 * Flags of CK_C_INITIALIZE_ARGS.
 *
 * @example
 * ```ts
 * import { encodeInitializeArgs } from "./layouts.ts";
 * encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK);
 * ```
 */
export const CKF_INIT = flags<"init">()({
  LIBRARY_CANT_CREATE_OS_THREADS: 0x1,
  OS_LOCKING_OK: 0x2,
});

/**
 * Flags of a session (C_OpenSession, CK_SESSION_INFO).
 *
 * @example
 * ```ts
 * const flags = CKF_SESSION.SERIAL_SESSION | CKF_SESSION.RW_SESSION; // C_OpenSession's flags
 * ```
 */
export const CKF_SESSION = flags<"session">()({
  RW_SESSION: 0x2,
  SERIAL_SESSION: 0x4,
});

/**
 * Flags of CK_SLOT_INFO.
 *
 * @example
 * ```ts
 * import { decodeSlotInfo } from "./layouts.ts";
 * declare const buf: Uint8Array;
 * if (decodeSlotInfo(buf).flags & CKF_SLOT.TOKEN_PRESENT) console.log("a token is in");
 * ```
 */
export const CKF_SLOT = flags<"slot">()({
  TOKEN_PRESENT: 0x1,
  REMOVABLE_DEVICE: 0x2,
  HW_SLOT: 0x4,
});

/**
 * Flags of CK_TOKEN_INFO.
 *
 * @example
 * ```ts
 * import { decodeTokenInfo } from "./layouts.ts";
 * declare const buf: Uint8Array;
 * if (!(decodeTokenInfo(buf).flags & CKF_TOKEN.TOKEN_INITIALIZED)) console.log("run svcd token init");
 * ```
 */
export const CKF_TOKEN = flags<"token">()({
  RNG: 0x1,
  WRITE_PROTECTED: 0x2,
  LOGIN_REQUIRED: 0x4,
  USER_PIN_INITIALIZED: 0x8,
  RESTORE_KEY_NOT_NEEDED: 0x20,
  CLOCK_ON_TOKEN: 0x40,
  PROTECTED_AUTHENTICATION_PATH: 0x100,
  DUAL_CRYPTO_OPERATIONS: 0x200,
  TOKEN_INITIALIZED: 0x400,
  SECONDARY_AUTHENTICATION: 0x800,
  USER_PIN_COUNT_LOW: 0x10000,
  USER_PIN_FINAL_TRY: 0x20000,
  USER_PIN_LOCKED: 0x40000,
  USER_PIN_TO_BE_CHANGED: 0x80000,
  SO_PIN_COUNT_LOW: 0x100000,
  SO_PIN_FINAL_TRY: 0x200000,
  SO_PIN_LOCKED: 0x400000,
  SO_PIN_TO_BE_CHANGED: 0x800000,
  ERROR_STATE: 0x1000000,
});

/**
 * Flags of CK_MECHANISM_INFO.
 *
 * @example
 * ```ts
 * import { decodeMechanismInfo } from "./layouts.ts";
 * declare const buf: Uint8Array;
 * const canSign = (decodeMechanismInfo(buf).flags & CKF_MECHANISM.SIGN) !== 0;
 * ```
 */
export const CKF_MECHANISM = flags<"mechanism">()({
  HW: 0x1,
  ENCRYPT: 0x100,
  DECRYPT: 0x200,
  DIGEST: 0x400,
  SIGN: 0x800,
  SIGN_RECOVER: 0x1000,
  VERIFY: 0x2000,
  VERIFY_RECOVER: 0x4000,
  GENERATE: 0x8000,
  GENERATE_KEY_PAIR: 0x10000,
});

/**
 * Flags of CK_INTERFACE.
 *
 * @example
 * ```ts
 * import type { CkInterface } from "./layouts.ts";
 * declare const iface: CkInterface;
 * const forkSafe = (iface.flags & CKF_INTERFACE.FORK_SAFE) !== 0;
 * ```
 */
export const CKF_INTERFACE = flags<"interface">()({
  FORK_SAFE: 0x1,
});

/** CK_UNAVAILABLE_INFORMATION (~0 as a CK_ULONG). */
export const CK_UNAVAILABLE_INFORMATION = 0xffff_ffff_ffff_ffffn;
/** CK_EFFECTIVELY_INFINITE: a count without limit. */
export const CK_EFFECTIVELY_INFINITE = 0;
/** CK_INVALID_HANDLE: no object or session. */
export const CK_INVALID_HANDLE = 0;
