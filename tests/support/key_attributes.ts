/**
 * A token object's boolean attributes as the module reports them (C_GetAttributeValue), for tests
 * that check what `svcd token` made, independent of how any tool prints them.
 */
import { CKA, CKO, loadModule, ulongBytes } from "../../ffi/pkcs11/mod.ts";
import {
  findObjects,
  findSlotByLabel,
  getAttributes,
  openSession,
  utf8,
} from "../../lib/token/mod.ts";
import { openTestToken, type TestToken, testTokenPin } from "./token.ts";

/** The object classes a key label can name. */
export type KeyObjectClass = "private" | "public" | "secret";

const CLASS = { private: CKO.PRIVATE_KEY, public: CKO.PUBLIC_KEY, secret: CKO.SECRET_KEY };

/**
 * The values of the boolean attributes `types` of the one token object of class `cls` labelled
 * `label`, after a login (private objects are invisible before it). Throws unless there is exactly
 * one such object, or when an attribute is absent or not one byte.
 */
export async function readBooleanAttributes(
  t: TestToken,
  label: string,
  cls: KeyObjectClass,
  types: number[],
): Promise<Map<number, boolean>> {
  const token = openTestToken(t);
  try {
    await token.login(testTokenPin(t));
    const mod = loadModule(t.modulePath);
    const session = openSession(mod, findSlotByLabel(mod, t.tokenLabel));
    try {
      const found = findObjects(mod, session, [
        { type: CKA.CLASS, value: ulongBytes(CLASS[cls]) },
        { type: CKA.LABEL, value: utf8(label) },
      ]);
      if (found.length !== 1) throw new Error(`${found.length} ${cls} objects labelled ${label}`);
      const values = getAttributes(mod, session, found[0], types);
      return new Map(types.map((type) => [type, asBoolean(type, values.get(type))]));
    } finally {
      mod.fn.C_CloseSession(session);
    }
  } finally {
    token.close();
  }
}

function asBoolean(type: number, value: Uint8Array | null | undefined): boolean {
  if (!value || value.length !== 1) {
    throw new Error(
      `attribute 0x${type.toString(16)} is not a CK_BBOOL (${value?.length ?? "absent"})`,
    );
  }
  return value[0] !== 0;
}
