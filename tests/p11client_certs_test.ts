/**
 * Certificates through the client module (libsvcd-pkcs11.so), against svcd through nginx: each
 * key's certificate, stored in the token with the key's CKA_ID, comes from GET /token and shows as
 * a CKO_CERTIFICATE object beside its keys with the same CKA_ID, in pkcs11-tool's and p11tool's
 * listings and to C_FindObjects; its attributes are checked against asn1js's reading of the
 * certificate. EC P-256, RSA-3072 (PSS and PKCS #1 v1.5) and Ed25519 on SoftHSM2, where
 * osslsigncode also signs a PE file through the module with the key and certificate from the token
 * (EC, and the RSA key that signs PKCS #1 v1.5) and `osslsigncode verify` accepts it against the CA; ML-DSA-44/65/87 and the composite on the test module (svcmod), each
 * certificate's signature checked by @noble/post-quantum. The certificates are made by
 * `svcd ca certify` under a CA whose key is in the same token.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import {
  constants,
  createHash,
  createPublicKey,
  verify as nodeVerify,
  X509Certificate,
} from "node:crypto";
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import * as asn1js from "asn1js";
import {
  CKA,
  CKC,
  CKF_MECHANISM,
  CKG,
  CKM,
  CKO,
  CKR,
  decodeMechanismInfo,
  encodeMechanism,
  encodePssParams,
  Pkcs11Error,
  readUlongs,
  SIZE,
  ulongBytes,
} from "../ffi/pkcs11/mod.ts";
import {
  acquireModule,
  findObjects,
  getAttributes,
  openSession,
  releaseModule,
  signOnceSync,
} from "../lib/token/mod.ts";
import {
  CLIENT_MODULE,
  type ClientBed,
  clientBedTest,
  run,
  runOk,
  type TokenKey,
  tokenListing,
} from "./support/p11client.ts";
import { makeTestCa, openssl, type TestCa } from "./support/ca.ts";
import { readCertificates } from "../lib/ocsp/mod.ts";
import { bytesEqual } from "../lib/bytes/mod.ts";
import { minimalPe, PE_CODE_OFFSET } from "./support/pe.ts";

const KEYS = {
  "k-ec": "ec-p256",
  "k-rsa": "rsa-3072",
  "k-rsa15": "rsa-3072-pkcs1v15",
  "k-ed": "ed25519",
  "k-bare": "ec-p256",
};
const CERTIFIED = ["k-ec", "k-rsa", "k-rsa15", "k-ed"];
const PQ_KEYS = {
  "k-44": "ml-dsa-44",
  "k-65": "ml-dsa-65",
  "k-87": "ml-dsa-87",
  "k-comp": "composite-mldsa65-ed25519",
};

/** Attributes of certificate objects the FFI constants do not name. */
const CKA_TRUSTED = 0x86;
const CKA_CERTIFICATE_CATEGORY = 0x87;
const CKA_CHECK_VALUE = 0x90;
const CK_CERTIFICATE_CATEGORY_TOKEN_USER = 1;

const ENGINE = "/usr/lib/x86_64-linux-gnu/engines-3/pkcs11.so";

/** A key as GET /token lists it, with its certificate (base64 DER) when it has one. */
type ListedKey = TokenKey & { certificate?: string };

/** CKA_ID as the module gives it: SHA-1 of the raw public key, hex. */
function moduleKeyId(key: TokenKey): string {
  return createHash("sha1").update(Uint8Array.fromBase64(key.public_key_raw)).digest("hex");
}

/** `svcd ca certify` of the token key `label` for `profile`, its `n`th: the certificate's DER. */
async function certify(
  ca: TestCa,
  dir: string,
  label: string,
  n: number,
  profile = "code-signing",
): Promise<Uint8Array> {
  const pem = `${dir}/${label}.${n}.pem`;
  const r = await ca.run("certify", [
    ...["--key-label", label, "--profile", profile, "--out", pem],
  ]);
  assert.equal(r.code, 0, r.text);
  return readCertificates(await Deno.readFile(pem))[0].der;
}

/** The objects pkcs11-tool lists: kind (first word), label and ID of each. */
function pkcs11ToolObjects(out: string): Array<{ kind: string; label?: string; id?: string }> {
  return out.split(/\n(?=\S)/).map((block) => ({
    kind: block.split(/\s/)[0],
    label: block.match(/^\s+label:\s+(.*)$/m)?.[1].trim(),
    id: block.match(/^\s+ID:\s+([0-9a-f]+)\s*$/m)?.[1],
  }));
}

