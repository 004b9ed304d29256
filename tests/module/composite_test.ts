/**
 * The composite ML-DSA-65 + Ed25519 mechanism (0x80004202, draft-ietf-lamps-pq-composite-sigs-19,
 * id-MLDSA65-Ed25519-SHA512) of the project's test module, through the project's binding: the
 * draft's published vectors verify, keys from the vector's seed match, and the module's own
 * signatures pass an independent check — noble for the ML-DSA half and Web Crypto for the Ed25519
 * half, both over M' built here from the draft — while tampering with either half fails.
 */
import assert from "node:assert/strict";
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import {
  check,
  CK_COMPOSITE_MLDSA65_ED25519,
  CKA,
  CKH,
  CKO,
  encodeSignAdditionalContext,
  encodeTemplate,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { getAttributes, signOnce, verifyOnce } from "../../lib/token/mod.ts";
import { generateKeyPair } from "../../lib/token_admin/mod.ts";
import { openSvcmod, type SvcmodToken } from "./fixture.ts";
import { readSharedJson } from "../support/testdata.ts";

const COMPOSITE = CK_COMPOSITE_MLDSA65_ED25519;
const LABEL = new TextEncoder().encode("COMPSIG-MLDSA65-Ed25519-SHA512");
const PREFIX = new TextEncoder().encode("CompositeAlgorithmSignatures2025");
const MLDSA_PK = 1952, MLDSA_SIG = 3309, SIG = 3373;

interface Vectors {
  m: string;
  ctx: string;
  tests: { tcId: string; pk: string; sk: string; s: string; sWithContext: string }[];
}

const b64 = (s: string) => Uint8Array.fromBase64(s);
const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));

async function loadVector() {
  const data = await readSharedJson<Vectors>("composite-sigs-draft19.json");
  const v = data.tests.find((t) => t.tcId === "id-MLDSA65-Ed25519-SHA512")!;
  return {
    m: b64(data.m),
    ctx: b64(data.ctx),
    pk: b64(v.pk),
    sk: b64(v.sk),
    s: b64(v.s),
    sWithContext: b64(v.sWithContext),
  };
}

/** M' = Prefix || Label || len(ctx) || ctx || SHA-512(M), from the draft. */
async function mPrime(m: Uint8Array, ctx: Uint8Array): Promise<Uint8Array> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-512", m as BufferSource));
  const out = new Uint8Array(PREFIX.length + LABEL.length + 1 + ctx.length + 64);
  let at = 0;
  for (const part of [PREFIX, LABEL, Uint8Array.of(ctx.length), ctx, digest]) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** Checks a composite signature without the module: noble for ML-DSA, Web Crypto for Ed25519. */
async function independentlyValid(
  pk: Uint8Array,
  m: Uint8Array,
  ctx: Uint8Array,
  sig: Uint8Array,
): Promise<{ mldsa: boolean; ed25519: boolean }> {
  const mp = await mPrime(m, ctx);
  const mldsa = ml_dsa65.verify(sig.subarray(0, MLDSA_SIG), mp, pk.subarray(0, MLDSA_PK), {
    context: LABEL,
  });
  const edKey = await crypto.subtle.importKey(
    "raw",
    pk.slice(MLDSA_PK) as BufferSource,
    { name: "Ed25519" },
    false,
    ["verify"],
  );
  const ed25519 = await crypto.subtle.verify(
    "Ed25519",
    edKey,
    sig.slice(MLDSA_SIG) as BufferSource,
    mp as BufferSource,
  );
  return { mldsa, ed25519 };
}

function composite(ctx?: Uint8Array, hedge: number = CKH.HEDGE_PREFERRED) {
  return { mechanism: COMPOSITE, parameter: encodeSignAdditionalContext(hedge, ctx) };
}

