/**
 * A process that called into the module on the runtime's threads exits with its own status. Modules
 * built on OpenSSL 3 register an atexit cleanup that, racing the runtime's threads as they end,
 * freed the same memory twice: `deno test` aborted after its last test in about one run of thirty
 * (ffi/pkcs11/module.ts keepOpenSslStateUntilExit). Without the fix 13 of 160 children aborted
 * here (both modules), so 60 catch it in about 99 runs of 100; with it none can.
 */
import assert from "node:assert/strict";
import { makeTestToken, type TestToken } from "../support/token.ts";

const CHILDREN = 60;
const SIGNATURES = 512;
const CHILD = new URL("../support/sign_then_exit.ts", import.meta.url).pathname;

Deno.test({
  name: "module: a process that signed on the runtime's threads exits 0, never aborts at exit",
  fn: async () => {
    // Two lanes, enough to keep a two-core machine busy, each with its own token: SoftHSM2
    // answers CKR_GENERAL_ERROR to a C_Login while another process logs in to the same token.
    const tokens = [await makeTestToken({ keys: { k: "ec-p256" } })];
    try {
      tokens.push(await makeTestToken({ keys: { k: "ec-p256" } }));
      const failures: string[] = [];
      const lane = async (made: TestToken) => {
        const env = {
          SVCD_TEST_TOKEN: JSON.stringify(made),
          SVCD_TEST_SIGNATURES: `${SIGNATURES}`,
        };
        for (let i = 0; i < CHILDREN / 2; i++) {
          const out = await new Deno.Command(Deno.execPath(), {
            args: ["run", "-A", CHILD],
            env,
            stdout: "piped",
            stderr: "piped",
          }).output();
          if (out.code !== 0) {
            failures.push(`exit ${out.code}: ${new TextDecoder().decode(out.stderr).trim()}`);
          }
        }
      };
      await Promise.all(tokens.map(lane));
      assert.deepEqual(failures, [], `${failures.length} of ${CHILDREN} children failed`);
    } finally {
      for (const made of tokens) await made.cleanup();
    }
  },
});
