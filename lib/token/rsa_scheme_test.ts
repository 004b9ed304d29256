/**
 * One signature scheme per RSA key, recorded on the token as CKA_ALLOWED_MECHANISMS (SoftHSM2):
 * an rsa-3072-pkcs1v15 key signs PKCS #1 v1.5 in message and digest mode, an rsa-3072 key PSS,
 * a key that states no scheme (made by another application) is PSS as before, and the module
 * itself refuses the other scheme, on the token object and on the daemon's session copy.
 * node:crypto checks every signature.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { constants, createHash, createPublicKey, verify as nodeVerify } from "node:crypto";
import {
  boolBytes,
  CKA,
  CKG,
  CKM,
  CKO,
  CKR,
  encodeMechanism,
  encodePssParams,
  loadModule,
  type Pkcs11Module,
  readUlongs,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { makeKeyWithPkcs11Tool, withLoggedInToken } from "../../tests/support/token.ts";
import {
  copyObject,
  findObjects,
  getAttributes,
  type Handle,
  openSession,
  utf8,
} from "./sessions.ts";
import type { SigningKey } from "./_key_cache.ts";
import { verifyIndependently } from "../token_admin/mod.ts";

const message = new TextEncoder().encode("a Windows binary's Authenticode attributes");

function publicKeyOf(key: SigningKey) {
  return createPublicKey({ key: Buffer.from(key.publicKeySpki!), format: "der", type: "spki" });
}

/** node:crypto's RSASSA-PKCS1-v1_5 verification of `signature` over the message. */
function pkcs1v15Valid(key: SigningKey, hash: string, signature: Uint8Array): boolean {
  return nodeVerify(hash, message, {
    key: publicKeyOf(key),
    padding: constants.RSA_PKCS1_PADDING,
  }, signature);
}

/** node:crypto's RSASSA-PSS verification (MGF1 of the hash, salt of its length). */
function pssValid(key: SigningKey, hash: string, salt: number, signature: Uint8Array): boolean {
  return nodeVerify(hash, message, {
    key: publicKeyOf(key),
    padding: constants.RSA_PKCS1_PSS_PADDING,
    saltLength: salt,
  }, signature);
}

function allowedMechanisms(mod: Pkcs11Module, s: Handle, object: Handle): number[] {
  const bytes = getAttributes(mod, s, object, [CKA.ALLOWED_MECHANISMS]).get(
    CKA.ALLOWED_MECHANISMS,
  );
  // SoftHSM2 keeps them as a set, in its own order.
  return readUlongs(bytes ?? new Uint8Array()).sort((a, b) => a - b);
}

function tokenObject(mod: Pkcs11Module, s: Handle, cls: number, label: string): Handle {
  const found = findObjects(mod, s, [
    { type: CKA.CLASS, value: ulongBytes(cls) },
    { type: CKA.LABEL, value: utf8(label) },
    { type: CKA.TOKEN, value: boolBytes(true) },
  ]);
  assert.equal(found.length, 1, `one ${label}`);
  return found[0];
}

/** C_SignInit's answer for `mechanism` (the operation is ended again when it starts). */
function signInit(
  mod: Pkcs11Module,
  s: Handle,
  key: Handle,
  mechanism: number,
  parameter?: ReturnType<typeof encodePssParams>,
): number {
  const rv = mod.fn.C_SignInit(s, encodeMechanism(mechanism, parameter).bytes, key);
  if (rv === CKR.OK) {
    const sig = new Uint8Array(384);
    const len = new BigUint64Array([384n]);
    mod.fn.C_Sign(s, Uint8Array.of(0), 1, sig, new Uint8Array(len.buffer));
  }
  return rv;
}

