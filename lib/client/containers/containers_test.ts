/**
 * `svcd client sign --format cms | jws` and `verify --format cms` against the stand-in svcd with
 * software keys certified by a test PKI (root → intermediate → key): each container checked by a
 * verifier the client does not use — `openssl cms -verify` (EC, RSA-PSS, RSA PKCS #1 v1.5;
 * certtool for Ed25519), pkijs for the
 * SignedData's structure with @noble over the signed attributes (ML-DSA), the `jose` package over
 * JWS with the key of the x5c certificate, and @noble over the JWS signing input (ML-DSA).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as asn1js from "asn1js";
import * as jose from "jose";
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import { type FakeKey, fakeKey, type FakeSvcd } from "../../../tests/support/fake_svcd.ts";
import { client, withFake } from "../../../tests/support/fake_client.ts";
import { makeSigningPki, type SigningPki } from "../../../tests/support/signing_pki.ts";
import { verifyIndependently } from "../../../tests/support/oracle.ts";
import { runCommand } from "../../../tests/support/command.ts";
import { readSignedData } from "../../../tests/support/cms_pkijs.ts";
import { spki } from "../../der/mod.ts";
import { KEY_TYPES, type KeyTypeName } from "../../token/mod.ts";

const pki = await makeSigningPki();

/** The SPKI of a fake key (ML-DSA and the composite: built from the raw key). */
function spkiOf(key: FakeKey): Uint8Array {
  return key.publicKeySpki ??
    spki(KEY_TYPES[key.keyType as KeyTypeName].spkiAlgorithm!, key.publicKeyRaw);
}

/** A fake key of `type` with a certificate from the test PKI (`notAfterDays` < 0: expired). */
async function certifiedKey(label: string, type: string, notAfterDays = 30): Promise<FakeKey> {
  // RSA without digest mode: the fake signs PSS only over a message it knows.
  const digests = type.startsWith("ec-")
    ? ["sha-256", "sha-384", "sha-512"]
    : type.startsWith("ml-dsa")
    ? ["ml-dsa-mu"]
    : [];
  const key = fakeKey(label, type, digests);
  key.certificate = await pki.certify(spkiOf(key), `CN=${label},O=Example`, { notAfterDays });
  key.chain = [pki.intermediate, pki.root];
  return key;
}

async function writeCa(dir: string, p: SigningPki = pki): Promise<string> {
  await Deno.writeTextFile(`${dir}/ca.pem`, p.rootPem);
  return `${dir}/ca.pem`;
}

function opensslCmsVerify(file: string, p7s: string, ca: string) {
  return runCommand("openssl", [
    "cms",
    "-verify",
    "-binary",
    "-inform",
    "DER",
    "-in",
    p7s,
    "-content",
    file,
    "-CAfile",
    ca,
    "-out",
    "/dev/null",
  ]);
}

/**
 * GnuTLS's check of the SignedData (certtool --p7-verify): Ed25519's oracle, as OpenSSL 3.0
 * (Debian 12) has no Ed25519 in CMS — it neither signs nor verifies one ("invalid digest").
 */
function certtoolVerify(file: string, p7s: string, ca: string) {
  return runCommand("certtool", [
    "--p7-verify",
    "--inder",
    "--infile",
    p7s,
    "--load-data",
    file,
    "--load-ca-certificate",
    ca,
  ]);
}

/** A copy of `file` with one byte changed. */
async function changedCopy(file: string): Promise<string> {
  const bytes = await Deno.readFile(file);
  bytes[bytes.length >> 1] ^= 1;
  await Deno.writeFile(`${file}.changed`, bytes);
  return `${file}.changed`;
}

/** `svcd client verify --format cms` of `file` and `p7s` against the test PKI's root. */
async function verifyHere(fake: FakeSvcd, dir: string, file: string, p7s = `${file}.p7s`) {
  const ca = await writeCa(dir);
  return await client(fake, ["verify", "--format", "cms", "--signer-ca-cert", ca, file, p7s]);
}