/** The objects p11tool lists: its URL's `type` and `object`, and the ID, hex without colons. */
function p11toolObjects(out: string): Array<{ type?: string; label?: string; id?: string }> {
  return out.split(/^Object \d+:/m).slice(1).map((block) => {
    const url = block.match(/URL:\s*(\S+)/)?.[1] ?? "";
    return {
      type: url.match(/[;:]type=([^;]+)/)?.[1],
      label: url.match(/[;:]object=([^;]+)/)?.[1],
      id: block.match(/^\s*ID:\s*([0-9a-f:]+)\s*$/m)?.[1].replaceAll(":", ""),
    };
  });
}

/** The DER of the certificate's serialNumber, issuer and subject, as asn1js reads them. */
function certificateFields(
  der: Uint8Array,
): { serial: Uint8Array; issuer: Uint8Array; subject: Uint8Array } {
  const parsed = asn1js.fromBER(der);
  assert.notEqual(parsed.offset, -1, "asn1js reads the certificate");
  const tbs = (parsed.result as asn1js.Sequence).valueBlock.value[0] as asn1js.Sequence;
  const parts = tbs.valueBlock.value;
  const at = parts[0].idBlock.tagClass === 3 ? 1 : 0; // [0] version present
  const bytes = (i: number) => new Uint8Array(parts[at + i].valueBeforeDecodeView);
  return { serial: bytes(0), issuer: bytes(2), subject: bytes(4) };
}

/** Runs `fn` on a session of the client module loaded into this process with `env`. */
function withClientSession<T>(
  env: Record<string, string>,
  fn: (mod: ReturnType<typeof acquireModule>, session: number) => T,
): T {
  for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
  const mod = acquireModule(CLIENT_MODULE);
  try {
    const session = openSession(mod, 0);
    try {
      return fn(mod, session);
    } finally {
      mod.fn.C_CloseSession(session);
    }
  } finally {
    releaseModule(mod);
  }
}

/**
 * A CA of key type `caKeyType` in the bed's token, the `certified` keys certified under it for
 * `profile`: the CA, each certificate (DER) by label, and the keys as GET /token lists them then.
 */
async function certifyKeys(
  bed: ClientBed,
  caKeyType: string,
  certified: string[],
  profile: string,
): Promise<{ ca: TestCa; certs: Map<string, Uint8Array>; keys: Map<string, ListedKey> }> {
  const ca = await makeTestCa(bed.token, {
    keyLabel: "ca",
    keyType: caKeyType,
    dir: `${bed.dir}/ca`,
  });
  const certs = new Map<string, Uint8Array>();
  for (const label of certified) certs.set(label, await certify(ca, bed.dir, label, 1, profile));
  const keys = (await tokenListing(bed)).keys as Map<string, ListedKey>;
  for (const label of certified) {
    assert.equal(keys.get(label)!.certificate, certs.get(label)!.toBase64(), `/token: ${label}'s`);
  }
  return { ca, certs, keys };
}

/** pkcs11-tool lists each of `keys` with its private and public key and, when certified, its
 * certificate, all with the key's ID. */
async function assertPkcs11ToolListing(
  env: Record<string, string>,
  keys: Map<string, ListedKey>,
  certified: string[],
): Promise<void> {
  const out = (await runOk(["pkcs11-tool", "--module", CLIENT_MODULE, "--list-objects"], env))
    .stdout;
  const objects = pkcs11ToolObjects(out);
  for (const [label, key] of keys) {
    const mine = objects.filter((o) => o.label === label);
    const want = certified.includes(label)
      ? ["Certificate", "Private", "Public"]
      : ["Private", "Public"];
    assert.deepEqual(mine.map((o) => o.kind).toSorted(), want, `${label}:\n${out}`);
    for (const o of mine) assert.equal(o.id, moduleKeyId(key), `${label}: ${o.kind}`);
  }
}

