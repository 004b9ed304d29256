/**
 * `svcd ca` with ML-DSA-44/65/87 and composite (ML-DSA-65 + Ed25519) CA keys. On a module that
 * offers them (svcmod) the CA and the certificates it issues carry the NIST / composite OIDs with
 * absent parameters and signatures that @noble/post-quantum (and the project's composite oracle)
 * accept; status answers through lib/ocsp. On SoftHSM2 init says the type is not offered.
 */
import assert from "node:assert/strict";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { readCertificates } from "../../lib/ocsp/certificate.ts";
import { oid, sequence } from "../../lib/der/mod.ts";
import { verifyIndependently } from "../../lib/token_admin/independent_verify.ts";
import { makeTestToken } from "../support/token.ts";
import { makeTestCa, openssl, opensslRequest, type TestCa } from "../support/ca.ts";
import * as pkijs from "pkijs";
import { derFromPem } from "../../lib/ca/csr.ts";

const PQ = {
  "ml-dsa-44": { oid: "2.16.840.1.101.3.4.3.17", verify: ml_dsa44.verify, name: "ML-DSA-44" },
  "ml-dsa-65": { oid: "2.16.840.1.101.3.4.3.18", verify: ml_dsa65.verify, name: "ML-DSA-65" },
  "ml-dsa-87": { oid: "2.16.840.1.101.3.4.3.19", verify: ml_dsa87.verify, name: "ML-DSA-87" },
  "composite-mldsa65-ed25519": { oid: "1.3.6.1.5.5.7.6.48", verify: undefined, name: undefined },
} as const;
type PqType = keyof typeof PQ;

/**
 * How `openssl x509 -text` names the signature algorithm of a `type` certificate: OpenSSL 3.5 and
 * later know ML-DSA by name, OpenSSL 3.0 knows no ML-DSA and prints the OID it parsed; no release
 * knows the composite draft's OID by name.
 */
async function opensslSignatureAlgorithm(type: PqType): Promise<string> {
  const [major, minor] = (await openssl(["version"])).match(/OpenSSL (\d+)\.(\d+)/)!.slice(1)
    .map(Number);
  const knowsMlDsa = major > 3 || (major === 3 && minor >= 5);
  return (knowsMlDsa ? PQ[type].name : undefined) ?? PQ[type].oid;
}

/** The issuer's signature over the certificate's TBS, checked with the CA's key bits only. */
async function independentlySigned(certPath: string, caPath: string, type: PqType) {
  const [cert] = readCertificates(await Deno.readFile(certPath));
  const [ca] = readCertificates(await Deno.readFile(caPath));
  // AlgorithmIdentifier: the OID alone, parameters absent — in the TBS and outside it.
  assert.deepEqual(cert.signatureAlgorithm, sequence(oid(PQ[type].oid)));
  const verify = PQ[type].verify;
  const ok = verify ? verify(cert.signature, cert.tbs, ca.publicKey) : (await verifyIndependently(
    { keyType: "composite-mldsa65-ed25519", publicKeyRaw: ca.publicKey },
    cert.tbs,
    cert.signature,
  )).ok;
  assert.ok(ok, `${type} signature of ${certPath} does not verify`);
  const tampered = cert.tbs.slice();
  tampered[tampered.length - 1] ^= 1;
  const bad = verify ? verify(cert.signature, tampered, ca.publicKey) : (await verifyIndependently(
    { keyType: "composite-mldsa65-ed25519", publicKeyRaw: ca.publicKey },
    tampered,
    cert.signature,
  )).ok;
  assert.equal(bad, false, "a tampered TBS verifies: the check proves nothing");
}

/** `svcd ca crl` under an ML-DSA-65 CA: its signature verifies with @noble/post-quantum. */
async function crlIndependentlySigned(ca: TestCa, serial: string) {
  assert.equal((await ca.run("revoke", [serial, "--reason", "keyCompromise"])).code, 0);
  const r = await ca.run("crl");
  assert.equal(r.code, 0, r.text);
  assert.match(r.stdout, /^CRL \d+: 1 revoked/);
  const crl = pkijs.CertificateRevocationList.fromBER(
    derFromPem(await Deno.readFile(`${ca.dir}/crl.pem`), "X509 CRL").slice().buffer,
  );
  const [caCert] = readCertificates(await Deno.readFile(ca.caPem));
  const algorithm = new Uint8Array(crl.signatureAlgorithm.toSchema().toBER());
  assert.deepEqual(algorithm, sequence(oid(PQ["ml-dsa-65"].oid)));
  assert.deepEqual(new Uint8Array(crl.signature.toSchema().toBER()), algorithm);
  const signature = crl.signatureValue.valueBlock.valueHexView;
  assert.ok(ml_dsa65.verify(signature, crl.tbsView, caCert.publicKey), "CRL signature");
  const tampered = crl.tbsView.slice();
  tampered[tampered.length - 1] ^= 1;
  assert.equal(ml_dsa65.verify(signature, tampered, caCert.publicKey), false);
  assert.deepEqual(
    crl.revokedCertificates!.map((c) => c.userCertificate.valueBlock.valueHexView.toHex())
      .map((h) => h.replace(/^00/, "").toUpperCase()),
    [serial],
  );
  // Leave the certificate good for the status checks that follow.
  const index = `${ca.dir}/index.txt`;
  const text = await Deno.readTextFile(index);
  await Deno.writeTextFile(index, text.replace(/^R\t(\S+)\t\S+\t/m, "V\t$1\t\t"));
}

