/**
 * Key generation on the token (operator tooling, `svcd token keygen` and `init`): the attribute
 * templates — private keys sensitive and never extractable, signing keys that do nothing else —
 * and the checks that the module offers the mechanism before anything is attempted.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import { KEY_TYPES } from "./key_types.ts";
 * import type { MechanismCatalogue } from "./mechanisms.ts";
 * import type { Handle } from "./session_ops.ts";
 * declare const mod: Pkcs11Module, rwSession: Handle, offered: MechanismCatalogue;
 * requireKeyGeneration(offered, KEY_TYPES["ed25519"]);
 * await generateSigningKeyPair(mod, rwSession, KEY_TYPES["ed25519"], "web");
 * ```
 */
import {
  type AttributeIn,
  boolBytes,
  CKA,
  CKF_MECHANISM,
  CKK,
  CKM,
  ckmName,
  CKO,
  CKR,
  Pkcs11Error,
  type Pkcs11Module,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { MechanismUnavailableError } from "./errors.ts";
import type { KeyTypeSpec } from "./key_types.ts";
import type { MechanismCatalogue } from "./mechanisms.ts";
import { generateKey, generateKeyPair, type Handle, utf8 } from "./session_ops.ts";

/** Refusals of C_GenerateKeyPair that mean "not these parameters": the type is not offered. */
const PARAMETERS_REFUSED = new Set<number>([
  CKR.CURVE_NOT_SUPPORTED,
  CKR.DOMAIN_PARAMS_INVALID,
  CKR.PARAMETER_SET_NOT_SUPPORTED,
  CKR.KEY_SIZE_RANGE,
  CKR.MECHANISM_INVALID,
]);

/** Bytes of the audit MAC secret (HMAC-SHA256 key). */
const MAC_KEY_BYTES = 32;

/**
 * Throws {@link MechanismUnavailableError} unless the module can generate keys of this type (at
 * its size), naming the types it can generate instead.
 */
export function requireKeyGeneration(offered: MechanismCatalogue, spec: KeyTypeSpec): void {
  if (offered.offersFor(spec, spec.keyGenMechanism, CKF_MECHANISM.GENERATE_KEY_PAIR)) return;
  const why = offered.offers(spec.keyGenMechanism, CKF_MECHANISM.GENERATE_KEY_PAIR)
    ? `for ${spec.keySizeBits}-bit keys (C_GetMechanismInfo key size range)`
    : "(C_GetMechanismInfo: CKR_MECHANISM_INVALID)";
  throw new MechanismUnavailableError(
    `the module does not offer ${ckmName(spec.keyGenMechanism)} ${why}, so it cannot ` +
      `generate ${spec.name} keys; use one of: ${offered.keyTypes().join(", ") || "(none)"}`,
  );
}

/**
 * Generates a signing key pair `label` of type `spec` in a read-write session: the private key
 * sensitive, not extractable, signing only; both halves share a random CKA_ID.
 */
export async function generateSigningKeyPair(
  mod: Pkcs11Module,
  session: Handle,
  spec: KeyTypeSpec,
  label: string,
): Promise<void> {
  const id = crypto.getRandomValues(new Uint8Array(16));
  await generateKeyPair(
    mod,
    session,
    { mechanism: spec.keyGenMechanism },
    [
      ...commonKeyAttributes(label, id, false),
      { type: CKA.VERIFY, value: boolBytes(true) },
      ...signOnlyPublic(),
      ...spec.publicTemplate(),
    ],
    [
      ...commonKeyAttributes(label, id, true),
      { type: CKA.SIGN, value: boolBytes(true) },
      { type: CKA.SENSITIVE, value: boolBytes(true) },
      { type: CKA.EXTRACTABLE, value: boolBytes(false) },
      ...signOnlyPrivate(),
    ],
  ).catch((err) => {
    // The mechanism exists but not for these parameters: the type is not offered after all.
    if (err instanceof Pkcs11Error && PARAMETERS_REFUSED.has(err.rv)) {
      throw new MechanismUnavailableError(
        `the module refuses ${spec.name} key generation (${err.message}); the type is not offered`,
      );
    }
    throw err;
  });
}

/**
 * Throws {@link MechanismUnavailableError} unless the module can make and use the audit MAC key.
 */
export function requireMacKeyGeneration(offered: MechanismCatalogue): void {
  if (
    offered.offers(CKM.GENERIC_SECRET_KEY_GEN, CKF_MECHANISM.GENERATE) &&
    offered.offers(CKM.SHA256_HMAC, CKF_MECHANISM.SIGN)
  ) return;
  throw new MechanismUnavailableError(
    "the module does not offer CKM_GENERIC_SECRET_KEY_GEN and CKM_SHA256_HMAC, needed for the audit MAC key",
  );
}

/**
 * Generates the sensitive, non-extractable 32-byte CKK_GENERIC_SECRET HMAC key `label`
 * (CKA_SIGN/CKA_VERIFY only) with CKM_GENERIC_SECRET_KEY_GEN.
 */
export function generateMacSecret(mod: Pkcs11Module, session: Handle, label: string): Handle {
  return generateKey(mod, session, { mechanism: CKM.GENERIC_SECRET_KEY_GEN }, [
    ...commonKeyAttributes(label, crypto.getRandomValues(new Uint8Array(16)), true),
    { type: CKA.CLASS, value: ulongBytes(CKO.SECRET_KEY) },
    { type: CKA.KEY_TYPE, value: ulongBytes(CKK.GENERIC_SECRET) },
    { type: CKA.VALUE_LEN, value: ulongBytes(MAC_KEY_BYTES) },
    { type: CKA.SIGN, value: boolBytes(true) },
    { type: CKA.VERIFY, value: boolBytes(true) },
    { type: CKA.SENSITIVE, value: boolBytes(true) },
    { type: CKA.EXTRACTABLE, value: boolBytes(false) },
    ...[CKA.ENCRYPT, CKA.DECRYPT, CKA.WRAP, CKA.UNWRAP, CKA.DERIVE].map((type) => ({
      type,
      value: boolBytes(false),
    })),
  ]);
}

// Signing keys do nothing else: modules (SoftHSM) otherwise default to encrypt/decrypt/wrap too.
function signOnlyPublic(): AttributeIn[] {
  return [CKA.ENCRYPT, CKA.WRAP].map((type) => ({ type, value: boolBytes(false) }));
}

function signOnlyPrivate(): AttributeIn[] {
  return [CKA.DECRYPT, CKA.UNWRAP, CKA.DERIVE].map((type) => ({ type, value: boolBytes(false) }));
}

function commonKeyAttributes(label: string, id: Uint8Array, isPrivate: boolean): AttributeIn[] {
  return [
    { type: CKA.TOKEN, value: boolBytes(true) },
    { type: CKA.PRIVATE, value: boolBytes(isPrivate) },
    { type: CKA.LABEL, value: utf8(label) },
    { type: CKA.ID, value: id },
  ];
}
