/**
 * Token behaviour against SoftHSM2 that needs a real module: a cached handle that went stale is
 * looked up again, a token that dies is reported once through `onDead`, whatever operation met
 * it first, and a signature comes with the name of the mechanism that made it.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { constants, createHash, createPublicKey, verify as nodeVerify } from "node:crypto";
import {
  CKA,
  CKF_INIT,
  CKF_SESSION,
  CKO,
  CKR,
  encodeInitializeArgs,
  loadModule,
  type Pkcs11Error,
  type Pkcs11Module,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import {
  makeTestToken,
  openTestToken,
  testTokenPin,
  withLoggedInToken,
} from "../../tests/support/token.ts";
import { findObjects, openSession, utf8 } from "./sessions.ts";
import { TokenAdmin, verifyIndependently } from "../token_admin/mod.ts";

const data = new TextEncoder().encode("audit line");

/**
 * Destroys, behind the Token's back, the one secret key labelled `label` that is a token object
 * (`onToken`) or a session object (a working copy), as another application or a lost object would.
 */
function destroySecret(mod: Pkcs11Module, slot: number, label: string, onToken: boolean): void {
  const s = openSession(mod, slot, CKF_SESSION.RW_SESSION);
  try {
    const found = findObjects(mod, s, [
      { type: CKA.CLASS, value: ulongBytes(CKO.SECRET_KEY) },
      { type: CKA.LABEL, value: utf8(label) },
      { type: CKA.TOKEN, value: new Uint8Array([onToken ? 1 : 0]) },
    ]);
    assert.equal(found.length, 1);
    assert.equal(mod.fn.C_DestroyObject(s, found[0]), CKR.OK);
  } finally {
    mod.fn.C_CloseSession(s);
  }
}

Deno.test({
  name:
    "token: a replaced key is used from its working copy until dropRemovedKeys() or refreshKeys(), then the new one",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({}, async (token, made) => {
      await new TokenAdmin(token).generateMacKey("rotating");
      const before = await token.mac("rotating", data);
      // Replace the key behind the token's back: same label, new object, new handle.
      const mod = loadModule(made.modulePath);
      const replace = async () => {
        destroySecret(mod, token.slotId, "rotating", true);
        await new TokenAdmin(token).generateMacKey("rotating");
      };
      await replace();
      assert.deepEqual(await token.mac("rotating", data), before, "the working copy: the old key");
      assert.deepEqual(token.dropRemovedKeys(), ["rotating"]);
      const after = await token.mac("rotating", data);
      assert.equal(after.length, 32);
      assert.notDeepEqual(after, before, "a new key gives a new MAC");
      assert.deepEqual(token.dropRemovedKeys(), [], "the new key is on the token");

      await replace();
      assert.deepEqual(await token.mac("rotating", data), after);
      token.refreshKeys();
      const third = await token.mac("rotating", data);
      assert.notDeepEqual(third, after, "after refreshKeys() the key is looked up again");
    }),
});

Deno.test({
  name: "token: a dead module is reported once through onDead, and its sessions are not reused",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken({ keys: { k: "ed25519" } });
    const token = openTestToken(made);
    const mod = loadModule(made.modulePath);
    try {
      await token.login(testTokenPin(made));
      await new TokenAdmin(token).generateMacKey("m");
      const key = (await token.key("k"))!;
      await token.sign(key, data);
      const told: Pkcs11Error[] = [];
      token.onDead((err) => told.push(err));
      // The module loses all state under the token: every call now answers
      // CKR_CRYPTOKI_NOT_INITIALIZED, as after a crash of the module's process or device.
      assert.equal(mod.fn.C_Finalize(null), CKR.OK);
      await assert.rejects(token.sign(key, data), /CKR_CRYPTOKI_NOT_INITIALIZED/);
      await assert.rejects(token.mac("m", data), /CKR_CRYPTOKI_NOT_INITIALIZED/);
      assert.throws(() => token.info(), /CKR_CRYPTOKI_NOT_INITIALIZED/);
      assert.equal(told.length, 1, "told once, not once per failing operation");
      assert.equal(told[0].code, "CKR_CRYPTOKI_NOT_INITIALIZED");
      assert.equal(token.poolStats().size, 0, "dead sessions are closed, not lent again");
      const late: Pkcs11Error[] = [];
      token.onDead((err) => late.push(err));
      await Promise.resolve();
      assert.deepEqual(late, told, "a listener that comes later still hears of it");
    } finally {
      mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK)); // so close() can finalise
      token.close();
      await made.cleanup();
    }
  },
});

