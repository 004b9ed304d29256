/**
 * The key cache against SoftHSM2 with other threads of the process copying the same key: a
 * lookup counts the private keys with the key's label on the token, and another thread's working
 * copy that is still being made (a session object whose CKA_TOKEN is not yet false) must never
 * count as a second key. A second key really made on the token with the same label is still
 * refused.
 */
import assert from "node:assert/strict";
import { makeTestToken, openTestToken, testTokenPin } from "../../tests/support/token.ts";
import type { LookupOrder, LookupReport } from "../../tests/support/key_lookup_worker.ts";
import type { Token } from "./token.ts";

const WORKER = new URL("../../tests/support/key_lookup_worker.ts", import.meta.url);
/** Lookups per thread: a few thousand overlap other threads' copies many times over. */
const ROUNDS = 2_000;

/** Runs `rounds` lookups of `label` in a new Worker; resolves with what it saw. */
function lookUpInWorker(order: LookupOrder): { report: Promise<LookupReport>; stop(): void } {
  const worker = new Worker(WORKER, { type: "module" });
  const report = new Promise<LookupReport>((resolve, reject) => {
    worker.onmessage = (e: MessageEvent<LookupReport>) => resolve(e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(e.message));
    };
  }).finally(() => worker.terminate());
  worker.postMessage(order);
  return { report, stop: () => worker.postMessage("stop") };
}

/** The same lookups in this isolate, on `token`. */
async function lookUpHere(token: Token, label: string, rounds: number): Promise<LookupReport> {
  const seen: LookupReport = { lookups: 0, failures: [] };
  for (let i = 0; i < rounds; i++) {
    token.refreshKeys();
    try {
      if (!await token.key(label)) seen.failures.push(`'${label}' not found`);
    } catch (err) {
      seen.failures.push((err as Error).message);
    }
    seen.lookups++;
  }
  return seen;
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
      const here = await lookUpHere(token, "k1", ROUNDS);
      const seen = [here, ...await Promise.all(workers.map((w) => w.report))];
      const failures = seen.flatMap((s) => s.failures);
      assert.deepEqual(failures.slice(0, 5), [], `${failures.length} lookups failed`);
      assert.deepEqual(seen.map((s) => s.lookups), [ROUNDS, ROUNDS, ROUNDS]);
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
