/**
 * ML-DSA-44/65/87 of the project's PKCS#11 test module (svcmod), through the project's binding,
 * checked against @noble/post-quantum: same seed → same public key, deterministic signatures
 * byte-identical, hedged signatures verified both ways, tampering refused, keys sensitive.
 */
import assert from "node:assert/strict";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import {
  boolBytes,
  CKA,
  CKH,
  CKK,
  CKM,
  CKO,
  CKR,
  encodeMechanism,
  encodeSignAdditionalContext,
  encodeTemplate,
  readUlong,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { getAttributes, signOnce, verifyOnce } from "../../lib/token/mod.ts";
import { generateKeyPair } from "../../lib/token_admin/mod.ts";
import { openSvcmod, type SvcmodToken, verifySignatureEntries } from "./fixture.ts";

const SETS = [
  { set: 1, name: "ML-DSA-44", noble: ml_dsa44, sig: 2420 },
  { set: 2, name: "ML-DSA-65", noble: ml_dsa65, sig: 3309 },
  { set: 3, name: "ML-DSA-87", noble: ml_dsa87, sig: 4627 },
] as const;

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

function mldsa(hedge: number, context?: Uint8Array) {
  return { mechanism: CKM.ML_DSA, parameter: encodeSignAdditionalContext(hedge, context) };
}

async function keyFromSeed(t: SvcmodToken, set: number, seed: Uint8Array) {
  return await generateKeyPair(
    t.mod,
    t.session,
    { mechanism: CKM.ML_DSA_KEY_PAIR_GEN },
    [{ type: CKA.PARAMETER_SET, value: ulongBytes(set) }, { type: CKA.LABEL, value: null }],
    [{ type: CKA.SEED, value: seed }],
  );
}

/** Imports a public key with C_CreateObject (session object). */
function importPublic(t: SvcmodToken, set: number, pk: Uint8Array): number {
  const tmpl = encodeTemplate([
    { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
    { type: CKA.KEY_TYPE, value: ulongBytes(CKK.ML_DSA) },
    { type: CKA.PARAMETER_SET, value: ulongBytes(set) },
    { type: CKA.VALUE, value: pk },
  ]);
  const out = new BigUint64Array(1);
  const rv = t.mod.fn.C_CreateObject(t.session, tmpl.bytes, 4, new Uint8Array(out.buffer));
  assert.equal(rv, CKR.OK, `C_CreateObject: 0x${rv.toString(16)}`);
  return Number(out[0]);
}

Deno.test("svcmod ML-DSA through the binding, against noble", async (t) => {
  const tok = await openSvcmod();
  try {
    for (const { set, name, noble, sig: sigLen } of SETS) {
      const seed = random(32);
      const ref = noble.keygen(seed);
      const [pub, priv] = await keyFromSeed(tok, set, seed);

      await t.step(`${name}: CKA_SEED gives noble's public key; private parts stay inside`, () => {
        const a = getAttributes(tok.mod, tok.session, pub, [CKA.VALUE, CKA.PARAMETER_SET]);
        assert.deepEqual(a.get(CKA.VALUE), ref.publicKey);
        assert.equal(readUlong(a.get(CKA.PARAMETER_SET)!), set);
        const p = getAttributes(tok.mod, tok.session, priv, [
          CKA.VALUE,
          CKA.SEED,
          CKA.SENSITIVE,
          CKA.EXTRACTABLE,
          CKA.NEVER_EXTRACTABLE,
          CKA.CLASS,
        ]);
        assert.equal(p.get(CKA.VALUE), null);
        assert.equal(p.get(CKA.SEED), null);
        assert.deepEqual(p.get(CKA.SENSITIVE), boolBytes(true));
        assert.deepEqual(p.get(CKA.EXTRACTABLE), boolBytes(false));
        assert.deepEqual(p.get(CKA.NEVER_EXTRACTABLE), boolBytes(true));
        assert.equal(readUlong(p.get(CKA.CLASS)!), CKO.PRIVATE_KEY);
      });

      await t.step(`${name}: deterministic signatures are byte-identical to noble's`, async () => {
        for (const msg of [new Uint8Array(0), random(1), random(3000)]) {
          for (const ctx of [new Uint8Array(0), random(1), random(255)]) {
            const ours = await signOnce(
              tok.mod,
              tok.session,
              priv,
              mldsa(CKH.DETERMINISTIC_REQUIRED, ctx),
              msg,
              sigLen,
            );
            const theirs = noble.sign(msg, ref.secretKey, { context: ctx, extraEntropy: false });
            assert.deepEqual(ours, theirs);
          }
        }
      });

      await t.step(`${name}: hedged signatures verify both ways`, async () => {
        const msg = random(100), ctx = random(17);
        for (const hedge of [CKH.HEDGE_PREFERRED, CKH.HEDGE_REQUIRED]) {
          const a = await signOnce(tok.mod, tok.session, priv, mldsa(hedge, ctx), msg, sigLen);
          const b = await signOnce(tok.mod, tok.session, priv, mldsa(hedge, ctx), msg, sigLen);
          assert.notDeepEqual(a, b);
          assert.ok(noble.verify(a, msg, ref.publicKey, { context: ctx }));
          assert.ok(noble.verify(b, msg, ref.publicKey, { context: ctx }));
        }
        // No parameter at all: hedge preferred, empty context.
        const plain = await signOnce(tok.mod, tok.session, priv, { mechanism: CKM.ML_DSA }, msg, 1);
        assert.ok(noble.verify(plain, msg, ref.publicKey));
        const theirs = noble.sign(msg, ref.secretKey, { context: ctx });
        assert.ok(await verifyOnce(tok.mod, tok.session, pub, mldsa(0, ctx), msg, theirs));
        // The same through a public key imported with C_CreateObject.
        const imported = importPublic(tok, set, ref.publicKey);
        assert.ok(await verifyOnce(tok.mod, tok.session, imported, mldsa(0, ctx), msg, theirs));
      });

      await t.step(`${name}: a changed byte in message, context or signature fails`, async () => {
        const msg = random(64), ctx = random(9);
        const sig = noble.sign(msg, ref.secretKey, { context: ctx });
        const flip = (b: Uint8Array, at: number) => {
          const c = b.slice();
          c[at] ^= 1;
          return c;
        };
        const verify = (m: Uint8Array, c: Uint8Array, s: Uint8Array) =>
          verifyOnce(tok.mod, tok.session, pub, mldsa(0, c), m, s);
        assert.ok(await verify(msg, ctx, sig));
        assert.equal(await verify(flip(msg, 3), ctx, sig), false);
        assert.equal(await verify(msg, flip(ctx, 0), sig), false);
        assert.equal(await verify(msg, new Uint8Array(0), sig), false);
        for (const at of [0, 100, sigLen - 40, sigLen - 1]) {
          assert.equal(await verify(msg, ctx, flip(sig, at)), false);
        }
        // A wrong length is CKR_SIGNATURE_LEN_RANGE, which the binding reports as invalid too.
        const mech = encodeMechanism(CKM.ML_DSA);
        assert.equal(tok.mod.fn.C_VerifyInit(tok.session, mech.bytes, pub), CKR.OK);
        assert.equal(
          tok.mod.fn.C_Verify(tok.session, msg, msg.length, sig, sigLen - 1),
          CKR.SIGNATURE_LEN_RANGE,
        );
      });

      await t.step(`${name}: C_VerifySignatureInit/C_VerifySignature (3.2 entries)`, () => {
        const entries = verifySignatureEntries();
        const msg = random(50);
        const sig = noble.sign(msg, ref.secretKey);
        const mech = encodeMechanism(CKM.ML_DSA);
        assert.equal(entries.init(tok.session, mech.bytes, pub, sig, sig.length), CKR.OK);
        assert.equal(entries.verify(tok.session, msg, msg.length), CKR.OK);
        const bad = sig.slice();
        bad[5] ^= 0x80;
        assert.equal(entries.init(tok.session, mech.bytes, pub, bad, bad.length), CKR.OK);
        assert.equal(entries.verify(tok.session, msg, msg.length), CKR.SIGNATURE_INVALID);
        assert.equal(
          entries.init(tok.session, mech.bytes, pub, sig, sig.length + 1),
          CKR.SIGNATURE_LEN_RANGE,
        );
      });
    }

    await t.step("a context over 255 bytes and an unknown hedge variant are refused", async () => {
      const [, key] = await keyFromSeed(tok, 1, random(32));
      const params = [encodeSignAdditionalContext(0, random(256)), encodeSignAdditionalContext(9)];
      for (const param of params) {
        const mech = encodeMechanism(CKM.ML_DSA, param);
        const rv = tok.mod.fn.C_SignInit(tok.session, mech.bytes, key);
        assert.equal(rv, CKR.MECHANISM_PARAM_INVALID);
      }
    });

    await t.step("the parameter set is required and must be 1, 2 or 3", async () => {
      const gen = (pub: { type: number; value: Uint8Array | null }[]) =>
        generateKeyPair(tok.mod, tok.session, { mechanism: CKM.ML_DSA_KEY_PAIR_GEN }, pub, []);
      await assert.rejects(gen([]), /CKR_TEMPLATE_INCOMPLETE/);
      await assert.rejects(
        gen([{ type: CKA.PARAMETER_SET, value: ulongBytes(4) }]),
        /CKR_PARAMETER_SET_NOT_SUPPORTED/,
      );
    });
  } finally {
    await tok.close();
  }
});
