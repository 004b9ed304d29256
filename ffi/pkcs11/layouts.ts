/**
 * PKCS#11 structures for LP64 (Linux x86_64/aarch64), written by hand from the v3.2 headers:
 * CK_ULONG and pointers are 8 bytes, CK_BBOOL 1, structs naturally aligned (not packed). Each
 * encoder returns the bytes to pass plus the buffers they point into, which the caller must keep
 * referenced until the C call returns.
 *
 * @example
 * ```ts
 * import { encodeMechanism, SIZE } from "./layouts.ts";
 * const mech = encodeMechanism(0x1057); // CKM_EDDSA, no parameter
 * mech.bytes.length === SIZE.CK_MECHANISM; // 24
 * ```
 */
import { CK_UNAVAILABLE_INFORMATION, type InitFlag } from "./constants.ts";

/** Sizes of the structures in bytes (LP64). Example: `SIZE.CK_TOKEN_INFO === 208`. */
export const SIZE = {
  CK_ULONG: 8,
  CK_VERSION: 2,
  CK_ATTRIBUTE: 24,
  CK_MECHANISM: 24,
  CK_MECHANISM_INFO: 24,
  CK_INFO: 88,
  CK_SLOT_INFO: 112,
  CK_TOKEN_INFO: 208,
  CK_SESSION_INFO: 32,
  CK_C_INITIALIZE_ARGS: 48,
  CK_INTERFACE: 24,
  CK_RSA_PKCS_PSS_PARAMS: 24,
  CK_SIGN_ADDITIONAL_CONTEXT: 24,
} as const;

/**
 * Byte offsets of the fields svcd reads or writes, by their C names (LP64). The encoders and
 * decoders below use these numbers and no others; layouts_test.ts compares them, and SIZE, with
 * what a C compiler computes from a PKCS#11 header (layouts_check.c).
 *
 * @example
 * ```ts
 * OFFSET.CK_TOKEN_INFO.flags; // 96
 * ```
 */
export const OFFSET = {
  CK_VERSION: { major: 0, minor: 1 },
  CK_ATTRIBUTE: { type: 0, pValue: 8, ulValueLen: 16 },
  CK_MECHANISM: { mechanism: 0, pParameter: 8, ulParameterLen: 16 },
  CK_MECHANISM_INFO: { ulMinKeySize: 0, ulMaxKeySize: 8, flags: 16 },
  CK_INFO: {
    cryptokiVersion: 0,
    manufacturerID: 2,
    flags: 40,
    libraryDescription: 48,
    libraryVersion: 80,
  },
  CK_SLOT_INFO: {
    slotDescription: 0,
    manufacturerID: 64,
    flags: 96,
    hardwareVersion: 104,
    firmwareVersion: 106,
  },
  CK_TOKEN_INFO: {
    label: 0,
    manufacturerID: 32,
    model: 64,
    serialNumber: 80,
    flags: 96,
    ulMaxSessionCount: 104,
    ulSessionCount: 112,
    ulMaxRwSessionCount: 120,
    ulRwSessionCount: 128,
    ulMaxPinLen: 136,
    ulMinPinLen: 144,
    ulTotalPublicMemory: 152,
    ulFreePublicMemory: 160,
    ulTotalPrivateMemory: 168,
    ulFreePrivateMemory: 176,
    hardwareVersion: 184,
    firmwareVersion: 186,
    utcTime: 188,
  },
  CK_SESSION_INFO: { slotID: 0, state: 8, flags: 16, ulDeviceError: 24 },
  CK_C_INITIALIZE_ARGS: {
    CreateMutex: 0,
    DestroyMutex: 8,
    LockMutex: 16,
    UnlockMutex: 24,
    flags: 32,
    pReserved: 40,
  },
  CK_INTERFACE: { pInterfaceName: 0, pFunctionList: 8, flags: 16 },
  CK_RSA_PKCS_PSS_PARAMS: { hashAlg: 0, mgf: 8, sLen: 16 },
  CK_SIGN_ADDITIONAL_CONTEXT: { hedgeVariant: 0, pContext: 8, ulContextLen: 16 },
} as const;

const A = OFFSET.CK_ATTRIBUTE, M = OFFSET.CK_MECHANISM, INFO = OFFSET.CK_INFO;
const SLOT = OFFSET.CK_SLOT_INFO, TOKEN = OFFSET.CK_TOKEN_INFO;

/** Bytes plus the buffers they reference; keep `keep` alive for the duration of the call. */
export interface Encoded {
  bytes: Uint8Array<ArrayBuffer>;
  keep: Uint8Array[];
}

/** Address of a buffer as a CK_ULONG-sized integer (0 for null or empty). Example: `addressOf(buf)`. */
export function addressOf(buf: Uint8Array | null | undefined): bigint {
  if (!buf || buf.byteLength === 0) return 0n;
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf as Uint8Array<ArrayBuffer>)));
}

