/**
 * The pool against the module's own session limit (no fake): with a small secure heap the test
 * module answers CKR_HOST_MEMORY after a few sessions; the pool must stop there and queue callers.
 * A module with no limit below the load (SoftHSM) has nothing to show, which is logged.
 */
import assert from "node:assert/strict";
import { verifyIndependently } from "../../lib/token_admin/mod.ts";
import { watchSessionUse } from "../support/pkcs11_sessions.ts";
import { makeTestToken, openTestToken, testTokenPin } from "../support/token.ts";

Deno.test({
  name:
    "pool: a real module refusal (CKR_HOST_MEMORY) caps the pool; 64 callers wait and all succeed",
  sanitizeResources: false,
  fn: async () => {
    // 128 KiB of secure heap at ~24 KiB per session: a handful of sessions on svcmod.
    const made = await makeTestToken({ keys: { "k-ed": "ed25519" }, secureHeapKb: 128 });
    const token = openTestToken(made);
    try {
      await token.login(testTokenPin(made));
      const watch = watchSessionUse(made.modulePath);
      const key = (await token.key("k-ed"))!;
      const messages = Array.from({ length: 64 }, (_, i) => new TextEncoder().encode(`m${i}`));
      const pending = messages.map((m) => token.sign(key, m));
      const queued = token.poolStats();
      const sigs = await Promise.all(pending);
      for (const [i, { signature: sig }] of sigs.entries()) {
        assert.ok((await verifyIndependently(key, messages[i], sig)).ok);
      }
      assert.equal(watch.stats().overlaps, 0);
      if (queued.cap >= 64) {
        console.log(
          `${made.module.name} opened ${queued.size} sessions without refusing; no cap to observe`,
        );
        return;
      }
      assert.equal(queued.size, queued.cap);
      assert.equal(queued.waiting, 64 - queued.size);
      assert.equal(token.poolStats().size, queued.cap, "the pool grew past the module's refusal");
      console.log(
        `${made.module.name} refused session ${queued.cap + 1}; the pool stayed at ${queued.cap}`,
      );
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