async function signCms(fake: FakeSvcd, label: string, file: string) {
  const r = await client(fake, ["sign", "--key-label", label, "--format", "cms", file]);
  assert.equal(r.code, 0, r.err);
  return r;
}

/**
 * A fake with one certified key of `type` ("k"), and `size` random bytes in `dir`/f signed by it
 * with --format cms (f.p7s), for `fn`.
 */
async function withCmsSigned(
  type: string,
  size: number,
  fn: (fake: FakeSvcd, dir: string, file: string, key: FakeKey) => Promise<void>,
): Promise<void> {
  const key = await certifiedKey("k", type);
  await withFake([key], async (fake, dir) => {
    const file = `${dir}/f`;
    await Deno.writeFile(file, crypto.getRandomValues(new Uint8Array(size)));
    fake.messages.push(await Deno.readFile(file));
    await signCms(fake, "k", file);
    await fn(fake, dir, file, key);
  });
}

for (const type of ["ec-p256", "ec-p384", "rsa-3072", "rsa-3072-pkcs1v15", "ed25519"]) {
  const verifier = type === "ed25519" ? "certtool --p7-verify" : "openssl cms -verify";
  Deno.test(`cms ${type}: ${verifier} accepts it, refuses a changed byte`, async () => {
    await withCmsSigned(type, 1024, async (fake, dir, file) => {
      const ca = await writeCa(dir);
      const check = type === "ed25519" ? certtoolVerify : opensslCmsVerify;
      const ok = await check(file, `${file}.p7s`, ca);
      assert.equal(ok.code, 0, ok.text);
      const bad = await check(await changedCopy(file), `${file}.p7s`, ca);
      assert.notEqual(bad.code, 0, bad.text);
      // svcd client verify --format cms agrees (an RSA key's type follows the signature's name).
      assert.equal((await verifyHere(fake, dir, file)).code, 0);
      assert.equal((await verifyHere(fake, dir, await changedCopy(file), `${file}.p7s`)).code, 1);
      // Only the signed attributes went to /sign: one small message-mode request.
      const signs = fake.requests.filter((q) => q.path === "/sign");
      assert.equal(signs.length, 1);
      assert.equal(signs[0].headers["x-svc-digest"], undefined);
      assert.ok(signs[0].body.length < 200, `${signs[0].body.length} bytes sent`);
    });
  });
}

Deno.test("verify --format cms: 0 for the file, 1 for a changed byte, 1 for another CA", async () => {
  await withCmsSigned("ec-p256", 5000, async (fake, dir, file) => {
    const ca = await writeCa(dir);
    const verify = (f: string, caFile: string) =>
      client(fake, ["verify", "--format", "cms", "--signer-ca-cert", caFile, f, `${file}.p7s`]);
    const ok = await verify(file, ca);
    assert.equal(ok.code, 0, ok.err);
    assert.deepEqual(ok.out, ["Verified OK"]);
    // Checked without svcd: nothing beyond the signing's own requests.
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 1);
    const changed = await verify(await changedCopy(file), ca);
    assert.equal(changed.code, 1);
    assert.match(changed.err, /message digest/);
    const other = await makeSigningPki();
    await Deno.mkdir(`${dir}/other`);
    const wrongCa = await verify(file, await writeCa(`${dir}/other`, other));
    assert.equal(wrongCa.code, 1);
    assert.deepEqual(wrongCa.out, ["Verification failure"]);
    const garbage = `${dir}/garbage.p7s`;
    await Deno.writeFile(garbage, Uint8Array.of(0x30, 0x03, 1, 2, 3));
    assert.equal((await verifyHere(fake, dir, file, garbage)).code, 1);
  });
});

