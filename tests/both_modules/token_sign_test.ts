/**
 * Sign and verify with every key type the selected module offers, checked by an independent
 * implementation (Web Crypto, node:crypto, @noble/post-quantum). Types the module does not offer
 * (C_GetMechanismInfo) are skipped with the reason logged.
 */
import assert from "node:assert/strict";
import { createPublicKey, verify as nodeVerify } from "node:crypto";
import { KEY_TYPE_NAMES, Pkcs11Error, type SigningKey, type Token } from "../../lib/token/mod.ts";
import { verifyIndependently } from "../../lib/token_admin/independent_verify.ts";
import { makeTestToken, openTestToken, type TestToken, testTokenPin } from "../support/token.ts";

const te = new TextEncoder();

/** node:crypto as a second, separate oracle for the classical types (Web Crypto is the first). */
function nodeCryptoVerify(
  key: SigningKey,
  message: Uint8Array,
  signature: Uint8Array,
): boolean | undefined {
  if (!key.publicKeySpki || !["ec-p256", "ec-p384", "ed25519", "rsa-3072"].includes(key.keyType)) {
    return undefined;
  }
  const pub = createPublicKey({ key: Buffer.from(key.publicKeySpki), format: "der", type: "spki" });
  switch (key.keyType) {
    case "ec-p256":
      return nodeVerify("sha256", message, { key: pub, dsaEncoding: "ieee-p1363" }, signature);
    case "ec-p384":
      return nodeVerify("sha384", message, { key: pub, dsaEncoding: "ieee-p1363" }, signature);
    case "ed25519":
      return nodeVerify(null, message, pub, signature);
    case "rsa-3072":
      return nodeVerify("sha256", message, {
        key: pub,
        padding: 6, /* RSA_PKCS1_PSS_PADDING */
        saltLength: 32,
      }, signature);
    default:
      return undefined;
  }
}

Deno.test({
  name: "token: sign + verify for every offered key type, checked independently",
  sanitizeResources: false,
  fn: async (t) => {
    const wanted = Object.fromEntries(KEY_TYPE_NAMES.map((type) => [`k-${type}`, type]));
    const made: TestToken = await makeTestToken({ keys: wanted });
    let token: Token | undefined;
    try {
      token = openTestToken(made);
      await token.login(testTokenPin(made));
      for (const [label, type] of Object.entries(wanted)) {
        await t.step({
          name: `${type}`,
          ignore: !made.keys.includes(label),
          fn: async () => {
            const key = (await token!.key(label))!;
            assert.ok(key, `key ${label} not found`);
            assert.equal(key.keyType, type);
            for (
              const message of [
                te.encode(`svcd ${type}`),
                new Uint8Array(0),
                crypto.getRandomValues(new Uint8Array(4096)),
              ]
            ) {
              const { signature: sig, mechanism } = await token!.sign(key, message);
              assert.equal(mechanism, key.mechanism, "the token names the mechanism it used");
              const independent = await verifyIndependently(key, message, sig);
              assert.ok(independent.ok, `${independent.verifier} rejects a ${type} signature`);
              const viaNode = nodeCryptoVerify(key, message, sig);
              if (viaNode !== undefined) {
                assert.ok(viaNode, `node:crypto rejects a ${type} signature`);
              }
              assert.equal(await token!.verify(key, message, sig), true);
              const other = te.encode("another message");
              assert.equal(
                await token!.verify(key, other, sig),
                false,
                "module accepts a wrong message",
              );
              assert.equal(
                (await verifyIndependently(key, other, sig)).ok,
                false,
                "oracle accepts a wrong message",
              );
              const flipped = sig.slice();
              flipped[flipped.length >> 1] ^= 0x01;
              assert.equal(
                await token!.verify(key, message, flipped),
                false,
                "module accepts a damaged signature",
              );
              assert.equal(
                await token!.verify(key, message, sig.subarray(0, sig.length - 1)),
                false,
              );
            }
          },
        });
      }
      for (const label of Object.keys(made.skipped)) {
        console.log(`skipped ${label}: ${made.skipped[label]}`);
      }
    } finally {
      token?.close();
      await made.cleanup();
    }
  },
});

Deno.test({
  name:
    "token: mac() is HMAC-SHA256 with the non-extractable svc-audit key; errors name function and code",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken();
    const token = openTestToken(made);
    try {
      await token.login(testTokenPin(made));
      const a = await token.mac("svc-audit", te.encode("line 1"));
      const b = await token.mac("svc-audit", te.encode("line 1"));
      const c = await token.mac("svc-audit", te.encode("line 2"));
      assert.equal(a.length, 32);
      assert.deepEqual(a, b);
      assert.notDeepEqual(a, c);
      await assert.rejects(
        token.mac("no-such-secret", te.encode("x")),
        /no secret key labelled 'no-such-secret'/,
      );
      assert.equal(await token.key("no-such-key"), undefined);
      const key = (await token.key("svc-audit-sign"))!;
      const err = await token.sign({ ...key }, te.encode("x")).catch((e) => e);
      assert.match(String(err.message), /not obtained from this token/);
      assert.ok(!(err instanceof Pkcs11Error));
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
