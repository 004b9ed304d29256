/**
 * The key cache against SoftHSM2 with other threads of the process copying the same key: a
 * lookup counts the private keys with the key's label on the token, and another thread's working
 * copy that is still being made (a session object whose CKA_TOKEN is not yet false) must never
 * count as a second key. A second key really made on the token with the same label is still
 * refused.
 */
import assert from "node:assert/strict";
import {
  makeKeyWithPkcs11Tool,
  makeTestToken,
  openTestToken,
  testTokenPin,
  withLoggedInToken,
} from "../../tests/support/token.ts";
import { KeyUnusableError } from "./errors.ts";
import type { LookupOrder } from "../../tests/support/key_lookup_worker.ts";
import { lookUpAgainAndAgain, type LookupReport } from "../../tests/support/key_lookups.ts";

const WORKER = new URL("../../tests/support/key_lookup_worker.ts", import.meta.url);
/** Lookups per thread: a thousand overlap other threads' copies many times over. */
const ROUNDS = 1_000;

/** Runs `rounds` lookups of `label` in a new Worker; resolves with what it saw. */
function lookUpInWorker(order: LookupOrder): Promise<LookupReport> {
  const worker = new Worker(WORKER, { type: "module" });
  const report = new Promise<LookupReport>((resolve, reject) => {
    worker.onmessage = (e: MessageEvent<LookupReport>) => resolve(e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(e.message));
    };
  }).finally(() => worker.terminate());
  worker.postMessage(order);
  return report;
}

Deno.test({
  name:
    "key cache: lookups in three threads, each dropping and copying the key again and again, never see another thread's copy as a second key",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const made = await makeTestToken({ keys: { k1: "ec-p256" } });
    const token = openTestToken(made);
    try {
      await token.login(testTokenPin(made));
      const order = {
        token: {
          modulePath: made.modulePath,
          tokenLabel: made.tokenLabel,
          copyLock: token.copyLock,
        },
        label: "k1",
        rounds: ROUNDS,
      };
      const workers = [lookUpInWorker(order), lookUpInWorker(order)];
      const here = await lookUpAgainAndAgain(token, "k1", ROUNDS);
      const seen = [here, ...await Promise.all(workers)];
      const failures = seen.flatMap((s) => s.failures);
      assert.deepEqual(failures.slice(0, 5), [], `${failures.length} lookups failed`);
      assert.deepEqual(seen.map((s) => s.lookups), [ROUNDS, ROUNDS, ROUNDS]);
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});

Deno.test({
  name:
    "key cache: a second private key really made on the token with the label is refused at every lookup",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ k1: "ec-p256" }, async (token, made) => {
      assert.ok(await token.key("k1"));
      await makeKeyWithPkcs11Tool(made, "k1");
      for (let i = 0; i < 20; i++) {
        token.refreshKeys();
        await assert.rejects(
          token.key("k1"),
          (err: KeyUnusableError) =>
            err instanceof KeyUnusableError && err.reason === "duplicate-label" &&
            /^2 private keys/.test(err.message),
        );
      }
    }),
});
