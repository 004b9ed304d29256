/**
 * Key generation on the token (operator tooling, `svcd token keygen` and `init`): the attribute
 * templates — private keys sensitive and never extractable, signing keys that do nothing else —,
 * the checks that the module offers the mechanism before anything is attempted, and the
 * C_GenerateKeyPair and C_GenerateKey calls. A key type with a signature scheme of its own (RSA:
 * PSS or PKCS #1 v1.5) is recorded on both halves as CKA_ALLOWED_MECHANISMS, which the module
 * enforces and the daemon reads back to tell the types apart (lib/token/key_types.ts).
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import { type Handle, KEY_TYPES, type MechanismCatalogue } from "../token/mod.ts";
 * declare const mod: Pkcs11Module, rwSession: Handle, offered: MechanismCatalogue;
 * requireKeyGeneration(offered, KEY_TYPES["ed25519"]);
 * await generateSigningKeyPair(mod, rwSession, KEY_TYPES["ed25519"], "web");
 * ```
 */
import {
  type AttributeIn,
  boolBytes,
  check,
  CKA,
  CKF_MECHANISM,
  CKK,
  CKM,
  ckmName,
  CKO,
  CKR,
  encodeMechanism,
  encodeTemplate,
  Pkcs11Error,
  type Pkcs11Module,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import {
  type Handle,
  keepAlive,
  type KeyTypeSpec,
  type MechanismCatalogue,
  type MechanismChoice,
  MechanismUnavailableError,
  schemeTemplate,
  utf8,
} from "../token/mod.ts";

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
      ...PUBLIC_KEY_USE,
      ...spec.publicTemplate(),
      ...schemeTemplate(spec),
    ],
    [
      ...commonKeyAttributes(label, id, true),
      ...PRIVATE_KEY_USE,
      ...schemeTemplate(spec),
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
 * ({@link MAC_SECRET_ATTRIBUTES}) with CKM_GENERIC_SECRET_KEY_GEN.
 */
export function generateMacSecret(mod: Pkcs11Module, session: Handle, label: string): Handle {
  return generateKey(mod, session, { mechanism: CKM.GENERIC_SECRET_KEY_GEN }, [
    ...commonKeyAttributes(label, crypto.getRandomValues(new Uint8Array(16)), true),
    { type: CKA.CLASS, value: ulongBytes(CKO.SECRET_KEY) },
    { type: CKA.KEY_TYPE, value: ulongBytes(CKK.GENERIC_SECRET) },
    { type: CKA.VALUE_LEN, value: ulongBytes(MAC_KEY_BYTES) },
    ...MAC_SECRET_USE,
  ]);
}

/**
 * What a signing key pair may do and how it is held, stated in full rather than left to the module's
 * defaults, which differ between modules and versions (SoftHSM sets CKA_SIGN_RECOVER, and
 * CKA_ENCRYPT/DECRYPT/WRAP too, unless told). Each value is read back through PKCS#11 in the tests.
 * - Signing only: no recovery, no encryption, no wrapping, no derivation.
 * - Sensitive and never extractable; no per-operation login (the daemon logs in once).
 * - Copyable: the daemon signs through a session copy of the key (see lib/token/_key_cache.ts).
 * - Modifiable and destroyable, so an operator can relabel or remove a key with standard tools.
 */
export const KEY_PAIR_ATTRIBUTES = {
  public: {
    [CKA.VERIFY]: true,
    [CKA.VERIFY_RECOVER]: false,
    [CKA.ENCRYPT]: false,
    [CKA.WRAP]: false,
    [CKA.DERIVE]: false,
    [CKA.COPYABLE]: true,
    [CKA.MODIFIABLE]: true,
    [CKA.DESTROYABLE]: true,
  },
  private: {
    [CKA.SIGN]: true,
    [CKA.SIGN_RECOVER]: false,
    [CKA.DECRYPT]: false,
    [CKA.UNWRAP]: false,
    [CKA.DERIVE]: false,
    [CKA.SENSITIVE]: true,
    [CKA.EXTRACTABLE]: false,
    [CKA.ALWAYS_AUTHENTICATE]: false,
    [CKA.WRAP_WITH_TRUSTED]: false,
    [CKA.COPYABLE]: true,
    [CKA.MODIFIABLE]: true,
    [CKA.DESTROYABLE]: true,
  },
} as const satisfies Record<string, Record<number, boolean>>;

/** The audit MAC secret: MAC and MAC-verify only, held like a private key. */
export const MAC_SECRET_ATTRIBUTES = {
  [CKA.SIGN]: true,
  [CKA.VERIFY]: true,
  [CKA.ENCRYPT]: false,
  [CKA.DECRYPT]: false,
  [CKA.WRAP]: false,
  [CKA.UNWRAP]: false,
  [CKA.DERIVE]: false,
  [CKA.SENSITIVE]: true,
  [CKA.EXTRACTABLE]: false,
  [CKA.WRAP_WITH_TRUSTED]: false,
  [CKA.COPYABLE]: true,
  [CKA.MODIFIABLE]: true,
  [CKA.DESTROYABLE]: true,
} as const satisfies Record<number, boolean>;

const MAC_SECRET_USE = booleanTemplate(MAC_SECRET_ATTRIBUTES);
const PUBLIC_KEY_USE = booleanTemplate(KEY_PAIR_ATTRIBUTES.public);
const PRIVATE_KEY_USE = booleanTemplate(KEY_PAIR_ATTRIBUTES.private);

function booleanTemplate(values: Record<number, boolean>): AttributeIn[] {
  return Object.entries(values).map(([type, value]) => ({
    type: Number(type),
    value: boolBytes(value),
  }));
}

function commonKeyAttributes(label: string, id: Uint8Array, isPrivate: boolean): AttributeIn[] {
  return [
    { type: CKA.TOKEN, value: boolBytes(true) },
    { type: CKA.PRIVATE, value: boolBytes(isPrivate) },
    { type: CKA.LABEL, value: utf8(label) },
    { type: CKA.ID, value: id },
  ];
}

/** C_GenerateKeyPair (nonblocking): returns [public, private] handles. */
export async function generateKeyPair(
  mod: Pkcs11Module,
  session: Handle,
  choice: MechanismChoice,
  publicTemplate: AttributeIn[],
  privateTemplate: AttributeIn[],
): Promise<[Handle, Handle]> {
  const mech = encodeMechanism(choice.mechanism, choice.parameter);
  const pub = encodeTemplate(publicTemplate);
  const priv = encodeTemplate(privateTemplate);
  const handles = new BigUint64Array(2);
  const rv = await mod.fn.C_GenerateKeyPairAsync(
    session,
    mech.bytes,
    pub.bytes,
    publicTemplate.length,
    priv.bytes,
    privateTemplate.length,
    new Uint8Array(handles.buffer, 0, 8),
    new Uint8Array(handles.buffer, 8, 8),
  );
  keepAlive(mech, pub, priv);
  check("C_GenerateKeyPair", rv);
  return [Number(handles[0]), Number(handles[1])];
}

/** C_GenerateKey (a secret key). */
export function generateKey(
  mod: Pkcs11Module,
  session: Handle,
  choice: MechanismChoice,
  template: AttributeIn[],
): Handle {
  const mech = encodeMechanism(choice.mechanism, choice.parameter);
  const tmpl = encodeTemplate(template);
  const handle = new BigUint64Array(1);
  check(
    "C_GenerateKey",
    mod.fn.C_GenerateKey(
      session,
      mech.bytes,
      tmpl.bytes,
      template.length,
      new Uint8Array(handle.buffer),
    ),
  );
  return Number(handle[0]);
}