/** A CK_ULONG as 8 little-endian bytes. Example: `ulongBytes(3)` → `03 00 00 00 00 00 00 00`. */
export function ulongBytes(value: number | bigint): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), true);
  return out;
}

/** A CK_BBOOL (1 byte). Example: `boolBytes(true)` → `01`. */
export function boolBytes(value: boolean): Uint8Array<ArrayBuffer> {
  return Uint8Array.of(value ? 1 : 0);
}

/** Reads a CK_ULONG at `offset` as a JS number (exact up to 2^53). Example: `readUlong(buf, 8)`. */
export function readUlong(buf: Uint8Array, offset = 0): number {
  return Number(
    new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getBigUint64(offset, true),
  );
}

/**
 * Reads an array of CK_ULONG (an attribute such as CKA_ALLOWED_MECHANISMS); a trailing partial
 * value is ignored. Example: `readUlongs(ulongBytes(1))` → `[1]`.
 */
export function readUlongs(buf: Uint8Array): number[] {
  const out: number[] = [];
  for (let at = 0; at + 8 <= buf.length; at += 8) out.push(readUlong(buf, at));
  return out;
}

/** Reads a CK_ULONG at `offset`, or null when it is CK_UNAVAILABLE_INFORMATION. */
export function readUlongOrNull(buf: Uint8Array, offset = 0): number | null {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getBigUint64(offset, true);
  return v === CK_UNAVAILABLE_INFORMATION ? null : Number(v);
}

/** One attribute of a template: its CKA_ type and its value bytes (null: length query). */
export interface AttributeIn {
  type: number;
  value: Uint8Array | null;
}

/**
 * CK_ATTRIBUTE[] {type@0, pValue@8, ulValueLen@16}, 24 bytes each.
 * Example: `encodeTemplate([{ type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) }])`.
 */
export function encodeTemplate(attrs: AttributeIn[]): Encoded {
  const bytes = new Uint8Array(Math.max(1, attrs.length) * SIZE.CK_ATTRIBUTE);
  const view = new DataView(bytes.buffer);
  const keep: Uint8Array[] = [];
  attrs.forEach((attr, i) => {
    const at = i * SIZE.CK_ATTRIBUTE;
    view.setBigUint64(at + A.type, BigInt(attr.type), true);
    view.setBigUint64(at + A.pValue, addressOf(attr.value), true);
    view.setBigUint64(at + A.ulValueLen, BigInt(attr.value?.byteLength ?? 0), true);
    if (attr.value) keep.push(attr.value);
  });
  return { bytes, keep };
}

/**
 * The ulValueLen of each attribute after C_GetAttributeValue; null where the module answered
 * CK_UNAVAILABLE_INFORMATION (sensitive or absent). Example: `readTemplateLengths(tmpl.bytes, 2)`.
 */
export function readTemplateLengths(template: Uint8Array, count: number): (number | null)[] {
  const out: (number | null)[] = [];
  for (let i = 0; i < count; i++) {
    out.push(readUlongOrNull(template, i * SIZE.CK_ATTRIBUTE + A.ulValueLen));
  }
  return out;
}

/**
 * CK_MECHANISM {mechanism@0, pParameter@8, ulParameterLen@16}.
 * Example: `encodeMechanism(CKM.SHA256_RSA_PKCS_PSS, encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32))`.
 */
export function encodeMechanism(mechanism: number, parameter?: Encoded | Uint8Array): Encoded {
  const bytes = new Uint8Array(SIZE.CK_MECHANISM);
  const view = new DataView(bytes.buffer);
  const keep: Uint8Array[] = [];
  const param = parameter instanceof Uint8Array ? { bytes: parameter, keep: [] } : parameter;
  view.setBigUint64(M.mechanism, BigInt(mechanism), true);
  if (param) {
    view.setBigUint64(M.pParameter, addressOf(param.bytes), true);
    view.setBigUint64(M.ulParameterLen, BigInt(param.bytes.byteLength), true);
    keep.push(param.bytes, ...param.keep);
  }
  return { bytes, keep };
}

/**
 * CK_RSA_PKCS_PSS_PARAMS {hashAlg@0, mgf@8, sLen@16}.
 * Example: `encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32)`.
 */
export function encodePssParams(hashAlg: number, mgf: number, saltLength: number): Encoded {
  const bytes = new Uint8Array(SIZE.CK_RSA_PKCS_PSS_PARAMS);
  const view = new DataView(bytes.buffer);
  const at = OFFSET.CK_RSA_PKCS_PSS_PARAMS;
  view.setBigUint64(at.hashAlg, BigInt(hashAlg), true);
  view.setBigUint64(at.mgf, BigInt(mgf), true);
  view.setBigUint64(at.sLen, BigInt(saltLength), true);
  return { bytes, keep: [] };
}

