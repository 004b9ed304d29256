/**
 * `svcd token keygen|list|selftest` with post-quantum and composite keys: on a module that
 * offers them (svcmod) they are made, listed with their mechanism, and pass the deep self-test with
 * an independent check; on one that does not (SoftHSM2) keygen says so and which types it can make.
 */
import assert from "node:assert/strict";
import { makeTestToken, runTokenCli } from "../support/token.ts";

const PQ: Record<string, string> = {
  "pq-44": "ml-dsa-44",
  "pq-65": "ml-dsa-65",
  "pq-87": "ml-dsa-87",
  "pq-composite": "composite-mldsa65-ed25519",
};
const MECHANISM: Record<string, string> = {
  "ml-dsa-44": "CKM_ML_DSA",
  "ml-dsa-65": "CKM_ML_DSA",
  "ml-dsa-87": "CKM_ML_DSA",
  "composite-mldsa65-ed25519": "CKM_COMPOSITE_MLDSA65_ED25519",
};

Deno.test("token CLI: ML-DSA and composite keys through keygen, list and selftest", async () => {
  const token = await makeTestToken({ keys: {} });
  const common = ["--module", token.modulePath, "--token", token.tokenLabel];
  try {
    const offered = token.module.name === "svcmod";
    for (const [label, type] of Object.entries(PQ)) {
      const r = await runTokenCli(
        ["keygen", ...common, "--key-label", label, "--key-type", type],
        token.env,
      );
      if (!offered) {
        assert.equal(r.code, 3, r.text);
        assert.match(r.stderr, /does not offer .*use one of: ec-p256/);
        continue;
      }
      assert.equal(r.code, 0, r.text);
    }
    if (!offered) return;
    const list = await runTokenCli(["list", ...common], token.env);
    assert.equal(list.code, 0, list.text);
    for (const [label, type] of Object.entries(PQ)) {
      assert.match(
        list.stdout,
        new RegExp(`^${label}\\t${type}\\t${MECHANISM[type]}\\tsha256:[0-9a-f]{64}$`, "m"),
      );
    }
    const selftest = await runTokenCli(["selftest", ...common], token.env);
    assert.equal(selftest.code, 0, selftest.text);
    for (const [label, type] of Object.entries(PQ)) {
      const line = selftest.stdout.split("\n").find((l) => l.split("\t")[1] === label);
      assert.ok(line, `no selftest line for ${label}`);
      assert.match(line, /^ok\t/);
      assert.match(
        line,
        type.startsWith("composite")
          ? /@noble\/post-quantum \+ WebCrypto Ed25519 verify ok/
          : /@noble\/post-quantum verify ok/,
      );
    }
  } finally {
    await token.cleanup();
  }
});