Deno.test({
  name:
    "rsa-3072-pkcs1v15: listed with CKM_SHA256_RSA_PKCS and the SHA-2 digests; signs PKCS #1 v1.5 over the message and, with CKM_RSA_PKCS, over a digest (node:crypto verifies)",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ v15: "rsa-3072-pkcs1v15" }, async (token) => {
      const key = (await token.key("v15"))!;
      assert.equal(key.keyType, "rsa-3072-pkcs1v15");
      assert.equal(key.mechanism, "CKM_SHA256_RSA_PKCS");
      assert.deepEqual(key.digests, ["sha-256", "sha-384", "sha-512"]);

      const plain = await token.sign(key, message);
      assert.equal(plain.mechanism, "CKM_SHA256_RSA_PKCS");
      assert.ok(pkcs1v15Valid(key, "sha256", plain.signature));
      assert.ok(!pssValid(key, "sha256", 32, plain.signature), "not a PSS signature");
      assert.ok((await verifyIndependently(key, message, plain.signature)).ok);
      assert.ok(await token.verify(key, message, plain.signature));

      for (
        const [name, hash] of [["sha-256", "sha256"], ["sha-384", "sha384"], [
          "sha-512",
          "sha512",
        ]] as const
      ) {
        const digest = createHash(hash).update(message).digest();
        const signed = await token.sign(key, digest, name);
        assert.equal(signed.mechanism, "CKM_RSA_PKCS", name);
        assert.ok(pkcs1v15Valid(key, hash, signed.signature), `${name}: over the message`);
        assert.ok(await token.verify(key, digest, signed.signature, name));
        const other = createHash(hash).update("another message").digest();
        assert.ok(!(await token.verify(key, other, signed.signature, name)));
      }
      // A digest of the right length is signed as it is: the DigestInfo is made here, so a
      // digest of the wrong length never becomes some other DigestInfo.
      assert.deepEqual(
        (await token.sign(key, createHash("sha256").update(message).digest(), "sha-256"))
          .signature,
        plain.signature,
        "PKCS #1 v1.5 is deterministic: the digest mode signature is the message mode's",
      );
    }),
});

Deno.test({
  name:
    "rsa-3072 still signs PSS; a key stating no scheme (pkcs11-tool's) is rsa-3072 and signs PSS",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ pss: "rsa-3072" }, async (token, made) => {
      await makeKeyWithPkcs11Tool(made, "other", "rsa:3072");
      for (const label of ["pss", "other"]) {
        const key = (await token.key(label))!;
        assert.equal(key.keyType, "rsa-3072", label);
        assert.equal(key.mechanism, "CKM_SHA256_RSA_PKCS_PSS", label);
        const { signature } = await token.sign(key, message);
        assert.ok(pssValid(key, "sha256", 32, signature), label);
        assert.ok(!pkcs1v15Valid(key, "sha256", signature), `${label}: not PKCS #1 v1.5`);
        const digest = createHash("sha384").update(message).digest();
        const viaDigest = await token.sign(key, digest, "sha-384");
        assert.equal(viaDigest.mechanism, "CKM_RSA_PKCS_PSS");
        assert.ok(pssValid(key, "sha384", 48, viaDigest.signature), label);
      }
    }),
});

Deno.test({
  name:
    "keygen records each RSA key's scheme as CKA_ALLOWED_MECHANISMS on both halves; SoftHSM2 keeps it in a session copy and refuses the other scheme",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ v15: "rsa-3072-pkcs1v15", pss: "rsa-3072" }, async (token, made) => {
      const mod = loadModule(made.modulePath);
      const s = openSession(mod, token.slotId);
      try {
        const pssParams = () => encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32);
        const schemes = {
          v15: [CKM.RSA_PKCS, CKM.SHA256_RSA_PKCS],
          pss: [CKM.RSA_PKCS_PSS, CKM.SHA256_RSA_PKCS_PSS],
        };
        for (const [label, scheme] of Object.entries(schemes)) {
          const expected = label === "v15" ? "rsa-3072-pkcs1v15" : "rsa-3072";
          assert.equal((await token.key(label))!.keyType, expected);
          const priv = tokenObject(mod, s, CKO.PRIVATE_KEY, label);
          const pub = tokenObject(mod, s, CKO.PUBLIC_KEY, label);
          assert.deepEqual(allowedMechanisms(mod, s, priv), scheme, `${label} private`);
          assert.deepEqual(allowedMechanisms(mod, s, pub), scheme, `${label} public`);
          const copy = copyObject(mod, s, priv, [{ type: CKA.TOKEN, value: boolBytes(false) }]);
          assert.deepEqual(allowedMechanisms(mod, s, copy), scheme, `${label} copy`);
          for (const object of [priv, copy]) {
            const pss = signInit(mod, s, object, CKM.SHA256_RSA_PKCS_PSS, pssParams());
            const v15 = signInit(mod, s, object, CKM.SHA256_RSA_PKCS);
            assert.equal(pss === CKR.OK, label === "pss", `${label}: PSS allowed only to PSS`);
            assert.equal(v15 === CKR.OK, label === "v15", `${label}: v1.5 allowed only to v1.5`);
          }
          mod.fn.C_DestroyObject(s, copy);
        }
      } finally {
        mod.fn.C_CloseSession(s);
      }
    }),
});