Deno.test("ca: ML-DSA-44/65/87 and composite CA keys issue certificates that @noble/post-quantum verifies; status through lib/ocsp", async () => {
  const token = await makeTestToken({ keys: {} });
  try {
    if (token.module.name !== "svcmod") {
      const ca = await makeTestCa(token, { keyLabel: "pq", keyType: "ml-dsa-65" }).catch((e) =>
        e as Error
      );
      assert.ok(ca instanceof Error);
      assert.match(ca.message, /does not offer|not offered/);
      return;
    }
    for (const type of Object.keys(PQ) as PqType[]) {
      const ca = await makeTestCa(token, {
        keyLabel: `ca-${type}`,
        keyType: type,
        subject: `CN=${type} CA,O=Example,C=DE`,
      });
      await independentlySigned(ca.caPem, ca.caPem, type);
      const [caCert] = readCertificates(await Deno.readFile(ca.caPem));
      assert.deepEqual(caCert.spkiAlgorithm, sequence(oid(PQ[type].oid)));
      // openssl parses the structure and names the algorithm as its version knows it.
      const algorithm = await opensslSignatureAlgorithm(type);
      assert.match(
        await openssl(["x509", "-in", ca.caPem, "-noout", "-text"]),
        new RegExp(`Signature Algorithm: ${algorithm.replaceAll(".", "\\.")}\\s`),
      );
      const req = await opensslRequest(ca.dir, "alice", "/C=DE/O=Example/CN=alice");
      const issued = await ca.issue(["--csr", req.request, "--grant", "web"]);
      await independentlySigned(issued.path, ca.caPem, type);
      assert.deepEqual(issued.policyLines, ["CN=alice,O=Example,C=DE\tweb"]);

      // Responses signed by each key type are lib/ocsp's tests; here two types keep this fast.
      if (type === "ml-dsa-44" || type === "ml-dsa-87") continue;
      if (type === "ml-dsa-65") await crlIndependentlySigned(ca, issued.serial);
      const good = await ca.run("status", [issued.path]);
      assert.equal(good.code, 0, good.text);
      assert.match(
        good.stdout,
        new RegExp(`^good\\n[\\s\\S]*signed by\\tca-${type} \\(${type}\\)`),
      );
      assert.equal((await ca.run("revoke", [issued.serial, "--reason", "superseded"])).code, 0);
      const revoked = await ca.run("status", [issued.path]);
      assert.match(revoked.stdout, /^revoked\n[\s\S]*reason\tsuperseded\n/);
    }
  } finally {
    await token.cleanup();
  }
});

Deno.test("ca responder: a composite delegated responder under an ML-DSA-87 CA signs status answers", async () => {
  const token = await makeTestToken({
    keys: { "ca-87": "ml-dsa-87", "ocsp-composite": "composite-mldsa65-ed25519" },
  });
  try {
    if (token.module.name !== "svcmod") return; // SoftHSM2 offers neither (checked above)
    const ca = await makeTestCa(token, { keyLabel: "ca-87" });
    const r = await ca.run("responder", ["--key-label", "ocsp-composite"]);
    assert.equal(r.code, 0, r.text);
    await independentlySigned(`${ca.dir}/responder.pem`, ca.caPem, "ml-dsa-87");
    const [responder] = readCertificates(await Deno.readFile(`${ca.dir}/responder.pem`));
    assert.deepEqual(responder.spkiAlgorithm, sequence(oid(PQ["composite-mldsa65-ed25519"].oid)));
    const issued = await ca.issue([
      "--csr",
      (await opensslRequest(ca.dir, "b", "/CN=b", "ed25519")).request,
    ]);
    const status = await ca.run("status", [issued.path, "--ocsp-label", "ocsp-composite"]);
    assert.equal(status.code, 0, status.text);
    assert.match(
      status.stdout,
      /^good\n[\s\S]*signed by\tocsp-composite \(composite-mldsa65-ed25519\), delegated responder/,
    );
  } finally {
    await token.cleanup();
  }
});
