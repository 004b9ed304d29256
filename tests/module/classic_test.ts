/**
 * The classical mechanisms of the project's test module (svcmod), through the project's binding,
 * checked with Web Crypto: Ed25519 (CKM_EDDSA), ECDSA P-256 (CKM_ECDSA over a digest and
 * CKM_ECDSA_SHA256), HMAC-SHA256 with generic secrets; public keys shown as SoftHSM2 shows them
 * and accepted from outside with C_CreateObject.
 */
import assert from "node:assert/strict";
import {
  type AttributeIn,
  boolBytes,
  check,
  CKA,
  CKK,
  CKM,
  CKO,
  CKR,
  encodeMechanism,
  encodeTemplate,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { getAttributes, signOnce, signOnceSync, verifyOnce } from "../../lib/token/mod.ts";
import { generateKey, generateKeyPair } from "../../lib/token_admin/mod.ts";
import { openSvcmod, type SvcmodToken } from "./fixture.ts";

const OID_P256 = Uint8Array.fromHex("06082a8648ce3d030107");
const OID_P384 = Uint8Array.fromHex("06052b81040022");
const OID_ED25519 = Uint8Array.fromHex("06032b6570");
const NAME_ED25519 = Uint8Array.fromHex("130c656477617264733235353139"); // "edwards25519"

const random = (n: number) => crypto.getRandomValues(new Uint8Array(n));
const buf = (b: Uint8Array) => b as BufferSource;

function create(t: SvcmodToken, attrs: AttributeIn[]): number {
  const tmpl = encodeTemplate(attrs);
  const out = new BigUint64Array(1);
  check(
    "C_CreateObject",
    t.mod.fn.C_CreateObject(t.session, tmpl.bytes, attrs.length, new Uint8Array(out.buffer)),
  );
  return Number(out[0]);
}

function createRv(t: SvcmodToken, attrs: AttributeIn[]): number {
  const tmpl = encodeTemplate(attrs);
  const out = new BigUint64Array(1);
  return t.mod.fn.C_CreateObject(t.session, tmpl.bytes, attrs.length, new Uint8Array(out.buffer));
}

/** The DER OCTET STRING around a raw point, as CKA_EC_POINT holds it. */
function octetString(raw: Uint8Array): Uint8Array {
  return new Uint8Array([0x04, raw.length, ...raw]);
}

function publicKeyTemplate(kt: number, params: Uint8Array, point: Uint8Array): AttributeIn[] {
  return [
    { type: CKA.CLASS, value: ulongBytes(CKO.PUBLIC_KEY) },
    { type: CKA.KEY_TYPE, value: ulongBytes(kt) },
    { type: CKA.EC_PARAMS, value: params },
    { type: CKA.EC_POINT, value: point },
  ];
}

Deno.test("svcmod classical mechanisms, checked with Web Crypto", async (t) => {
  const tok = await openSvcmod();
  const { mod, session } = tok;
  try {
    for (const params of [OID_ED25519, NAME_ED25519]) {
      await t.step(`Ed25519 (EC_PARAMS ${params.toHex()}): sign, export, import`, async () => {
        const [pub, priv] = await generateKeyPair(mod, session, {
          mechanism: CKM.EC_EDWARDS_KEY_PAIR_GEN,
        }, [
          { type: CKA.EC_PARAMS, value: params },
        ], []);
        const a = getAttributes(mod, session, pub, [CKA.EC_POINT, CKA.EC_PARAMS, CKA.KEY_TYPE]);
        const point = a.get(CKA.EC_POINT)!;
        assert.equal(point.length, 34);
        assert.deepEqual(point.subarray(0, 2), Uint8Array.of(0x04, 0x20));
        assert.deepEqual(a.get(CKA.EC_PARAMS), params);
        assert.deepEqual(a.get(CKA.KEY_TYPE), ulongBytes(CKK.EC_EDWARDS));
        const msg = random(77);
        const sig = await signOnce(mod, session, priv, { mechanism: CKM.EDDSA }, msg, 64);
        const key = await crypto.subtle.importKey("raw", buf(point.slice(2)), "Ed25519", false, [
          "verify",
        ]);
        assert.ok(await crypto.subtle.verify("Ed25519", key, buf(sig), buf(msg)));
        // A Web Crypto key and signature, verified by the module (point given raw and wrapped).
        const wc = await crypto.subtle.generateKey("Ed25519", true, [
          "sign",
          "verify",
        ]) as CryptoKeyPair;
        const raw = new Uint8Array(await crypto.subtle.exportKey("raw", wc.publicKey));
        const theirs = new Uint8Array(await crypto.subtle.sign("Ed25519", wc.privateKey, buf(msg)));
        for (const p of [raw, octetString(raw)]) {
          const h = create(tok, publicKeyTemplate(CKK.EC_EDWARDS, params, p));
          assert.ok(await verifyOnce(mod, session, h, { mechanism: CKM.EDDSA }, msg, theirs));
          assert.equal(
            await verifyOnce(mod, session, h, { mechanism: CKM.EDDSA }, random(77), theirs),
            false,
          );
        }
      });
    }

    await t.step("ECDSA P-256: CKM_ECDSA over a digest and CKM_ECDSA_SHA256, r||s", async () => {
      const [pub, priv] = await generateKeyPair(mod, session, { mechanism: CKM.EC_KEY_PAIR_GEN }, [
        { type: CKA.EC_PARAMS, value: OID_P256 },
      ], [{ type: CKA.EC_PARAMS, value: OID_P256 }]);
      const point = getAttributes(mod, session, pub, [CKA.EC_POINT]).get(CKA.EC_POINT)!;
      assert.equal(point.length, 67);
      assert.deepEqual(point.subarray(0, 3), Uint8Array.of(0x04, 0x41, 0x04));
      const key = await crypto.subtle.importKey(
        "raw",
        buf(point.slice(2)),
        { name: "ECDSA", namedCurve: "P-256" },
        false,
        ["verify"],
      );
      const msg = random(100);
      const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", buf(msg)));
      const overDigest = await signOnce(mod, session, priv, { mechanism: CKM.ECDSA }, digest, 64);
      const combined = await signOnce(mod, session, priv, { mechanism: CKM.ECDSA_SHA256 }, msg, 64);
      for (const sig of [overDigest, combined]) {
        assert.equal(sig.length, 64);
        assert.ok(
          await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, key, buf(sig), buf(msg)),
        );
      }
      // Web Crypto's signature verified by the module, over the digest and over the message.
      const wc = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
        "sign",
        "verify",
      ]) as CryptoKeyPair;
      const raw = new Uint8Array(await crypto.subtle.exportKey("raw", wc.publicKey));
      const theirs = new Uint8Array(
        await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, wc.privateKey, buf(msg)),
      );
      const h = create(tok, publicKeyTemplate(CKK.EC, OID_P256, octetString(raw)));
      assert.ok(await verifyOnce(mod, session, h, { mechanism: CKM.ECDSA }, digest, theirs));
      assert.ok(await verifyOnce(mod, session, h, { mechanism: CKM.ECDSA_SHA256 }, msg, theirs));
      assert.equal(
        await verifyOnce(mod, session, h, { mechanism: CKM.ECDSA_SHA256 }, random(100), theirs),
        false,
      );
      // Not a point of the curve; another curve.
      const off = raw.slice();
      off[64] ^= 1;
      assert.equal(
        createRv(tok, publicKeyTemplate(CKK.EC, OID_P256, octetString(off))),
        CKR.ATTRIBUTE_VALUE_INVALID,
      );
      assert.equal(
        createRv(tok, publicKeyTemplate(CKK.EC, OID_P384, octetString(raw))),
        CKR.CURVE_NOT_SUPPORTED,
      );
      await assert.rejects(
        generateKeyPair(mod, session, { mechanism: CKM.EC_KEY_PAIR_GEN }, [{
          type: CKA.EC_PARAMS,
          value: OID_P384,
        }], []),
        /CKR_CURVE_NOT_SUPPORTED/,
      );
    });

    await t.step("HMAC-SHA256 with generic secrets: imported key matches Web Crypto", async () => {
      const value = random(32);
      const h = create(tok, [
        { type: CKA.CLASS, value: ulongBytes(CKO.SECRET_KEY) },
        { type: CKA.KEY_TYPE, value: ulongBytes(CKK.GENERIC_SECRET) },
        { type: CKA.VALUE, value },
        { type: CKA.SIGN, value: boolBytes(true) },
      ]);
      const a = getAttributes(mod, session, h, [CKA.VALUE, CKA.VALUE_LEN, CKA.SENSITIVE]);
      assert.equal(a.get(CKA.VALUE), null); // sensitive once inside
      assert.deepEqual(a.get(CKA.VALUE_LEN), ulongBytes(32));
      const msg = random(500);
      const mac = signOnceSync(mod, session, h, { mechanism: CKM.SHA256_HMAC }, msg, 32);
      const key = await crypto.subtle.importKey(
        "raw",
        buf(value),
        { name: "HMAC", hash: "SHA-256" },
        false,
        ["sign"],
      );
      assert.deepEqual(mac, new Uint8Array(await crypto.subtle.sign("HMAC", key, buf(msg))));
      // A generated key: MAC verifies in the module, a changed MAC does not.
      const g = generateKey(mod, session, { mechanism: CKM.GENERIC_SECRET_KEY_GEN }, [
        { type: CKA.VALUE_LEN, value: ulongBytes(32) },
      ]);
      const gmac = signOnceSync(mod, session, g, { mechanism: CKM.SHA256_HMAC }, msg, 32);
      assert.ok(await verifyOnce(mod, session, g, { mechanism: CKM.SHA256_HMAC }, msg, gmac));
      gmac[0] ^= 1;
      assert.equal(
        await verifyOnce(mod, session, g, { mechanism: CKM.SHA256_HMAC }, msg, gmac),
        false,
      );
      assert.equal(
        await verifyOnce(mod, session, g, { mechanism: CKM.SHA256_HMAC }, msg, gmac.subarray(1)),
        false,
      );
    });

    await t.step("mechanisms offered, and unknown ones refused", () => {
      const count = new BigUint64Array(1);
      check("C_GetMechanismList", mod.fn.C_GetMechanismList(0, null, new Uint8Array(count.buffer)));
      const list = new BigUint64Array(Number(count[0]));
      check(
        "C_GetMechanismList",
        mod.fn.C_GetMechanismList(0, new Uint8Array(list.buffer), new Uint8Array(count.buffer)),
      );
      const offered = [...list].map(Number);
      for (
        const m of [
          CKM.ML_DSA_KEY_PAIR_GEN,
          CKM.ML_DSA,
          CKM.COMPOSITE_MLDSA65_ED25519,
          CKM.EDDSA,
          CKM.ECDSA,
          CKM.SHA256_HMAC,
        ]
      ) {
        assert.ok(offered.includes(m), `0x${m.toString(16)}`);
      }
      const info = new Uint8Array(24);
      assert.equal(
        mod.fn.C_GetMechanismInfo(0, CKM.SHA256_RSA_PKCS_PSS, info),
        CKR.MECHANISM_INVALID,
      );
      const mech = encodeMechanism(CKM.SHA256_RSA_PKCS_PSS);
      assert.equal(mod.fn.C_SignInit(session, mech.bytes, 1), CKR.MECHANISM_INVALID);
    });
  } finally {
    await tok.close();
  }
});