/**
 * CK_SIGN_ADDITIONAL_CONTEXT {hedgeVariant@0, pContext@8, ulContextLen@16}. FIPS 204 caps the
 * context at 255 bytes; the caller enforces it. Example: `encodeSignAdditionalContext(CKH.HEDGE_PREFERRED)`.
 */
export function encodeSignAdditionalContext(hedgeVariant: number, context?: Uint8Array): Encoded {
  const bytes = new Uint8Array(SIZE.CK_SIGN_ADDITIONAL_CONTEXT);
  const view = new DataView(bytes.buffer);
  const at = OFFSET.CK_SIGN_ADDITIONAL_CONTEXT;
  view.setBigUint64(at.hedgeVariant, BigInt(hedgeVariant), true);
  view.setBigUint64(at.pContext, addressOf(context), true);
  view.setBigUint64(at.ulContextLen, BigInt(context?.byteLength ?? 0), true);
  return { bytes, keep: context ? [context] : [] };
}

/**
 * CK_C_INITIALIZE_ARGS: four mutex callbacks (NULL) @0..31, flags@32, pReserved@40.
 * Example: `encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK)`.
 */
export function encodeInitializeArgs(flags: InitFlag): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(SIZE.CK_C_INITIALIZE_ARGS);
  new DataView(bytes.buffer).setBigUint64(OFFSET.CK_C_INITIALIZE_ARGS.flags, BigInt(flags), true);
  return bytes;
}

/** CK_VERSION {major, minor}. */
export interface CkVersion {
  major: number;
  minor: number;
}

/** Reads a CK_VERSION (2 bytes). Example: `readVersion(info, 0)` → `{ major: 2, minor: 40 }`. */
export function readVersion(buf: Uint8Array, offset: number): CkVersion {
  const at = OFFSET.CK_VERSION;
  return { major: buf[offset + at.major], minor: buf[offset + at.minor] };
}

/** "major.minor" with the minor as printed by PKCS#11 tools. Example: `formatVersion({major:2,minor:40})` → "2.40". */
export function formatVersion(v: CkVersion): string {
  return `${v.major}.${v.minor}`;
}

// CK_UTF8CHAR fields: UTF-8, as padText writes them (a label cut mid-character shows U+FFFD).
const utf8 = new TextDecoder("utf-8");

/** A blank-padded fixed-width text field, trailing blanks (and NULs) removed. */
export function readPaddedText(buf: Uint8Array, offset: number, width: number): string {
  return utf8.decode(buf.subarray(offset, offset + width)).replace(/[ \0]+$/, "");
}

/** A blank-padded fixed-width field for writing (e.g. the 32-byte token label of C_InitToken). */
export function padText(text: string, width: number): Uint8Array<ArrayBuffer> {
  const encoded = new TextEncoder().encode(text);
  if (encoded.byteLength > width) {
    throw new RangeError(`'${text}' is longer than ${width} bytes; use a shorter label`);
  }
  const out = new Uint8Array(width).fill(0x20);
  out.set(encoded);
  return out;
}

/** CK_INFO (88 bytes). */
export interface CkInfo {
  cryptokiVersion: CkVersion;
  manufacturerId: string;
  flags: number;
  libraryDescription: string;
  libraryVersion: CkVersion;
}

/** Decodes CK_INFO: version@0, manufacturerID[32]@2, flags@40, libraryDescription[32]@48, libraryVersion@80. */
export function decodeInfo(buf: Uint8Array): CkInfo {
  return {
    cryptokiVersion: readVersion(buf, INFO.cryptokiVersion),
    manufacturerId: readPaddedText(buf, INFO.manufacturerID, 32),
    flags: readUlong(buf, INFO.flags),
    libraryDescription: readPaddedText(buf, INFO.libraryDescription, 32),
    libraryVersion: readVersion(buf, INFO.libraryVersion),
  };
}

/** CK_SLOT_INFO (112 bytes). */
export interface CkSlotInfo {
  slotDescription: string;
  manufacturerId: string;
  flags: number;
  hardwareVersion: CkVersion;
  firmwareVersion: CkVersion;
}

/** Decodes CK_SLOT_INFO: description[64]@0, manufacturerID[32]@64, flags@96, hw@104, fw@106. */
export function decodeSlotInfo(buf: Uint8Array): CkSlotInfo {
  return {
    slotDescription: readPaddedText(buf, SLOT.slotDescription, 64),
    manufacturerId: readPaddedText(buf, SLOT.manufacturerID, 32),
    flags: readUlong(buf, SLOT.flags),
    hardwareVersion: readVersion(buf, SLOT.hardwareVersion),
    firmwareVersion: readVersion(buf, SLOT.firmwareVersion),
  };
}