Deno.test({
  name:
    "token: refreshKeys() (SIGHUP) fails no sign in flight, nor one with a key obtained before it",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ "k-ec": "ec-p256", "k-ed": "ed25519" }, async (token) => {
      for (const label of ["k-ec", "k-ed"]) {
        const key = (await token.key(label))!;
        // Signs running in the module's threads when the copies are dropped.
        const inFlight = Array.from({ length: 16 }, () => token.sign(key, data));
        token.refreshKeys();
        // Looked up again while the dropped copy is still in use: one key, not a duplicate label.
        const again = await token.key(label);
        assert.ok(again, label);
        const results = await Promise.allSettled(inFlight);
        assert.deepEqual(results.filter((r) => r.status === "rejected"), [], label);
        // A request that looked its key up just before the SIGHUP signs after it.
        const { signature } = await token.sign(key, data);
        assert.ok(await token.verify((await token.key(label))!, data, signature), label);
        assert.ok(await token.verify(key, data, signature), label);
      }
    }),
});

Deno.test({
  name:
    "token: mac() forgets a working copy that answers CKR_OBJECT_HANDLE_INVALID; the next finds the key",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({}, async (token, made) => {
      await new TokenAdmin(token).generateMacKey("audit-like");
      const first = await token.mac("audit-like", data);
      // Destroy the session copy mac() signs with, as a module that lost it would.
      destroySecret(loadModule(made.modulePath), token.slotId, "audit-like", false);
      await assert.rejects(
        token.mac("audit-like", data),
        (e: Pkcs11Error) => e.rv === CKR.OBJECT_HANDLE_INVALID || e.rv === CKR.KEY_HANDLE_INVALID,
      );
      assert.deepEqual(await token.mac("audit-like", data), first, "looked up again: same key");
    }),
});

Deno.test({
  name:
    "token: signing on the calling thread (inlineSignLimitUs: Infinity) signs every key type of the module as the pool does (independently verified)",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ ec: "ec-p256", ed: "ed25519", rsa: "rsa-3072" }, async (token) => {
      for (const label of ["ec", "ed", "rsa"]) {
        const key = (await token.key(label))!;
        for (let i = 0; i < 3; i++) { // the first use resolves the key, the next ones are live
          const { signature } = await token.sign(key, data);
          const verdict = await verifyIndependently(key, data, signature);
          assert.ok(verdict.ok, `${label}: ${JSON.stringify(verdict)}`);
        }
      }
    }, { inlineSignLimitUs: Infinity }),
});

Deno.test({
  name:
    "token: sign names the mechanism it used: the key's over a message, the digest's in digest mode (node:crypto verifies both)",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ rsa: "rsa-3072" }, async (token) => {
      const key = (await token.key("rsa"))!;
      const publicKey = createPublicKey({
        key: Buffer.from(key.publicKeySpki!),
        format: "der",
        type: "spki",
      });
      const rsaPss = (hash: string, salt: number, signature: Uint8Array) =>
        nodeVerify(hash, data, {
          key: publicKey,
          padding: constants.RSA_PKCS1_PSS_PADDING,
          saltLength: salt,
        }, signature);

      const plain = await token.sign(key, data);
      assert.equal(plain.mechanism, "CKM_SHA256_RSA_PKCS_PSS");
      assert.equal(plain.mechanism, key.mechanism);
      assert.ok(rsaPss("sha256", 32, plain.signature));

      const digest = createHash("sha384").update(data).digest();
      const viaDigest = await token.sign(key, digest, "sha-384");
      assert.equal(viaDigest.mechanism, "CKM_RSA_PKCS_PSS");
      assert.ok(rsaPss("sha384", 48, viaDigest.signature), "a signature over the message");
    }),
});
