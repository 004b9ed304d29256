/**
 * The client module across fork(), driven by pkcs11-module/build/p11drive (fork mode): a child of
 * an initialised parent is refused until it finalises and initialises again (pkcs11-module/
 * README.md, "Threads and fork"), then signs over connections of its own; the parent signs on in
 * its session after the child has gone. Every signature is checked by libcrypto with the key's
 * public key from /token.
 */
import assert from "node:assert/strict";
import {
  bedPublicPem,
  CLIENT_DRIVER,
  CLIENT_MODULE,
  clientBedTest,
  runOk,
} from "./support/p11client.ts";

clientBedTest(
  "client module: a forked child finalises and initialises again; the parent signs on",
  { "k-ec": "ec-p256" },
  async (bed) => {
    const pem = await bedPublicPem(bed, "k-ec");
    const out = await runOk([CLIENT_DRIVER, "fork", CLIENT_MODULE, "k-ec", pem], bed.env);
    const lines = out.stdout.trim().split("\n");
    assert.deepEqual(lines, [
      "parent sign=0x0 verified=1",
      // C_GetInfo and a call on the inherited session: CKR_CRYPTOKI_NOT_INITIALIZED; the
      // inherited state cannot be initialised over (CKR_FUNCTION_FAILED), only finalised.
      "child getinfo=0x190 signinit=0x190 initialize=0x6 finalize=0x0 initialize=0x0 " +
      "sign=0x0 verified=1",
      "parent after child_exit=0 sign=0x0 verified=1",
    ], out.stdout + out.stderr);
  },
);
