import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import * as nodeCrypto from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { runCommand } from "../../tests/support/command.ts";
import { nodeSigner } from "../../tests/support/ocsp.ts";
import {
  keyTypeOfSignatureAlgorithm,
  SIGNATURE_ALGORITHMS,
  signatureFields,
  spkiAlgorithmIdentifier,
} from "./algorithms.ts";
import { parseCertificate, readCertificates } from "./certificate.ts";
import { DerReader, TAG } from "../der/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { KEY_TYPE_NAMES } from "../token/mod.ts";

const NODE_KEYS = {
  "ec-p256": () => nodeCrypto.generateKeyPairSync("ec", { namedCurve: "P-256" }),
  "ec-p384": () => nodeCrypto.generateKeyPairSync("ec", { namedCurve: "P-384" }),
  "ed25519": () => nodeCrypto.generateKeyPairSync("ed25519"),
  "rsa-3072": () => nodeCrypto.generateKeyPairSync("rsa", { modulusLength: 3072 }),
  "rsa-3072-pkcs1v15": () => nodeCrypto.generateKeyPairSync("rsa", { modulusLength: 3072 }),
} as const;

Deno.test("signature table: every key type has an entry and its AlgorithmIdentifier is found back", () => {
  for (const kt of KEY_TYPE_NAMES) {
    const alg = SIGNATURE_ALGORITHMS[kt];
    assert.equal(alg.keyType, kt);
    assert.equal(keyTypeOfSignatureAlgorithm(alg.algorithmIdentifier), kt);
    const r = new DerReader(alg.algorithmIdentifier);
    const seq = r.enter(TAG.SEQUENCE);
    seq.readOid();
    // NIST and composite post-quantum OIDs, Ed25519 and ECDSA: parameters absent; RSA PKCS #1
    // v1.5: NULL (RFC 4055 section 5).
    if (kt === "rsa-3072-pkcs1v15") (seq.readNull(), seq.finish());
    else if (kt !== "rsa-3072") assert.ok(seq.done, `${kt}: parameters must be absent`);
  }
});

Deno.test("signature encodings verify with node:crypto (ECDSA DER, Ed25519, RSA-PSS salt 32, RSA PKCS #1 v1.5)", async () => {
  const tbs = new TextEncoder().encode("to be signed");
  for (const kt of Object.keys(NODE_KEYS) as (keyof typeof NODE_KEYS)[]) {
    const { privateKey, publicKey } = NODE_KEYS[kt]();
    const signer = nodeSigner(kt, privateKey);
    const [algId, bits] = await signatureFields(signer, tbs);
    assert.ok(bytesEqual(algId, SIGNATURE_ALGORITHMS[kt].algorithmIdentifier));
    const sig = new DerReader(bits).readBitStringBytes();
    const hash = kt === "ec-p384" ? "sha384" : kt === "ed25519" ? null : "sha256";
    const ok = nodeCrypto.verify(hash, tbs, {
      key: publicKey,
      ...(kt === "rsa-3072"
        ? { padding: nodeCrypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 }
        : kt === "rsa-3072-pkcs1v15"
        ? { padding: nodeCrypto.constants.RSA_PKCS1_PADDING }
        : {}),
    }, sig);
    assert.ok(ok, `${kt}: node:crypto rejects the encoded signature`);
    const raw = SIGNATURE_ALGORITHMS[kt].decodeSignature(sig);
    if (kt.startsWith("ec-")) assert.equal(raw.length, SIGNATURE_ALGORITHMS[kt].rawSignatureLength);
    assert.throws(() => SIGNATURE_ALGORITHMS[kt].encodeSignature(new Uint8Array(7)), /expected/);
  }
});

Deno.test("ML-DSA signatures are carried as they are and verify with @noble/post-quantum", async () => {
  const tbs = new TextEncoder().encode("to be signed");
  for (
    const [kt, impl] of [["ml-dsa-44", ml_dsa44], ["ml-dsa-65", ml_dsa65], [
      "ml-dsa-87",
      ml_dsa87,
    ]] as const
  ) {
    const keys = impl.keygen(new Uint8Array(32).fill(1));
    const [, bits] = await signatureFields({
      keyType: kt,
      sign: (m) => impl.sign(m, keys.secretKey),
    }, tbs);
    const sig = new DerReader(bits).readBitStringBytes();
    assert.ok(impl.verify(sig, tbs, keys.publicKey), kt);
  }
});

Deno.test("AlgorithmIdentifiers are byte for byte what OpenSSL writes in a certificate", async () => {
  const dir = moduleTempDir("ocsp-alg-");
  try {
    const cases: [string, string[]][] = [
      ["ec-p256", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-sha256"]],
      ["ec-p384", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-sha384"]],
      ["ed25519", ["-newkey", "ed25519"]],
      ["rsa-3072", [
        "-newkey",
        "rsa:2048",
        "-sha256",
        "-sigopt",
        "rsa_padding_mode:pss",
        "-sigopt",
        "rsa_pss_saltlen:32",
        "-sigopt",
        "rsa_mgf1_md:sha256",
      ]],
    ];
    for (const [kt, args] of cases) {
      const r = await runCommand("openssl", [
        "req",
        "-x509",
        "-nodes",
        "-subj",
        "/CN=alg",
        "-days",
        "1",
        "-keyout",
        `${dir}/${kt}.key`,
        "-out",
        `${dir}/${kt}.pem`,
        ...args,
      ]);
      assert.equal(r.code, 0, r.text);
      const [cert] = readCertificates(await Deno.readFile(`${dir}/${kt}.pem`));
      assert.equal(keyTypeOfSignatureAlgorithm(cert.signatureAlgorithm), kt, `${kt} from openssl`);
      if (kt !== "rsa-3072") {
        assert.ok(bytesEqual(cert.spkiAlgorithm, spkiAlgorithmIdentifier(kt as "ed25519")), kt);
      }
      assert.ok(bytesEqual(parseCertificate(cert.der).der, cert.der));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
