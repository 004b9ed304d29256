import assert from "node:assert/strict";
import { CKF_MECHANISM, CKG, CKM, encodePssParams } from "../../ffi/pkcs11/mod.ts";
import {
  DIGEST_LENGTH,
  DIGEST_NAMES,
  digestInfo,
  digestMechanism,
  DIGESTS_BY_KEY_TYPE,
  digestSigning,
  offeredDigestNames,
  type OffersFor,
  parseDigestName,
} from "./mechanisms.ts";
import { KEY_TYPE_NAMES, KEY_TYPES } from "./key_types.ts";

const everything: OffersFor = () => true;

Deno.test("digest names: RFC 9530 spelling, any case in, lowercase out", () => {
  assert.deepEqual(DIGEST_NAMES, ["sha-256", "sha-384", "sha-512", "ml-dsa-mu"]);
  assert.equal(parseDigestName("SHA-512"), "sha-512");
  assert.equal(parseDigestName("sha512"), undefined);
  assert.equal(parseDigestName("ML-DSA-MU"), "ml-dsa-mu");
});

Deno.test("every key type has a row; ed25519 and the composite take none", () => {
  for (const t of KEY_TYPE_NAMES) assert.ok(Array.isArray(DIGESTS_BY_KEY_TYPE[t]), t);
  assert.deepEqual(DIGESTS_BY_KEY_TYPE["ed25519"], []);
  assert.deepEqual(DIGESTS_BY_KEY_TYPE["composite-mldsa65-ed25519"], []);
  for (const name of DIGEST_NAMES) {
    assert.equal(digestSigning(KEY_TYPES["ed25519"], name), undefined);
    assert.equal(digestSigning(KEY_TYPES["composite-mldsa65-ed25519"], name), undefined);
  }
});

Deno.test("mechanisms: CKM_ECDSA, CKM_RSA_PKCS_PSS with that hash's parameters, external μ", () => {
  assert.equal(digestSigning(KEY_TYPES["ec-p256"], "sha-512")?.mechanism, CKM.ECDSA);
  assert.equal(digestSigning(KEY_TYPES["ec-p256"], "ml-dsa-mu"), undefined);
  const pss = digestSigning(KEY_TYPES["rsa-3072"], "sha-384")!;
  assert.equal(pss.mechanism, CKM.RSA_PKCS_PSS);
  assert.deepEqual(pss.parameter!().bytes, encodePssParams(CKM.SHA384, CKG.MGF1_SHA384, 48).bytes);
  // sha-256 gives exactly the message form's PSS parameters.
  const message = KEY_TYPES["rsa-3072"].signing[0].parameter!().bytes;
  assert.deepEqual(digestSigning(KEY_TYPES["rsa-3072"], "sha-256")!.parameter!().bytes, message);
  const mu = digestSigning(KEY_TYPES["ml-dsa-65"], "ml-dsa-mu")!;
  assert.equal(mu.mechanism, CKM.ML_DSA_EXTERNAL_MU);
  assert.equal(digestSigning(KEY_TYPES["ml-dsa-65"], "sha-256"), undefined);
});

Deno.test("offeredDigestNames: only what the module offers for signing and verifying", () => {
  assert.deepEqual(offeredDigestNames(KEY_TYPES["ml-dsa-44"], everything), ["ml-dsa-mu"]);
  const noExternalMu: OffersFor = (_s, m) => m !== CKM.ML_DSA_EXTERNAL_MU;
  assert.deepEqual(offeredDigestNames(KEY_TYPES["ml-dsa-44"], noExternalMu), []);
  const signOnly: OffersFor = (_s, _m, flag) => flag === CKF_MECHANISM.SIGN;
  assert.deepEqual(offeredDigestNames(KEY_TYPES["ec-p384"], signOnly), []);
  assert.deepEqual(offeredDigestNames(KEY_TYPES["rsa-3072"], everything), [
    "sha-256",
    "sha-384",
    "sha-512",
  ]);
  assert.deepEqual(offeredDigestNames(KEY_TYPES["ed25519"], everything), []);
});

Deno.test("digestMechanism: the mechanism a digest signature is made with", () => {
  assert.equal(digestMechanism("ec-p384", "sha-256"), "CKM_ECDSA");
  assert.equal(digestMechanism("rsa-3072", "sha-512"), "CKM_RSA_PKCS_PSS");
  assert.equal(digestMechanism("ml-dsa-87", "ml-dsa-mu"), "CKM_ML_DSA_EXTERNAL_MU");
  assert.throws(() => digestMechanism("ed25519", "sha-256"), RangeError);
});

Deno.test("rsa-3072-pkcs1v15: CKM_RSA_PKCS over the DER DigestInfo of each SHA-2 digest", () => {
  const prefixes = {
    "sha-256": "3031300d060960864801650304020105000420",
    "sha-384": "3041300d060960864801650304020205000430",
    "sha-512": "3051300d060960864801650304020305000440",
  } as const;
  for (const [name, prefix] of Object.entries(prefixes) as [keyof typeof prefixes, string][]) {
    const signing = digestSigning(KEY_TYPES["rsa-3072-pkcs1v15"], name)!;
    assert.equal(signing.mechanism, CKM.RSA_PKCS);
    const digest = new Uint8Array(DIGEST_LENGTH[name]).fill(7);
    const hash = signing.digestInfo!;
    assert.equal(digestInfo(hash, digest).toHex(), prefix + digest.toHex());
  }
  assert.equal(digestMechanism("rsa-3072-pkcs1v15", "sha-512"), "CKM_RSA_PKCS");
  assert.equal(digestSigning(KEY_TYPES["rsa-3072-pkcs1v15"], "ml-dsa-mu"), undefined);
});