Deno.test("cms ml-dsa-65: pkijs reads the SignedData; @noble verifies the signed attributes", async () => {
  await withCmsSigned("ml-dsa-65", 1024, async (fake, dir, file, key) => {
    const message = await Deno.readFile(file);
    const read = readSignedData(await Deno.readFile(`${file}.p7s`));
    assert.equal(read.signedData.encapContentInfo.eContent, undefined, "detached");
    assert.equal(read.signedData.certificates?.length, 3);
    const si = read.signerInfo;
    assert.equal(si.digestAlgorithm.algorithmId, "2.16.840.1.101.3.4.2.3"); // SHA-512
    assert.equal(si.signatureAlgorithm.algorithmId, "2.16.840.1.101.3.4.3.18");
    assert.equal(si.signatureAlgorithm.algorithmParams, undefined, "parameters absent");
    const md = read.attributes.get("1.2.840.113549.1.9.4") as asn1js.OctetString;
    assert.deepEqual(
      new Uint8Array(md.valueBlock.valueHexView),
      new Uint8Array(createHash("sha512").update(message).digest()),
    );
    const type = read.attributes.get("1.2.840.113549.1.9.3") as asn1js.ObjectIdentifier;
    assert.equal(type.valueBlock.toString(), "1.2.840.113549.1.7.1");
    assert.ok(read.attributes.has("1.2.840.113549.1.9.5"), "signingTime");
    assert.ok(
      ml_dsa65.verify(read.signature, read.signedAttributes, key.publicKeyRaw),
      "@noble ML-DSA-65 (pure, no context)",
    );
    assert.equal((await verifyHere(fake, dir, file)).code, 0);
  });
});

Deno.test("cms composite: the draft's OIDs; the signature checks over the signed attributes", async () => {
  await withCmsSigned("composite-mldsa65-ed25519", 1024, async (fake, dir, file, key) => {
    const read = readSignedData(await Deno.readFile(`${file}.p7s`));
    assert.equal(read.signerInfo.signatureAlgorithm.algorithmId, "1.3.6.1.5.5.7.6.48");
    assert.equal(read.signerInfo.digestAlgorithm.algorithmId, "2.16.840.1.101.3.4.2.3");
    assert.ok(
      await verifyIndependently(
        key.keyType,
        { raw: key.publicKeyRaw },
        read.signedAttributes,
        read.signature,
      ),
    );
    assert.equal((await verifyHere(fake, dir, file)).code, 0);
  });
});

Deno.test("cms: a key without a certificate is refused, naming svcd ca certify", async () => {
  const key = fakeKey("plain", "ec-p256", ["sha-256"]);
  await withFake([key], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(10));
    const r = await client(fake, ["sign", "--key-label", "plain", "--format", "cms", `${dir}/f`]);
    assert.equal(r.code, 1);
    assert.match(r.err, /svcd ca certify --key-label plain --profile /);
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);
    await assert.rejects(Deno.stat(`${dir}/f.p7s`));
  });
});

Deno.test("cms: an expired certificate warns on stderr; the signature is made", async () => {
  const key = await certifiedKey("old", "ec-p256", -1);
  await withFake([key], async (fake, dir) => {
    const file = `${dir}/f`;
    await Deno.writeFile(file, new Uint8Array(100));
    const r = await signCms(fake, "old", file);
    assert.match(r.err, /warning: .*'old' expired/);
    const ca = await writeCa(dir);
    // openssl checks the time and refuses it; so does verify --format cms.
    assert.notEqual((await opensslCmsVerify(file, `${file}.p7s`, ca)).code, 0);
    const ours = await verifyHere(fake, dir, file);
    assert.equal(ours.code, 1);
    assert.match(ours.err, /expired/);
  });
});

Deno.test("cms and jws: a key whose mechanism is not what the name says is refused", async () => {
  const key = await certifiedKey("k", "rsa-3072");
  key.mechanism = "CKM_SHA384_RSA_PKCS_PSS";
  await withFake([key], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(10));
    for (const format of ["cms", "jws"]) {
      const r = await client(fake, ["sign", "--key-label", "k", "--format", format, `${dir}/f`]);
      assert.equal(r.code, 1, format);
      assert.match(r.err, /signs with CKM_SHA384_RSA_PKCS_PSS, not CKM_SHA256_RSA_PKCS_PSS/);
    }
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);
  });
});

