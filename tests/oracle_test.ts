/** The independent oracle itself is checked against the draft's published composite vectors. */
import assert from "node:assert/strict";
import { verifyIndependently } from "./support/oracle.ts";
import { readSharedJson } from "./support/testdata.ts";

const vectors = await readSharedJson<
  { m: string; tests: Array<{ tcId: string; pk: string; s: string }> }
>("composite-sigs-draft19.json");
const message = Uint8Array.fromBase64(vectors.m);
const TYPES: Record<string, string> = {
  "id-ML-DSA-65": "ml-dsa-65",
  "id-MLDSA65-Ed25519-SHA512": "composite-mldsa65-ed25519",
};

for (const t of vectors.tests) {
  const keyType = TYPES[t.tcId];
  Deno.test(`oracle: ${t.tcId} published vector verifies, a flipped bit does not`, async () => {
    const raw = Uint8Array.fromBase64(t.pk);
    const sig = Uint8Array.fromBase64(t.s);
    assert.ok(await verifyIndependently(keyType, { raw }, message, sig));
    for (const at of [0, sig.length - 1]) {
      const bad = sig.slice();
      bad[at] ^= 1;
      assert.equal(await verifyIndependently(keyType, { raw }, message, bad), false);
    }
    assert.equal(await verifyIndependently(keyType, { raw }, message.subarray(1), sig), false);
  });
}
