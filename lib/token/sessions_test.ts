/**
 * signOnce and signOnceSync against SoftHSM2: a first buffer too small for the signature is grown
 * once (CKR_BUFFER_TOO_SMALL leaves the operation active), and the signature verifies independently.
 */
import assert from "node:assert/strict";
import { CKA, CKM, CKO, loadModule, ulongBytes } from "../../ffi/pkcs11/mod.ts";
import { makeTestToken, openTestToken, testTokenPin } from "../../tests/support/token.ts";
import { verifyIndependently } from "../token_admin/mod.ts";
import { findObjects, openSession, signOnce, signOnceSync, utf8 } from "./sessions.ts";

Deno.test({
  name: "signOnce and signOnceSync: a too-small first buffer is grown once, not an error",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken({ keys: { "k-ed": "ed25519" } });
    const token = openTestToken(made);
    try {
      await token.login(testTokenPin(made));
      const key = (await token.key("k-ed"))!;
      const mod = loadModule(made.modulePath);
      const session = openSession(mod, token.slotId);
      try {
        const [handle] = findObjects(mod, session, [
          { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
          { type: CKA.LABEL, value: utf8("k-ed") },
        ]);
        const message = utf8("grown once");
        const eddsa = { mechanism: CKM.EDDSA };
        const signatures = [
          await signOnce(mod, session, handle, eddsa, message, 1),
          signOnceSync(mod, session, handle, eddsa, message, 1),
        ];
        for (const sig of signatures) {
          assert.equal(sig.length, 64);
          assert.ok((await verifyIndependently(key, message, sig)).ok);
        }
      } finally {
        mod.fn.C_CloseSession(session);
      }
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
