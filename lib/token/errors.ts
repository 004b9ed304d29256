/**
 * Errors of the token layer and the test for "this token is gone: stop serving".
 *
 * @example
 * ```ts
 * import { isTokenDead, Pkcs11Error } from "./errors.ts";
 * isTokenDead(new Pkcs11Error("C_Sign", 0x32)); // true: CKR_DEVICE_REMOVED
 * ```
 */
import { CKR, Pkcs11Error } from "../../ffi/pkcs11/mod.ts";

export { Pkcs11Error };

/**
 * The PIN credential is missing or unreadable; no login was attempted.
 *
 * @example
 * ```ts
 * throw new CredentialError("no svc-pin in $CREDENTIALS_DIRECTORY; set LoadCredentialEncrypted=");
 * ```
 */
export class CredentialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialError";
  }
}

/**
 * The module does not offer a mechanism a key type needs (C_GetMechanismInfo said so).
 *
 * @example
 * ```ts
 * throw new MechanismUnavailableError("the module does not offer CKM_ML_DSA");
 * ```
 */
export class MechanismUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MechanismUnavailableError";
  }
}

/** Why a key on the token cannot be used by svcd. */
export type KeyUnusableReason =
  | "unsupported-type"
  | "missing-public-key"
  | "unreadable-public-key"
  | "duplicate-label"
  | "gone";

/**
 * A key exists but svcd cannot use it (its type, its public half, its label); the token is fine.
 * Callers that list keys report it for that key and go on; any other error is not theirs to hide.
 *
 * @example
 * ```ts
 * import type { Token } from "./token.ts";
 * declare const token: Token;
 * try {
 *   await token.key("web");
 * } catch (err) {
 *   if (err instanceof KeyUnusableError) console.error(err.label, err.reason, err.message);
 * }
 * ```
 */
export class KeyUnusableError extends Error {
  override name = "KeyUnusableError";
  constructor(readonly label: string, readonly reason: KeyUnusableReason, message: string) {
    super(message);
  }
}

/**
 * True for the errors that concern one key and leave the token usable: a key svcd cannot use, or a
 * key type whose mechanism the module does not offer.
 *
 * @example
 * ```ts
 * import type { SigningKey, Token } from "./token.ts";
 * declare const token: Token;
 * const keys: (SigningKey | undefined)[] = [];
 * try {
 *   keys.push(await token.key("web"));
 * } catch (err) {
 *   if (!isKeyProblem(err)) throw err;
 * }
 * ```
 */
export function isKeyProblem(err: unknown): err is KeyUnusableError | MechanismUnavailableError {
  return err instanceof KeyUnusableError || err instanceof MechanismUnavailableError;
}

const STALE_HANDLE = new Set<number>([CKR.KEY_HANDLE_INVALID, CKR.OBJECT_HANDLE_INVALID]);

/**
 * True when a cached object handle no longer names the object (it was destroyed, or the module
 * renumbered it): the handle is forgotten and looked up again on the next use.
 *
 * @example
 * ```ts
 * isStaleHandle(new Pkcs11Error("C_SignInit", 0x82)); // true: CKR_OBJECT_HANDLE_INVALID
 * ```
 */
export function isStaleHandle(err: unknown): boolean {
  return err instanceof Pkcs11Error && STALE_HANDLE.has(err.rv);
}

// CKR_DEVICE_ERROR ("some problem has occurred with the token") and CKR_GENERAL_ERROR ("some
// horrible, unrecoverable error"; PKCS#11 says to finalize) leave the module in a state nothing in
// this process can repair: a restart is the only recovery, as for a removed token. A failure that
// ends only its own operation (CKR_FUNCTION_FAILED and the rest) fails that request alone.
const DEAD = new Set<number>([
  CKR.DEVICE_REMOVED,
  CKR.DEVICE_ERROR,
  CKR.GENERAL_ERROR,
  CKR.TOKEN_NOT_PRESENT,
  CKR.USER_NOT_LOGGED_IN,
  CKR.SESSION_HANDLE_INVALID,
  CKR.SESSION_CLOSED,
  CKR.CRYPTOKI_NOT_INITIALIZED,
]);

/**
 * True when an error means the token or its login is gone (the daemon exits and is restarted,
 * it does not repair in place). The token reports it once through `Token.onDead`; routes use this
 * only to answer 503.
 *
 * @example
 * ```ts
 * const status = isTokenDead(new Pkcs11Error("C_Sign", 0x32)) ? 503 : 500; // 503
 * ```
 */
export function isTokenDead(err: unknown): err is Pkcs11Error {
  return err instanceof Pkcs11Error && DEAD.has(err.rv);
}

/** What to do about a refused C_Login, by its CK_RV; undefined where there is nothing to add. */
export function loginHint(rv: number): string | undefined {
  switch (rv) {
    case CKR.PIN_INCORRECT:
      return "the PIN in the credential does not match the token's user PIN; not retried " +
        "(the role locks after five failures) — recreate the credential with the token it belongs to";
    case CKR.PIN_LOCKED:
      return "the user PIN is locked after repeated failures; the token must be re-initialised " +
        "(svcd token init) and its keys re-created";
    case CKR.USER_PIN_NOT_INITIALIZED:
      return "the token has no user PIN yet; run svcd token init";
    default:
      return undefined;
  }
}
