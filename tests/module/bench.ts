/**
 * Raw ML-DSA-65 sign and verify per second: svcmod through its PKCS#11 table (synchronous FFI
 * calls, one session, one thread) beside @noble/post-quantum in the same process and run.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A tests/module/bench.ts [seconds-per-figure]
 * ```
 */
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import { CKA, CKM, CKR, encodeMechanism, ulongBytes } from "../../ffi/pkcs11/mod.ts";
import { getAttributes } from "../../lib/token/mod.ts";
import { generateKeyPair } from "../../lib/token_admin/mod.ts";
import { openSvcmod } from "./fixture.ts";

const seconds = Number(Deno.args[0] ?? "3");
const SIG = 3309;

/** Runs `op` repeatedly for about `seconds` and returns operations per second. */
function rate(op: () => void): number {
  op(); // warm-up
  const start = performance.now();
  let n = 0;
  while (performance.now() - start < seconds * 1000) {
    op();
    n++;
  }
  return n / ((performance.now() - start) / 1000);
}

const tok = await openSvcmod();
try {
  const { mod, session } = tok;
  const seed = crypto.getRandomValues(new Uint8Array(32));
  const [pub, priv] = await generateKeyPair(
    mod,
    session,
    { mechanism: CKM.ML_DSA_KEY_PAIR_GEN },
    [{ type: CKA.PARAMETER_SET, value: ulongBytes(2) }],
    [{ type: CKA.SEED, value: seed }],
  );
  const pk = getAttributes(mod, session, pub, [CKA.VALUE]).get(CKA.VALUE)!;
  const { secretKey } = ml_dsa65.keygen(seed);
  const msg = new TextEncoder().encode("a 32-byte message for the bench!");
  const mech = encodeMechanism(CKM.ML_DSA); // hedge preferred, empty context
  const sig = new Uint8Array(SIG);
  const len = new BigUint64Array(1);
  const lenBytes = new Uint8Array(len.buffer);
  const check = (what: string, rv: number) => {
    if (rv !== CKR.OK) throw new Error(`${what}: 0x${rv.toString(16)}`);
  };
  const moduleSign = () => {
    check("C_SignInit", mod.fn.C_SignInit(session, mech.bytes, priv));
    len[0] = BigInt(SIG);
    check("C_Sign", mod.fn.C_Sign(session, msg, msg.length, sig, lenBytes));
  };
  moduleSign();
  const moduleSig = sig.slice();
  const moduleVerify = () => {
    check("C_VerifyInit", mod.fn.C_VerifyInit(session, mech.bytes, pub));
    check("C_Verify", mod.fn.C_Verify(session, msg, msg.length, moduleSig, SIG));
  };
  const nobleSig = ml_dsa65.sign(msg, secretKey);
  if (!ml_dsa65.verify(moduleSig, msg, pk)) throw new Error("noble rejects the module's signature");

  const figures = {
    "svcmod C_Sign": rate(moduleSign),
    "svcmod C_Verify": rate(moduleVerify),
    "noble sign": rate(() => ml_dsa65.sign(msg, secretKey)),
    "noble verify": rate(() => ml_dsa65.verify(nobleSig, msg, pk)),
  };
  console.log(`ML-DSA-65, 32-byte message, one thread, ${seconds} s per figure`);
  for (const [name, perSecond] of Object.entries(figures)) {
    console.log(`${name.padEnd(16)} ${perSecond.toFixed(0).padStart(7)} /s`);
  }
} finally {
  await tok.close();
}
