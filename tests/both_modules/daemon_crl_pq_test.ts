/**
 * The CRLs `svcd serve --ca-dir` keeps for an ML-DSA-65 CA and for a composite (ML-DSA-65 +
 * Ed25519) CA, on a module that offers them (svcmod): the full CRL and each partition served on
 * the public socket, and the certificates the CA issued, carry the algorithm's OID with absent
 * parameters and signatures that @noble/post-quantum accepts (the composite's through
 * lib/token_admin/independent_verify.ts: @noble/post-quantum and WebCrypto Ed25519) and refuses
 * once the signed bytes change; for ML-DSA the second oracle (tests/support/pq_oracle.ts, named in the
 * test's name) checks them too. On SoftHSM2 the CA cannot be made, and `svcd ca init` says why.
 */
import assert from "node:assert/strict";
import * as pkijs from "pkijs";
import { oid, pem, sequence } from "../../lib/der/mod.ts";
import { readCertificates } from "../../lib/ocsp/certificate.ts";
import { verifyIndependently } from "../../lib/token_admin/independent_verify.ts";
import {
  type CrlDaemon,
  getCrl,
  lists,
  startCrlDaemon,
  waitForServed,
} from "../support/crl_daemon.ts";
import { selectedModuleName } from "../support/modules.ts";
import { pqOracle } from "../support/pq_oracle.ts";

const TYPES = {
  "ml-dsa-65": "2.16.840.1.101.3.4.3.18",
  "composite-mldsa65-ed25519": "1.3.6.1.5.5.7.6.48",
} as const;
type CaType = keyof typeof TYPES;
const SVCMOD = selectedModuleName() === "svcmod";
const oracle = SVCMOD ? await pqOracle() : undefined;

/** The CA key's verdict on `signature` over `message`, by the independent verifiers. */
async function verifies(
  type: CaType,
  caKey: Uint8Array,
  message: Uint8Array,
  signature: Uint8Array,
) {
  return (await verifyIndependently({ keyType: type, publicKeyRaw: caKey }, message, signature)).ok;
}

/** Accepted over the signed bytes, refused over the same bytes with one bit changed. */
async function signedBy(
  type: CaType,
  caKey: Uint8Array,
  tbs: Uint8Array,
  signature: Uint8Array,
  what: string,
) {
  assert.ok(
    await verifies(type, caKey, tbs, signature),
    `${what}: the ${type} signature does not verify`,
  );
  const changed = tbs.slice();
  changed[changed.length >> 1] ^= 1;
  assert.equal(
    await verifies(type, caKey, changed, signature),
    false,
    `${what}: a changed TBS verifies`,
  );
}

/** Each served CRL: algorithm, signature, entries, IDP; for ML-DSA the second oracle too. */
async function checkServedCrls(s: CrlDaemon, type: CaType, caKey: Uint8Array) {
  const algorithm = sequence(oid(TYPES[type]));
  for (const name of ["full.crl", ...Array.from({ length: s.partitions }, (_, k) => `${k}.crl`)]) {
    const res = await getCrl(s.publicSocket, name);
    assert.equal(res.status, 200, `${name}: ${res.text()}`);
    const crl = pkijs.CertificateRevocationList.fromBER(res.body.slice().buffer);
    assert.deepEqual(new Uint8Array(crl.signatureAlgorithm.toSchema().toBER()), algorithm);
    assert.deepEqual(new Uint8Array(crl.signature.toSchema().toBER()), algorithm);
    const signature = crl.signatureValue.valueBlock.valueHexView;
    await signedBy(type, caKey, crl.tbsView, signature, name);
    const listed = (crl.revokedCertificates ?? []).map((c) =>
      c.userCertificate.valueBlock.valueHexView.toHex().replace(/^00/, "").toUpperCase()
    );
    const k = name === "full.crl" ? undefined : Number(name.split(".")[0]);
    const expected = s.certs.slice(0, 2).filter((c) => k === undefined || s.partitionOf(c) === k);
    assert.deepEqual(listed.sort(), expected.map((c) => c.serial).sort(), name);
    const idp = crl.crlExtensions?.extensions.find((e) => e.extnID === "2.5.29.28");
    assert.equal(idp?.critical, k === undefined ? undefined : true, `${name}: IDP`);
    if (oracle && type === "ml-dsa-65") {
      const path = `${s.work}/served-${name}.pem`;
      await Deno.writeTextFile(path, pem("X509 CRL", res.body));
      const second = await oracle.verifyCrl(s.ca.caPem, path);
      assert.ok(second.ok, `${oracle.name} refuses ${name}: ${second.output}`);
      const changed = res.body.slice();
      changed[res.body.length - (signature.length >> 1)] ^= 1; // inside the signature
      await Deno.writeTextFile(path, pem("X509 CRL", changed));
      const refused = await oracle.verifyCrl(s.ca.caPem, path);
      assert.equal(refused.ok, false, `${oracle.name} accepts ${name} with a changed signature`);
    }
  }
}

Deno.test({
  name:
    `crl pq: the daemon's CRLs (full and partitions) and the certificates of an ML-DSA-65 and a composite CA verify with @noble/post-quantum; ML-DSA also with the second oracle (${
      oracle?.name ?? "not run"
    })`,
  sanitizeResources: false,
  fn: async () => {
    if (!SVCMOD) {
      const made = await startCrlDaemon({ keyType: "ml-dsa-65" }).catch((e) => e as Error);
      assert.ok(made instanceof Error, "SoftHSM2 made an ML-DSA CA");
      assert.match(made.message, /does not offer|not offered/);
      return;
    }
    for (const type of Object.keys(TYPES) as CaType[]) {
      const s = await startCrlDaemon({ keyType: type, partitions: 2, certificates: 4, revoked: 2 });
      try {
        const [caCert] = readCertificates(await Deno.readFile(s.ca.caPem));
        await waitForServed(s, "full.crl", (der) => lists(der, s.certs[1].serial), 5_000);
        await checkServedCrls(s, type, caCert.publicKey);
        for (const issued of s.certs) {
          const [cert] = readCertificates(await Deno.readFile(issued.path));
          assert.deepEqual(cert.signatureAlgorithm, sequence(oid(TYPES[type])));
          await signedBy(type, caCert.publicKey, cert.tbs, cert.signature, issued.path);
        }
        if (oracle && type === "ml-dsa-65") {
          const chain = await oracle.verifyCertChain(s.ca.caPem, s.certs.map((c) => c.path));
          assert.ok(chain.ok, `${oracle.name} refuses the certificates: ${chain.output}`);
        }
      } finally {
        await s.stop();
      }
    }
  },
});
