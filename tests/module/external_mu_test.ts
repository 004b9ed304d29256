/**
 * CKM_ML_DSA_EXTERNAL_MU (0x403c) of the project's PKCS#11 test module, through the project's
 * binding: signing μ gives a pure ML-DSA signature over the message μ was made from, which
 * @noble/post-quantum verifies over the message (not over μ); the deterministic variant equals the
 * module's own CKM_ML_DSA signature over the message, byte for byte.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import {
  CKA,
  CKF_MECHANISM,
  CKH,
  CKM,
  CKR,
  decodeMechanismInfo,
  encodeMechanism,
  encodeSignAdditionalContext,
  SIZE,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { getAttributes, signOnce, verifyOnce } from "../../lib/token/mod.ts";
import { generateKeyPair } from "../../lib/token_admin/mod.ts";
import { openSvcmod } from "./fixture.ts";

const SETS = [
  { set: 1, name: "ML-DSA-44", noble: ml_dsa44, sig: 2420 },
  { set: 2, name: "ML-DSA-65", noble: ml_dsa65, sig: 3309 },
  { set: 3, name: "ML-DSA-87", noble: ml_dsa87, sig: 4627 },
] as const;

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

/** μ = SHAKE256(SHAKE256(pk, 64) ‖ 0x00 ‖ 0x00 ‖ M, 64): empty context, made with node:crypto. */
function mu(publicKey: Uint8Array, message: Uint8Array): Uint8Array {
  const tr = createHash("shake256", { outputLength: 64 }).update(publicKey).digest();
  return new Uint8Array(
    createHash("shake256", { outputLength: 64 }).update(tr).update(Uint8Array.of(0, 0))
      .update(message).digest(),
  );
}

const byMu = (hedge: number) => ({
  mechanism: CKM.ML_DSA_EXTERNAL_MU,
  parameter: encodeSignAdditionalContext(hedge),
});

Deno.test("svcmod CKM_ML_DSA_EXTERNAL_MU: a signature over μ is one over the message", async (t) => {
  const tok = await openSvcmod();
  try {
    await t.step("offered for signing and verifying", () => {
      const buf = new Uint8Array(SIZE.CK_MECHANISM_INFO);
      assert.equal(tok.mod.fn.C_GetMechanismInfo(0, CKM.ML_DSA_EXTERNAL_MU, buf), CKR.OK);
      const { flags } = decodeMechanismInfo(buf);
      assert.ok(flags & CKF_MECHANISM.SIGN && flags & CKF_MECHANISM.VERIFY);
    });
    for (const { set, name, noble, sig: sigLen } of SETS) {
      const [pub, priv] = await generateKeyPair(
        tok.mod,
        tok.session,
        { mechanism: CKM.ML_DSA_KEY_PAIR_GEN },
        [{ type: CKA.PARAMETER_SET, value: ulongBytes(set) }],
        [],
      );
      const pk = getAttributes(tok.mod, tok.session, pub, [CKA.VALUE]).get(CKA.VALUE)!;

      await t.step(`${name}: deterministic over μ = CKM_ML_DSA over the message`, async () => {
        for (const message of [new Uint8Array(0), random(1), random(5000)]) {
          const det = CKH.DETERMINISTIC_REQUIRED;
          const overMu = await signOnce(tok.mod, tok.session, priv, byMu(det), mu(pk, message), 1);
          const overMessage = await signOnce(
            tok.mod,
            tok.session,
            priv,
            { mechanism: CKM.ML_DSA, parameter: encodeSignAdditionalContext(det) },
            message,
            sigLen,
          );
          assert.equal(overMu.length, sigLen);
          assert.deepEqual(overMu, overMessage);
          assert.ok(noble.verify(overMu, message, pk));
        }
      });

      await t.step(`${name}: hedged over μ verifies over the message, not another`, async () => {
        const message = random(300);
        const sig = await signOnce(
          tok.mod,
          tok.session,
          priv,
          byMu(CKH.HEDGE_PREFERRED),
          mu(pk, message),
          sigLen,
        );
        assert.ok(noble.verify(sig, message, pk));
        assert.equal(noble.verify(sig, random(300), pk), false);
        assert.equal(noble.verify(sig, message, pk, { context: Uint8Array.of(1) }), false);
        const check = (m: Uint8Array) =>
          verifyOnce(tok.mod, tok.session, pub, byMu(CKH.HEDGE_PREFERRED), m, sig);
        assert.ok(await check(mu(pk, message)));
        assert.equal(await check(mu(pk, random(300))), false);
      });
    }

    await t.step("μ is 64 bytes; a context is refused (it belongs in μ)", async () => {
      const [, priv] = await generateKeyPair(
        tok.mod,
        tok.session,
        { mechanism: CKM.ML_DSA_KEY_PAIR_GEN },
        [{ type: CKA.PARAMETER_SET, value: ulongBytes(2) }],
        [],
      );
      for (const n of [0, 32, 63, 65]) {
        await assert.rejects(
          signOnce(tok.mod, tok.session, priv, byMu(0), random(n), 3309),
          /CKR_DATA_LEN_RANGE/,
        );
      }
      const withContext = encodeMechanism(
        CKM.ML_DSA_EXTERNAL_MU,
        encodeSignAdditionalContext(0, Uint8Array.of(7)),
      );
      assert.equal(
        tok.mod.fn.C_SignInit(tok.session, withContext.bytes, priv),
        CKR.MECHANISM_PARAM_INVALID,
      );
    });
  } finally {
    await tok.close();
  }
});
