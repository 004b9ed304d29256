/**
 * Loading: C_GetInterface("PKCS 11") when the module exports it, else C_GetFunctionList; the
 * table's own version decides which entries exist.
 */
import assert from "node:assert/strict";
import { entryCount, loadModule } from "../../ffi/pkcs11/mod.ts";
import { makeTestToken, openTestToken } from "../support/token.ts";

Deno.test({
  name:
    "module: loaded through C_GetInterface when exported, else C_GetFunctionList; table version read",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken();
    const token = openTestToken(made);
    try {
      // Whether the library exports C_GetInterface, asked of the dynamic linker directly.
      const probe = Deno.dlopen(made.modulePath, {
        C_GetInterface: {
          parameters: ["buffer", "pointer", "buffer", "u64"],
          result: "u32",
          optional: true,
        },
      });
      const exported = probe.symbols.C_GetInterface !== null;
      probe.close();
      const mod = loadModule(made.modulePath);
      assert.equal(mod.via, exported ? "C_GetInterface" : "C_GetFunctionList");
      const info = token.info();
      assert.equal(
        info.functionTableVersion,
        `${mod.tableVersion.major}.${mod.tableVersion.minor}`,
      );
      assert.equal(mod.tableEntries, entryCount(mod.tableVersion));
      assert.equal(mod.provides("C_GetInterface"), mod.tableVersion.major >= 3);
      assert.equal(mod.provides("C_VerifySignature"), mod.tableEntries === 104);
      console.log(
        `${made.module.name}: ${mod.via}, table ${info.functionTableVersion} (${mod.tableEntries} entries), ` +
          `C_GetInfo says ${info.cryptokiVersion}`,
      );
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