/** p11tool lists exactly the `certified` keys' certificates, each with its private key's ID. */
async function assertP11toolListing(
  env: Record<string, string>,
  keys: Map<string, ListedKey>,
  certified: string[],
): Promise<void> {
  const p11tool = async (what: string) =>
    p11toolObjects((await runOk(["p11tool", "--provider", CLIENT_MODULE, what], env)).stdout);
  const listedCerts = await p11tool("--list-all-certs");
  assert.deepEqual(listedCerts.map((o) => o.label).toSorted(), certified.toSorted());
  const all = await p11tool("--list-all");
  for (const label of keys.keys()) {
    const cert = listedCerts.find((o) => o.label === label);
    const privateKey = all.find((o) => o.label === label && o.type === "private");
    assert.equal(privateKey?.id, moduleKeyId(keys.get(label)!), label);
    if (!certified.includes(label)) {
      assert.ok(!all.some((o) => o.label === label && o.type === "cert"), label);
      continue;
    }
    assert.equal(cert?.type, "cert");
    assert.equal(cert?.id, privateKey?.id, `${label}: the private key beside its certificate`);
  }
}

/**
 * C_FindObjects finds each certificate by class and ID and by label and type; its attributes are
 * what asn1js reads in it; a key without a certificate has no certificate object.
 */
