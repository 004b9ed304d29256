import assert from "node:assert/strict";
import { CKR } from "./constants.ts";
import { check, Pkcs11Error } from "./errors.ts";

Deno.test("Pkcs11Error names the function and the return code; the function is a table name", () => {
  const err = new Pkcs11Error("C_SignInit", CKR.KEY_HANDLE_INVALID, "look the key up again");
  assert.equal(err.fn, "C_SignInit");
  assert.equal(err.code, "CKR_KEY_HANDLE_INVALID");
  assert.equal(err.message, "C_SignInit: CKR_KEY_HANDLE_INVALID (0x60): look the key up again");
  assert.throws(() => check("C_Login", CKR.PIN_INCORRECT), /^Pkcs11Error: C_Login: CKR_PIN/);
  // A typo in a function name is a type error, not a message nobody can search for.
  // @ts-expect-error "C_Sing" is not an entry of the function table
  assert.equal(new Pkcs11Error("C_Sing", CKR.OK).fn, "C_Sing");
});
