/**
 * What the token and the module say about themselves (C_GetTokenInfo, C_GetInfo), in the shape
 * the daemon reports: versions as "major.minor", counts null where the module withholds them.
 */
import {
  check,
  type CkInfo,
  type CkTokenInfo,
  decodeInfo,
  decodeTokenInfo,
  formatVersion,
  type Pkcs11Module,
  SIZE,
} from "../../ffi/pkcs11/mod.ts";

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