function importPublic(t: SvcmodToken, pk: Uint8Array): number {
  const tmpl = encodeTemplate([
    { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
    { type: CKA.KEY_TYPE, value: ulongBytes(COMPOSITE) },
    { type: CKA.VALUE, value: pk },
  ]);
  const out = new BigUint64Array(1);
  check(
    "C_CreateObject",
    t.mod.fn.C_CreateObject(t.session, tmpl.bytes, 3, new Uint8Array(out.buffer)),
  );
  return Number(out[0]);
}

function flip(b: Uint8Array, at: number): Uint8Array {
  const c = b.slice();
  c[at] ^= 0x01;
  return c;
}

Deno.test("svcmod composite ML-DSA-65 + Ed25519 (draft 19)", async (t) => {
  const tok = await openSvcmod();
  const v = await loadVector();
  try {
    await t.step(
      "the oracle itself: the draft's signatures pass the independent check",
      async () => {
        assert.deepEqual(await independentlyValid(v.pk, v.m, new Uint8Array(0), v.s), {
          mldsa: true,
          ed25519: true,
        });
        assert.deepEqual(await independentlyValid(v.pk, v.m, v.ctx, v.sWithContext), {
          mldsa: true,
          ed25519: true,
        });
      },
    );

    await t.step(
      "the module verifies the draft's vector (imported with C_CreateObject)",
      async () => {
        const pub = importPublic(tok, v.pk);
        const verify = (ctx: Uint8Array | undefined, m: Uint8Array, s: Uint8Array) =>
          verifyOnce(tok.mod, tok.session, pub, composite(ctx), m, s);
        assert.ok(await verify(undefined, v.m, v.s));
        assert.ok(await verify(v.ctx, v.m, v.sWithContext));
        assert.equal(await verify(v.ctx, v.m, v.s), false);
        assert.equal(await verify(undefined, v.m, v.sWithContext), false);
        assert.equal(await verify(undefined, flip(v.m, 0), v.s), false);
        assert.equal(await verify(undefined, v.m, flip(v.s, 10)), false); // ML-DSA half
        assert.equal(await verify(undefined, v.m, flip(v.s, SIG - 10)), false); // Ed25519 half
        assert.equal(await verify(undefined, v.m, v.s.subarray(0, SIG - 1)), false);
      },
    );

    await t.step("CKA_SEED = the vector's 64-byte key gives the vector's public key", async () => {
      const [pub, priv] = await generateKeyPair(
        tok.mod,
        tok.session,
        { mechanism: COMPOSITE },
        [],
        [
          { type: CKA.SEED, value: v.sk },
        ],
      );
      const attrs = getAttributes(tok.mod, tok.session, pub, [CKA.VALUE, CKA.KEY_TYPE]);
      assert.deepEqual(attrs.get(CKA.VALUE), v.pk);
      const p = getAttributes(tok.mod, tok.session, priv, [CKA.VALUE, CKA.SEED]);
      assert.equal(p.get(CKA.VALUE), null);
      assert.equal(p.get(CKA.SEED), null);
      // Signing with it: the draft's public key verifies the module's signature independently.
      const sig = await signOnce(tok.mod, tok.session, priv, composite(v.ctx), v.m, SIG);
      assert.deepEqual(await independentlyValid(v.pk, v.m, v.ctx, sig), {
        mldsa: true,
        ed25519: true,
      });
    });

    await t.step(
      "the module's own signatures pass the independent check; tampering fails",
      async () => {
        const [pub, priv] = await generateKeyPair(
          tok.mod,
          tok.session,
          { mechanism: COMPOSITE },
          [],
          [],
        );
        const pk = getAttributes(tok.mod, tok.session, pub, [CKA.VALUE]).get(CKA.VALUE)!;
        assert.equal(pk.length, MLDSA_PK + 32);
        for (const ctx of [new Uint8Array(0), random(1), random(255)]) {
          const m = random(200);
          for (const hedge of [CKH.HEDGE_PREFERRED, CKH.DETERMINISTIC_REQUIRED]) {
            const sig = await signOnce(tok.mod, tok.session, priv, composite(ctx, hedge), m, SIG);
            assert.equal(sig.length, SIG);
            assert.deepEqual(await independentlyValid(pk, m, ctx, sig), {
              mldsa: true,
              ed25519: true,
            });
            assert.ok(await verifyOnce(tok.mod, tok.session, pub, composite(ctx), m, sig));
            // Either half tampered: the independent check sees which; the module refuses both.
            const badMl = flip(sig, 7), badEd = flip(sig, MLDSA_SIG + 7);
            assert.deepEqual(await independentlyValid(pk, m, ctx, badMl), {
              mldsa: false,
              ed25519: true,
            });
            assert.deepEqual(await independentlyValid(pk, m, ctx, badEd), {
              mldsa: true,
              ed25519: false,
            });
            assert.equal(
              await verifyOnce(tok.mod, tok.session, pub, composite(ctx), m, badMl),
              false,
            );
            assert.equal(
              await verifyOnce(tok.mod, tok.session, pub, composite(ctx), m, badEd),
              false,
            );
          }
        }
        // The halves are bound to each other through M': another key's Ed25519 half does not fit.
        const [, priv2] = await generateKeyPair(
          tok.mod,
          tok.session,
          { mechanism: COMPOSITE },
          [],
          [],
        );
        const m = random(32);
        const a = await signOnce(tok.mod, tok.session, priv, composite(), m, SIG);
        const b = await signOnce(tok.mod, tok.session, priv2, composite(), m, SIG);
        const spliced = new Uint8Array([...a.subarray(0, MLDSA_SIG), ...b.subarray(MLDSA_SIG)]);
        assert.equal(await verifyOnce(tok.mod, tok.session, pub, composite(), m, spliced), false);
        // Deterministic: the same input twice gives the same signature.
        const deterministic = () =>
          signOnce(tok.mod, tok.session, priv, composite(undefined, CKH.DETERMINISTIC_REQUIRED), m, SIG);
        assert.deepEqual(await deterministic(), await deterministic());
      },
    );
  } finally {
    await tok.close();
  }
});