function assertCertificateObjects(
  env: Record<string, string>,
  keys: Map<string, ListedKey>,
  certs: Map<string, Uint8Array>,
): void {
  withClientSession(env, (mod, session) => {
    const allCerts = findObjects(mod, session, [{
      type: CKA.CLASS,
      value: ulongBytes(CKO.CERTIFICATE),
    }]);
    assert.equal(allCerts.length, certs.size);
    for (const [label, key] of keys) {
      const id = Uint8Array.fromHex(moduleKeyId(key));
      const byId = findObjects(mod, session, [
        { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
        { type: CKA.ID, value: id },
      ]);
      const byLabel = findObjects(mod, session, [
        { type: CKA.LABEL, value: new TextEncoder().encode(label) },
        { type: CKA.CERTIFICATE_TYPE, value: ulongBytes(CKC.X_509) },
      ]);
      assert.deepEqual(byLabel, byId, label);
      const der = certs.get(label);
      if (der === undefined) {
        assert.deepEqual(byId, [], `${label}: no certificate, no certificate object`);
        continue;
      }
      assert.equal(byId.length, 1, label);
      const a = getAttributes(mod, session, byId[0], [
        CKA.VALUE,
        CKA.SUBJECT,
        CKA.ISSUER,
        CKA.SERIAL_NUMBER,
        CKA.ID,
        CKA.LABEL,
        CKA.TOKEN,
        CKA.PRIVATE,
        CKA_TRUSTED,
        CKA_CERTIFICATE_CATEGORY,
        CKA_CHECK_VALUE,
        CKA.PUBLIC_KEY_INFO,
      ]);
      const fields = certificateFields(der);
      assert.deepEqual(a.get(CKA.VALUE), der);
      assert.deepEqual(a.get(CKA.SUBJECT), fields.subject);
      assert.deepEqual(a.get(CKA.ISSUER), fields.issuer);
      assert.deepEqual(a.get(CKA.SERIAL_NUMBER), fields.serial);
      assert.deepEqual(a.get(CKA.ID), id);
      assert.equal(new TextDecoder().decode(a.get(CKA.LABEL)!), label);
      assert.deepEqual(a.get(CKA.TOKEN), Uint8Array.of(1));
      assert.deepEqual(a.get(CKA.PRIVATE), Uint8Array.of(0));
      assert.deepEqual(a.get(CKA_TRUSTED), Uint8Array.of(0));
      assert.deepEqual(
        a.get(CKA_CERTIFICATE_CATEGORY),
        ulongBytes(CK_CERTIFICATE_CATEGORY_TOKEN_USER),
      );
      assert.deepEqual(
        a.get(CKA_CHECK_VALUE),
        new Uint8Array(createHash("sha1").update(der).digest().subarray(0, 3)),
      );
      assert.deepEqual(a.get(CKA.PUBLIC_KEY_INFO), Uint8Array.fromBase64(key.public_key!));
      // A key's attribute on a certificate: CKR_ATTRIBUTE_TYPE_INVALID, the value unavailable.
      assert.equal(getAttributes(mod, session, byId[0], [CKA.KEY_TYPE]).get(CKA.KEY_TYPE), null);
      // Not a key: C_SignInit refuses the handle.
      const mech = encodeMechanism(CKM.ECDSA_SHA256);
      assert.equal(mod.fn.C_SignInit(session, mech.bytes, byId[0]), CKR.KEY_HANDLE_INVALID);
    }
  });
}

const SHA2_DIGEST_INFO = {
  sha256: "3031300d060960864801650304020105000420",
  sha384: "3041300d060960864801650304020205000430",
  sha512: "3051300d060960864801650304020305000440",
} as const;

/**
 * Through the client module, an rsa-3072-pkcs1v15 key (`v15`): CKM_RSA_PKCS signs a DER
 * DigestInfo of SHA-256/384/512 and CKM_SHA256_RSA_PKCS a message, both checked by node:crypto
 * as RSASSA-PKCS1-v1_5 over the message; any other input to CKM_RSA_PKCS is CKR_DATA_INVALID;
 * neither key signs with the other's scheme, and CKA_ALLOWED_MECHANISMS says which is whose.
 */
function assertDigestInfoSigning(env: Record<string, string>, v15: TokenKey, pss: TokenKey): void {
  const message = new TextEncoder().encode("an Authenticode SpcIndirectDataContent");
  const publicKey = createPublicKey({
    key: Buffer.from(Uint8Array.fromBase64(v15.public_key!)),
    format: "der",
    type: "spki",
  });
  const valid = (hash: string, signature: Uint8Array) =>
    nodeVerify(hash, message, { key: publicKey, padding: constants.RSA_PKCS1_PADDING }, signature);
  withClientSession(env, (mod, session) => {
    const privateKey = (key: TokenKey) =>
      findObjects(mod, session, [
        { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
        { type: CKA.ID, value: Uint8Array.fromHex(moduleKeyId(key)) },
      ])[0];
    const sign = (key: TokenKey, mechanism: number, data: Uint8Array): Uint8Array | number => {
      try {
        return signOnceSync(mod, session, privateKey(key), { mechanism }, data, 384);
      } catch (err) {
        if (err instanceof Pkcs11Error) return err.rv;
        throw err;
      }
    };
    const allowed = (key: TokenKey) => {
      const bytes = getAttributes(mod, session, privateKey(key), [CKA.ALLOWED_MECHANISMS])
        .get(CKA.ALLOWED_MECHANISMS)!;
      return readUlongs(bytes);
    };
    assert.ok(allowed(v15).includes(CKM.RSA_PKCS) && allowed(v15).includes(CKM.SHA256_RSA_PKCS));
    assert.ok(!allowed(v15).some((m) => m === CKM.RSA_PKCS_PSS || m === CKM.SHA256_RSA_PKCS_PSS));
    assert.ok(!allowed(pss).some((m) => m === CKM.RSA_PKCS || m === CKM.SHA256_RSA_PKCS));
    // C_GetMechanismInfo: both v1.5 mechanisms sign and verify, for 3072-bit keys.
    for (const mechanism of [CKM.RSA_PKCS, CKM.SHA256_RSA_PKCS]) {
      const buf = new Uint8Array(SIZE.CK_MECHANISM_INFO);
      assert.equal(mod.fn.C_GetMechanismInfo(0, mechanism, buf), CKR.OK);
      const info = decodeMechanismInfo(buf);
      const both = CKF_MECHANISM.SIGN | CKF_MECHANISM.VERIFY;
      assert.equal(info.flags & both, both);
      assert.deepEqual([info.minKeySize, info.maxKeySize], [3072, 3072]);
    }

    for (const [hash, prefix] of Object.entries(SHA2_DIGEST_INFO)) {
      const info = Uint8Array.fromHex(prefix + createHash(hash).update(message).digest("hex"));
      const signature = sign(v15, CKM.RSA_PKCS, info);
      assert.ok(signature instanceof Uint8Array && valid(hash, signature), `${hash} DigestInfo`);
    }
    const whole = sign(v15, CKM.SHA256_RSA_PKCS, message);
    assert.ok(whole instanceof Uint8Array && valid("sha256", whole), "CKM_SHA256_RSA_PKCS");

    const digest = createHash("sha256").update(message).digest("hex");
    const notDigestInfo = {
      "a bare digest": digest,
      "a SHA-1 DigestInfo": "3021300906052b0e03021a05000414" + "ab".repeat(20),
      "a SHA-256 prefix, a digest one byte short": SHA2_DIGEST_INFO.sha256 + digest.slice(2),
      "a SHA-256 DigestInfo and a byte more": SHA2_DIGEST_INFO.sha256 + digest + "00",
      "SHA-256 without the NULL parameters": "302f300b06096086480165030402010420" + digest,
      "nothing": "",
    };
    for (const [what, hex] of Object.entries(notDigestInfo)) {
      assert.equal(sign(v15, CKM.RSA_PKCS, Uint8Array.fromHex(hex)), CKR.DATA_INVALID, what);
    }
    // Each key signs with its own scheme only.
    const pssInfo = Uint8Array.fromHex(SHA2_DIGEST_INFO.sha256 + digest);
    assert.equal(sign(pss, CKM.RSA_PKCS, pssInfo), CKR.KEY_TYPE_INCONSISTENT);
    assert.equal(sign(pss, CKM.SHA256_RSA_PKCS, message), CKR.KEY_TYPE_INCONSISTENT);
    const pssMechanism = encodeMechanism(
      CKM.SHA256_RSA_PKCS_PSS,
      encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32),
    );
    const rv = mod.fn.C_SignInit(session, pssMechanism.bytes, privateKey(v15));
    assert.equal(rv, CKR.KEY_TYPE_INCONSISTENT, "PSS with the PKCS #1 v1.5 key");
  });
}

clientBedTest(
  "client module: each key's certificate beside its keys (pkcs11-tool, p11tool, C_FindObjects), " +
    "and Authenticode with osslsigncode",
  KEYS,
  async (bed, t) => {
    const { ca, certs, keys } = await certifyKeys(bed, "ec-p256", CERTIFIED, "code-signing");
    const key = (label: string) => keys.get(label)!;
    const env = bed.env;

    await t.step("pkcs11-tool --list-objects: each certificate beside its keys", async () => {
      await assertPkcs11ToolListing(env, keys, CERTIFIED);
    });

    await t.step(
      "pkcs11-tool --read-object: the certificate, which openssl verify accepts",
      async () => {
        for (const label of CERTIFIED) {
          const out = `${bed.dir}/${label}.read.der`;
          await runOk([
            ...["pkcs11-tool", "--module", CLIENT_MODULE, "--read-object", "--type", "cert"],
            ...["--id", moduleKeyId(key(label)), "-o", out],
          ], env);
          const der = await Deno.readFile(out);
          assert.deepEqual(der, certs.get(label));
          const pem = `${bed.dir}/${label}.read.pem`;
          await openssl(["x509", "-inform", "DER", "-in", out, "-out", pem]);
          await openssl(["verify", "-CAfile", ca.caPem, pem]);
        }
      },
    );

    await t.step("p11tool --list-all-certs and --list-all: each with its key's ID", async () => {
      await assertP11toolListing(env, keys, CERTIFIED);
    });

    await t.step("C_FindObjects by class, ID and label; the attributes tools read", () => {
      assertCertificateObjects(env, keys, certs);
    });

    // libp11 0.4.12 (Debian 12) stops listing keys at a key type it does not know (Ed25519).
    const signEnv = { ...env, SVCD_PKCS11_KEY_TYPES: "ec-p256,rsa-3072,rsa-3072-pkcs1v15" };
    const pe = `${bed.dir}/app.exe`;
    await Deno.writeFile(pe, minimalPe());
    const osslsign = (label: string, out: string) =>
      run([
        ...["osslsigncode", "sign", "-pkcs11engine", ENGINE, "-pkcs11module", CLIENT_MODULE],
        ...["-pkcs11cert", `pkcs11:object=${label};type=cert`],
        ...["-key", `pkcs11:object=${label};type=private`],
        ...["-h", "sha256", "-n", "svcd test", "-in", pe, "-out", out],
      ], signEnv);
    const verify = (file: string, caFile: string) =>
      run(["osslsigncode", "verify", "-CAfile", caFile, "-in", file], {});

    /** osslsigncode signs with `label`'s key and certificate; osslsigncode verify accepts it. */
    const signAndVerify = async (label: string) => {
      const signed = `${bed.dir}/app.${label}.exe`;
      const r = await osslsign(label, signed);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const v = await verify(signed, ca.caPem);
      assert.equal(v.code, 0, v.stdout + v.stderr);
      // The signer is the token's certificate.
      const extracted = `${bed.dir}/app.${label}.p7`;
      await runOk(["osslsigncode", "extract-signature", "-in", signed, "-out", extracted], {});
      const printed = await openssl(["pkcs7", "-inform", "DER", "-in", extracted, "-print_certs"]);
      const signer = new X509Certificate(printed);
      assert.deepEqual(new Uint8Array(signer.raw), certs.get(label));

      const changed = await Deno.readFile(signed);
      changed[PE_CODE_OFFSET] ^= 0xff;
      await Deno.writeFile(`${bed.dir}/app.${label}.changed.exe`, changed);
      assert.notEqual(
        (await verify(`${bed.dir}/app.${label}.changed.exe`, ca.caPem)).code,
        0,
        "a changed byte",
      );
      // The client CA of the bed's nginx did not issue the signer's certificate.
      assert.notEqual((await verify(signed, bed.pki.caCert)).code, 0, "another CA");
    };

    await t.step(
      "osslsigncode sign through the module (EC): osslsigncode verify accepts it",
      () => signAndVerify("k-ec"),
    );
    // osslsigncode signs with OpenSSL's PKCS#7 code, which makes RSA PKCS#1 v1.5 signatures only
    // (CKM_RSA_PKCS over a DigestInfo): an rsa-3072-pkcs1v15 key signs them.
    await t.step(
      "osslsigncode sign through the module (RSA PKCS #1 v1.5): osslsigncode verify accepts it",
      () => signAndVerify("k-rsa15"),
    );
    // An rsa-3072 key signs PSS only: the module offers it no CKM_RSA_PKCS, and nothing is signed.
    await t.step("osslsigncode sign with the RSA-PSS key: refused, no file written", async () => {
      const signed = `${bed.dir}/app.k-rsa.exe`;
      const r = await osslsign("k-rsa", signed);
      assert.notEqual(r.code, 0, r.stdout + r.stderr);
      await assert.rejects(Deno.stat(signed), Deno.errors.NotFound);
    });

    await t.step("C_Sign with CKM_RSA_PKCS takes exactly a SHA-2 DigestInfo", () => {
      assertDigestInfoSigning(env, key("k-rsa15"), key("k-rsa"));
    });

    await t.step(
      "a renewed certificate replaces the old one in a process that keeps the module",
      async () => {
        for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
        const mod = acquireModule(CLIENT_MODULE);
        const label = new TextEncoder().encode("k-ec");
        // In a session of its own, each time: C_OpenSession refreshes a listing older than 5 s.
        const look = () => {
          const session = openSession(mod, 0);
          try {
            const [privateKey] = findObjects(mod, session, [
              { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
              { type: CKA.LABEL, value: label },
            ]);
            const [certificate] = findObjects(mod, session, [
              { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
              { type: CKA.LABEL, value: label },
            ]);
            const value = certificate === undefined
              ? undefined
              : getAttributes(mod, session, certificate, [CKA.VALUE]).get(CKA.VALUE);
            return { privateKey, value };
          } finally {
            mod.fn.C_CloseSession(session);
          }
        };
        try {
          const before = look();
          assert.deepEqual(before.value, certs.get("k-ec"));
          const renewed = await certify(ca, bed.dir, "k-ec", 2);
          const deadline = Date.now() + 20_000;
          let now = look();
          while (!(now.value && bytesEqual(now.value, renewed)) && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 200));
            now = look();
          }
          assert.deepEqual(now.value, renewed, "the renewed certificate, within 20 s");
          assert.equal(now.privateKey, before.privateKey, "the key keeps its handle");
        } finally {
          releaseModule(mod);
        }
      },
    );
  },
);

clientBedTest(
  "client module: ML-DSA-44/65/87 and composite keys' certificates beside their keys (svcmod)",
  PQ_KEYS,
  async (bed, t) => {
    const certified = Object.keys(PQ_KEYS);
    const { ca, certs, keys } = await certifyKeys(bed, "ml-dsa-65", certified, "document-signing");
    const [caCert] = readCertificates(await Deno.readFile(ca.caPem));
    await t.step("each certificate's signature: @noble/post-quantum under the CA's key", () => {
      for (const label of certified) {
        const [cert] = readCertificates(certs.get(label)!);
        assert.ok(ml_dsa65.verify(cert.signature, cert.tbs, caCert.publicKey), label);
        const tampered = cert.tbs.slice();
        tampered[tampered.length - 1] ^= 1;
        assert.equal(ml_dsa65.verify(cert.signature, tampered, caCert.publicKey), false);
      }
    });
    await t.step("pkcs11-tool --list-objects: each certificate beside its keys", async () => {
      await assertPkcs11ToolListing(bed.env, keys, certified);
    });
    await t.step("p11tool --list-all-certs and --list-all: each with its key's ID", async () => {
      await assertP11toolListing(bed.env, keys, certified);
    });
    await t.step("C_FindObjects by class, ID and label; the attributes tools read", () => {
      assertCertificateObjects(bed.env, keys, certs);
    });
  },
  { module: "svcmod" },
);
