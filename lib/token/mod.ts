/**
 * The token as the daemon uses it: open a PKCS#11 token by label, log in once from the PIN
 * credential, sign, verify and MAC through a session pool, each signature with the name of the
 * mechanism that made it (token.ts). Operator administration is lib/token_admin, which reaches
 * the token through `Token.administration()` and the module and session calls listed last here.
 *
 * @example
 * ```ts
 * import { Token } from "./mod.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * ```
 */
export { Token } from "./token.ts";
export type { Signed, SigningKey, TokenAdministration, TokenInfo, TokenOptions } from "./token.ts";
export type { PoolStats } from "./sessions.ts";
export { CopyLock, CopyLockTimeout } from "./_key_cache.ts";
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
export { AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL, DAEMON_KEY_LABELS } from "./labels.ts";
export {
  decryptPinCredential,
  generatePin,
  isWellFormedPin,
  loadPin,
  PIN_CREDENTIAL_NAME,
  type PinSource,
  readPinCredential,
} from "./credential.ts";
export {
  COMPOSITE_MLDSA65_ED25519_LABEL,
  fingerprint,
  isKeyTypeName,
  KEY_TYPE_NAMES,
  KEY_TYPES,
  type KeyTypeName,
  type KeyTypeSpec,
  type PublicKey,
} from "./key_types.ts";
export {
  DIGEST_LENGTH,
  DIGEST_NAMES,
  digestMechanism,
  type DigestName,
  digestsOfKeyType,
  MechanismCatalogue,
  parseDigestName,
} from "./mechanisms.ts";
export { SLOW_TO_MOVE, WINDOW } from "./sign_placement.ts";
// The module and single calls on one session: for the tooling (lib/token_admin), tests, benches.
export {
  acquireModule,
  findSlotByLabel,
  listSlots,
  readTokenInfo,
  releaseModule,
} from "./module.ts";
export {
  createObject,
  findObjects,
  getAttributes,
  type Handle,
  keepAlive,
  type MechanismChoice,
  openSession,
  signOnce,
  signOnceSync,
  utf8,
  verifyOnce,
} from "./sessions.ts";