const JWS_ALG: Record<string, string> = {
  "ec-p256": "ES256",
  "ec-p384": "ES384",
  "rsa-3072": "PS256",
  "rsa-3072-pkcs1v15": "RS256",
  "ed25519": "EdDSA",
};

/** The key of the JWS's x5c leaf certificate, as jose imports it. */
async function x5cKey(jws: string, alg: string) {
  const header = jose.decodeProtectedHeader(jws);
  const pem = `-----BEGIN CERTIFICATE-----\n${header.x5c![0]}\n-----END CERTIFICATE-----`;
  return await jose.importX509(pem, alg);
}

for (const [type, alg] of Object.entries(JWS_ALG)) {
  Deno.test(`jws ${alg}: jose verifies it with the x5c certificate's key, attached and detached`, async () => {
    const key = await certifiedKey("k", type);
    await withFake([key], async (fake, dir) => {
      const file = `${dir}/f`;
      const payload = crypto.getRandomValues(new Uint8Array(4001));
      await Deno.writeFile(file, payload);
      for (const detached of [false, true]) {
        const out = `${dir}/f.${detached}.jws`;
        const r = await client(fake, [
          "sign",
          "--key-label",
          "k",
          "--format",
          "jws",
          ...(detached ? ["--detached"] : []),
          "--out",
          out,
          file,
        ]);
        assert.equal(r.code, 0, r.err);
        const jws = await Deno.readTextFile(out);
        const parts = jws.split(".");
        assert.equal(parts.length, 3);
        const header = jose.decodeProtectedHeader(jws);
        assert.equal(header.alg, alg);
        assert.deepEqual(header.x5c, [key.certificate!, ...key.chain!].map((c) => c.toBase64()));
        const publicKey = await x5cKey(jws, alg);
        const full = detached
          ? `${parts[0]}.${payload.toBase64({ alphabet: "base64url", omitPadding: true })}.${
            parts[2]
          }`
          : jws;
        if (detached) assert.equal(parts[1], "");
        const verified = await jose.compactVerify(full, publicKey);
        assert.deepEqual(verified.payload, payload);
        const other = new Uint8Array(payload);
        other[0] ^= 1;
        const forged = `${parts[0]}.${
          other.toBase64({ alphabet: "base64url", omitPadding: true })
        }.${parts[2]}`;
        await assert.rejects(jose.compactVerify(forged, publicKey));
      }
    });
  });
}

Deno.test("jws ML-DSA-65: @noble verifies over the signing input; kid without a certificate", async () => {
  const key = fakeKey("pq", "ml-dsa-65", ["ml-dsa-mu"]);
  await withFake([key], async (fake, dir) => {
    const file = `${dir}/f`;
    const payload = crypto.getRandomValues(new Uint8Array(10_000));
    await Deno.writeFile(file, payload);
    const r = await client(fake, ["sign", "--key-label", "pq", "--format", "jws", file]);
    assert.equal(r.code, 0, r.err);
    const jws = await Deno.readTextFile(`${file}.jws`);
    const [h, p, s] = jws.split(".");
    assert.deepEqual(jose.decodeProtectedHeader(jws), { alg: "ML-DSA-65", kid: "pq" });
    assert.deepEqual(Uint8Array.fromBase64(p, { alphabet: "base64url" }), payload);
    const input = new TextEncoder().encode(`${h}.${p}`);
    const sig = Uint8Array.fromBase64(s, { alphabet: "base64url" });
    assert.ok(ml_dsa65.verify(sig, input, key.publicKeyRaw));
    // Digest mode: μ of the signing input went to /sign, not the file.
    const sign = fake.requests.find((q) => q.path === "/sign")!;
    assert.equal(sign.headers["x-svc-digest"], "ml-dsa-mu");
  });
});

