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

/** The PIN credential is missing or unreadable; no login was attempted. */
export class CredentialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CredentialError";
  }
}

/** The module does not offer a mechanism a key type needs (C_GetMechanismInfo said so). */
export class MechanismUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MechanismUnavailableError";
  }
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
 * it does not repair in place). Example: `if (isTokenDead(err)) shutdown(1)`.
 */
export function isTokenDead(err: unknown): boolean {
  return err instanceof Pkcs11Error && DEAD.has(err.rv);
}
