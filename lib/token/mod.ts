/**
 * The token as the daemon uses it: open a PKCS#11 token by label, log in once from the PIN
 * credential, sign, verify and MAC through a session pool (token.ts). Operator administration is
 * lib/token_admin; the seams tests use are testing.ts (not re-exported here).
 *
 * @example
 * ```ts
 * import { Token } from "./mod.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * ```
 */
export { Token } from "./token.ts";
export type { SigningKey, TokenInfo, TokenOptions } from "./token.ts";
export { listSlots } from "./slots.ts";
export { fingerprint, type PublicKey } from "./public_key.ts";
export { MechanismCatalogue } from "./mechanisms.ts";
export { AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL, DAEMON_KEY_LABELS } from "./labels.ts";
export {
  CredentialError,
  isKeyProblem,
  isStaleHandle,
  isTokenDead,
  KeyUnusableError,
  type KeyUnusableReason,
  MechanismUnavailableError,
  Pkcs11Error,
} from "./errors.ts";
export { DEFAULT_MODULE, DEFAULT_TOKEN_LABEL } from "./defaults.ts";
export {
  decryptPinCredential,
  loadPin,
  PIN_CREDENTIAL_NAME,
  type PinSource,
  readPinCredential,
} from "./credential.ts";
export {
  COMPOSITE_MLDSA65_ED25519_LABEL,
  isKeyTypeName,
  KEY_TYPE_NAMES,
  KEY_TYPES,
} from "./key_types.ts";
export type { KeyTypeName, KeyTypeSpec } from "./key_types.ts";
export type { PoolStats } from "./pool.ts";