Deno.test("jws EdDSA past the body limit: refused before anything is sent", async () => {
  const key = fakeKey("ed", "ed25519", []);
  await withFake([key], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(3000));
    const r = await client(fake, ["sign", "--key-label", "ed", "--format", "jws", `${dir}/f`]);
    assert.equal(r.code, 1);
    assert.match(r.err, /signing input .* is 40\d\d bytes; the server takes at most 2048 bytes/);
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);
    await assert.rejects(Deno.stat(`${dir}/f.jws`));
  }, { maxBody: 2048 });
});

Deno.test("usage: --detached without jws, jws verify, cms verify without a CA file: exit 2", async () => {
  const key = fakeKey("k", "ec-p256", ["sha-256"]);
  await withFake([key], async (fake, dir) => {
    const f = `${dir}/f`;
    for (
      const args of [
        ["sign", "--key-label", "k", "--detached", f],
        ["verify", "--format", "jws", "--key-label", "k", f, f],
        ["verify", "--format", "cms", f, f],
        ["verify", "--format", "cms", "--signer-ca-cert", f, "--key-label", "k", f, f],
      ]
    ) {
      const r = await client(fake, args);
      assert.equal(r.code, 2, args.join(" "));
    }
    assert.equal(fake.requests.length, 0);
  });
});

Deno.test("keys: the certificate's state per key; --out-dir writes LABEL.crt.pem (leaf, chain)", async () => {
  const keys = [
    await certifiedKey("cert", "ec-p256"),
    await certifiedKey("old", "ed25519", -1),
    fakeKey("plain", "ec-p256", ["sha-256"]),
  ];
  await withFake(keys, async (fake, dir) => {
    const r = await client(fake, ["keys", "--out-dir", dir]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out[0], /^LABEL\s+TYPE\s+DIGEST MODES\s+CERTIFICATE$/);
    assert.match(r.out.find((l) => l.startsWith("cert "))!, /\suntil \d{4}-\d\d-\d\d$/);
    assert.match(r.out.find((l) => l.startsWith("old "))!, /\sexpired \(\d{4}-\d\d-\d\d\)$/);
    assert.match(r.out.find((l) => l.startsWith("plain "))!, /\snone$/);
    await assert.rejects(Deno.stat(`${dir}/plain.crt.pem`));
    // openssl takes the file as the leaf and its chain up to the root.
    const ca = await writeCa(dir);
    const leaf = await runCommand("openssl", ["x509", "-in", `${dir}/cert.crt.pem`]);
    await Deno.writeTextFile(`${dir}/leaf.pem`, leaf.stdout);
    const verified = await runCommand("openssl", [
      ...["verify", "-CAfile", ca, "-untrusted", `${dir}/cert.crt.pem`, `${dir}/leaf.pem`],
    ]);
    assert.equal(verified.code, 0, verified.text);
    const pems = (await Deno.readTextFile(`${dir}/cert.crt.pem`)).match(/BEGIN CERTIFICATE/g);
    assert.equal(pems?.length, 3);
  });
});

Deno.test("cms: a listed certificate that is not the key's, or not X.509, is refused", async () => {
  const other = await certifiedKey("other", "ec-p256");
  const mismatched = fakeKey("mismatched", "ec-p256", ["sha-256"]);
  mismatched.certificate = other.certificate;
  const garbled = fakeKey("garbled", "ec-p256", ["sha-256"]);
  garbled.certificate = Uint8Array.of(0x30, 0x03, 0x02, 0x01, 0x01);
  await withFake([mismatched, garbled], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(10));
    for (
      const [label, reason] of [["mismatched", /not of its public key/], [
        "garbled",
        /not a DER X\.509/,
      ]] as const
    ) {
      const r = await client(fake, ["sign", "--key-label", label, "--format", "cms", `${dir}/f`]);
      assert.equal(r.code, 1, label);
      assert.match(r.err, reason);
    }
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);
    await assert.rejects(Deno.stat(`${dir}/f.p7s`));
    const keys = await client(fake, ["keys"]);
    assert.equal(keys.code, 0, keys.err);
    assert.match(keys.out.find((l) => l.startsWith("garbled "))!, /\sunreadable$/);
  });
});
