/**
 * The error every PKCS#11 failure becomes: it names the function and the return code by name.
 *
 * @example
 * ```ts
 * import { Pkcs11Error } from "./errors.ts";
 * new Pkcs11Error("C_Sign", 0xc1).message; // "C_Sign: CKR_SIGNATURE_LEN_RANGE (0xc1)"
 * ```
 */
import { CKR, ckrName } from "./constants.ts";
import type { Pkcs11FunctionName } from "./functions.ts";

/** A PKCS#11 call returned something other than CKR_OK. Example: `err.code === "CKR_PIN_INCORRECT"`. */
export class Pkcs11Error extends Error {
  /** The PKCS#11 function, e.g. "C_Sign": a name of the function table, never free text. */
  readonly fn: Pkcs11FunctionName;
  /** The CK_RV it returned. */
  readonly rv: number;
  /** The CK_RV by name, e.g. "CKR_SIGNATURE_LEN_RANGE". */
  readonly code: string;

  constructor(fn: Pkcs11FunctionName, rv: number, hint?: string) {
    const code = ckrName(rv);
    super(`${fn}: ${code} (0x${rv.toString(16)})${hint ? `: ${hint}` : ""}`);
    this.name = "Pkcs11Error";
    this.fn = fn;
    this.rv = rv;
    this.code = code;
  }
}

/** Throws a Pkcs11Error unless `rv` is CKR_OK. Example: `check("C_Login", rv)`. */
export function check(fn: Pkcs11FunctionName, rv: number, hint?: string): void {
  if (rv !== CKR.OK) throw new Pkcs11Error(fn, rv, hint);
}
