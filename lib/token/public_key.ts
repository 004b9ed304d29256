/**
 * Public keys as the token stores them: which key type an object is (CKA_KEY_TYPE and its
 * parameters against the key-type table), its public value decoded to the raw form and the
 * standard SubjectPublicKeyInfo, and the fingerprint `svcd token list` prints.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import type { Handle } from "./session_ops.ts";
 * declare const mod: Pkcs11Module, session: Handle, handle: Handle;
 * const spec = identifyKeyType(mod, session, handle, "web");
 * const { publicKeyRaw, publicKeySpki } = readPublicKey(mod, session, handle, spec, "web");
 * ```
 */
import { createHash } from "node:crypto";
import { CKA, type Pkcs11Module, readUlong } from "../../ffi/pkcs11/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { sequence, spki, unsignedInteger, unwrapOctetString } from "../der/mod.ts";
import { KeyUnusableError } from "./errors.ts";
import { KEY_TYPE_NAMES, KEY_TYPES, type KeyTypeSpec } from "./key_types.ts";
import { getAttributes, type Handle } from "./session_ops.ts";

/** A public key in the two forms the daemon hands out. */
export interface PublicKey {
  /** EC: uncompressed point; Ed25519: 32 bytes; RSA: DER RSAPublicKey; ML-DSA/composite: raw value. */
  publicKeyRaw: Uint8Array;
  /** DER SubjectPublicKeyInfo, where a standard one exists. */
  publicKeySpki?: Uint8Array;
}

/**
 * The key type of a public key object, from its attributes; throws {@link KeyUnusableError} for a
 * type svcd does not sign with.
 *
 * @example
 * ```ts
 * import type { Pkcs11Module } from "../../ffi/pkcs11/mod.ts";
 * import type { Handle } from "./session_ops.ts";
 * declare const mod: Pkcs11Module, session: Handle, pub: Handle;
 * identifyKeyType(mod, session, pub, "web").name; // "ec-p256"
 * ```
 */
export function identifyKeyType(
  mod: Pkcs11Module,
  session: Handle,
  pub: Handle,
  label: string,
): KeyTypeSpec {
  const attrs = getAttributes(mod, session, pub, [
    CKA.KEY_TYPE,
    CKA.EC_PARAMS,
    CKA.PARAMETER_SET,
    CKA.MODULUS,
  ]);
  const keyTypeBytes = attrs.get(CKA.KEY_TYPE);
  if (!keyTypeBytes) {
    throw new KeyUnusableError(
      label,
      "unsupported-type",
      `key '${label}' has no readable CKA_KEY_TYPE`,
    );
  }
  const keyType = readUlong(keyTypeBytes);
  const ecParams = attrs.get(CKA.EC_PARAMS);
  const parameterSet = attrs.get(CKA.PARAMETER_SET);
  const modulus = attrs.get(CKA.MODULUS);
  for (const spec of Object.values(KEY_TYPES)) {
    if (spec.keyType !== keyType) continue;
    if (spec.ecParams) {
      const forms = [spec.ecParams, ...(spec.ecParamsAliases ?? [])];
      if (!ecParams || !forms.some((f) => bytesEqual(f, ecParams))) continue;
    }
    if (
      spec.parameterSet !== undefined &&
      (!parameterSet || readUlong(parameterSet) !== spec.parameterSet)
    ) continue;
    if (spec.modulusBits !== undefined && (!modulus || bitLength(modulus) !== spec.modulusBits)) {
      continue;
    }
    return spec;
  }
  const detail = ecParams
    ? ` with CKA_EC_PARAMS ${ecParams.toHex()}`
    : modulus
    ? ` of ${bitLength(modulus)} bits`
    : "";
  throw new KeyUnusableError(
    label,
    "unsupported-type",
    `key '${label}' has key type 0x${
      keyType.toString(16)
    }${detail}, which svcd does not sign with ` +
      `(supported: ${KEY_TYPE_NAMES.join(", ")})`,
  );
}

function bitLength(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length && bytes[i] === 0) i++;
  if (i === bytes.length) return 0;
  return (bytes.length - i - 1) * 8 + (32 - Math.clz32(bytes[i]));
}

/**
 * The public value of a key object of type `spec`, raw and as SPKI; throws
 * {@link KeyUnusableError} when it is missing or the wrong size.
 */
export function readPublicKey(
  mod: Pkcs11Module,
  session: Handle,
  pub: Handle,
  spec: KeyTypeSpec,
  label: string,
): PublicKey {
  let raw: Uint8Array;
  if (spec.publicKeySource === "rsa") {
    const a = getAttributes(mod, session, pub, [CKA.MODULUS, CKA.PUBLIC_EXPONENT]);
    const n = a.get(CKA.MODULUS);
    const e = a.get(CKA.PUBLIC_EXPONENT);
    if (!n || !e) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `RSA key '${label}' has no readable modulus or exponent`,
      );
    }
    raw = sequence(unsignedInteger(n), unsignedInteger(e));
  } else {
    const attr = spec.publicKeySource === "ec-point" ? CKA.EC_POINT : CKA.VALUE;
    const value = getAttributes(mod, session, pub, [attr]).get(attr);
    if (!value) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `key '${label}' has no readable public key value`,
      );
    }
    raw = spec.publicKeySource === "ec-point" ? ecPointRaw(value, spec, label) : value.slice();
    if (raw.length !== spec.publicKeyLength) {
      throw new KeyUnusableError(
        label,
        "unreadable-public-key",
        `key '${label}' (${spec.name}): public key is ${raw.length} bytes, expected ${spec.publicKeyLength}`,
      );
    }
  }
  return {
    publicKeyRaw: raw,
    publicKeySpki: spec.spkiAlgorithm ? spki(spec.spkiAlgorithm, raw) : undefined,
  };
}

// CKA_EC_POINT is a DER OCTET STRING per the standard; some modules store the bare point.
function ecPointRaw(value: Uint8Array, spec: KeyTypeSpec, label: string): Uint8Array {
  const unwrapped = unwrapOctetString(value);
  if (unwrapped && unwrapped.length === spec.publicKeyLength) return unwrapped.slice();
  if (value.length === spec.publicKeyLength) return value.slice();
  throw new KeyUnusableError(
    label,
    "unreadable-public-key",
    `key '${label}': CKA_EC_POINT of ${value.length} bytes is not a ${spec.name} point`,
  );
}

/**
 * SHA-256 of the SPKI (or of the raw key where no SPKI exists), hex.
 *
 * @example
 * ```ts
 * import type { SigningKey } from "./token.ts";
 * declare const key: SigningKey;
 * console.log(`${key.label} ${fingerprint(key)}`);
 * ```
 */
export function fingerprint(key: PublicKey): string {
  return createHash("sha256").update(key.publicKeySpki ?? key.publicKeyRaw).digest("hex");
}