/** CK_TOKEN_INFO (208 bytes). Counts are null where the module reports CK_UNAVAILABLE_INFORMATION. */
export interface CkTokenInfo {
  label: string;
  manufacturerId: string;
  model: string;
  serialNumber: string;
  flags: number;
  maxSessionCount: number | null;
  sessionCount: number | null;
  maxRwSessionCount: number | null;
  rwSessionCount: number | null;
  maxPinLen: number;
  minPinLen: number;
  totalPublicMemory: number | null;
  freePublicMemory: number | null;
  totalPrivateMemory: number | null;
  freePrivateMemory: number | null;
  hardwareVersion: CkVersion;
  firmwareVersion: CkVersion;
  utcTime: string;
}

/** Decodes CK_TOKEN_INFO (208 bytes; offsets in {@link OFFSET}). */
export function decodeTokenInfo(buf: Uint8Array): CkTokenInfo {
  return {
    label: readPaddedText(buf, TOKEN.label, 32),
    manufacturerId: readPaddedText(buf, TOKEN.manufacturerID, 32),
    model: readPaddedText(buf, TOKEN.model, 16),
    serialNumber: readPaddedText(buf, TOKEN.serialNumber, 16),
    flags: readUlong(buf, TOKEN.flags),
    maxSessionCount: readUlongOrNull(buf, TOKEN.ulMaxSessionCount),
    sessionCount: readUlongOrNull(buf, TOKEN.ulSessionCount),
    maxRwSessionCount: readUlongOrNull(buf, TOKEN.ulMaxRwSessionCount),
    rwSessionCount: readUlongOrNull(buf, TOKEN.ulRwSessionCount),
    maxPinLen: readUlong(buf, TOKEN.ulMaxPinLen),
    minPinLen: readUlong(buf, TOKEN.ulMinPinLen),
    totalPublicMemory: readUlongOrNull(buf, TOKEN.ulTotalPublicMemory),
    freePublicMemory: readUlongOrNull(buf, TOKEN.ulFreePublicMemory),
    totalPrivateMemory: readUlongOrNull(buf, TOKEN.ulTotalPrivateMemory),
    freePrivateMemory: readUlongOrNull(buf, TOKEN.ulFreePrivateMemory),
    hardwareVersion: readVersion(buf, TOKEN.hardwareVersion),
    firmwareVersion: readVersion(buf, TOKEN.firmwareVersion),
    utcTime: readPaddedText(buf, TOKEN.utcTime, 16),
  };
}

/** CK_MECHANISM_INFO {ulMinKeySize@0, ulMaxKeySize@8, flags@16}. */
export interface CkMechanismInfo {
  minKeySize: number;
  maxKeySize: number;
  flags: number;
}

/** Decodes CK_MECHANISM_INFO (24 bytes). Example: `decodeMechanismInfo(buf).flags & CKF_MECHANISM.SIGN`. */
export function decodeMechanismInfo(buf: Uint8Array): CkMechanismInfo {
  return {
    minKeySize: readUlong(buf, OFFSET.CK_MECHANISM_INFO.ulMinKeySize),
    maxKeySize: readUlong(buf, OFFSET.CK_MECHANISM_INFO.ulMaxKeySize),
    flags: readUlong(buf, OFFSET.CK_MECHANISM_INFO.flags),
  };
}

/** CK_SESSION_INFO {slotID@0, state@8, flags@16, ulDeviceError@24}. */
export interface CkSessionInfo {
  slotId: number;
  state: number;
  flags: number;
  deviceError: number;
}

/** Decodes CK_SESSION_INFO (32 bytes). */
export function decodeSessionInfo(buf: Uint8Array): CkSessionInfo {
  return {
    slotId: readUlong(buf, OFFSET.CK_SESSION_INFO.slotID),
    state: readUlong(buf, OFFSET.CK_SESSION_INFO.state),
    flags: readUlong(buf, OFFSET.CK_SESSION_INFO.flags),
    deviceError: readUlong(buf, OFFSET.CK_SESSION_INFO.ulDeviceError),
  };
}

/** CK_INTERFACE {pInterfaceName@0, pFunctionList@8, flags@16}, read from module memory. */
export interface CkInterface {
  name: string;
  functionList: Deno.PointerValue;
  flags: number;
}

/** Reads a CK_INTERFACE the module returned. Example: `readInterface(ptr).name === "PKCS 11"`. */
export function readInterface(ptr: Deno.PointerObject): CkInterface {
  const view = new Deno.UnsafePointerView(ptr);
  const at = OFFSET.CK_INTERFACE;
  const namePtr = view.getPointer(at.pInterfaceName);
  return {
    name: namePtr ? Deno.UnsafePointerView.getCString(namePtr) : "",
    functionList: view.getPointer(at.pFunctionList),
    flags: Number(view.getBigUint64(at.flags)),
  };
}
