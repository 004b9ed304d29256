/**
 * `svcd ca certify` for ML-DSA-44/65/87 and composite (ML-DSA-65 + Ed25519) token keys, on the
 * test module (svcmod): under an ML-DSA-65 CA each certificate's signature verifies with
 * @noble/post-quantum over its TBS, its key is the token key's (the NIST / composite OIDs, as
 * GET /token states the key), and the token holds exactly one certificate object with the key's
 * ID, also after a renewal, which the daemon serves at once. Under a composite CA the signature
 * verifies by its two halves (ML-DSA-65 with noble, Ed25519 with Web Crypto). SoftHSM2 offers none
 * of these types (tests/ca_certify_test.ts covers its key types).
 */
import assert from "node:assert/strict";
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import { readCertificates } from "../../lib/ocsp/certificate.ts";
import { verifyIndependently } from "../../lib/token_admin/independent_verify.ts";
import { makeTestCa } from "../support/ca.ts";
import { startDaemon } from "../support/daemon.ts";
import { tokenKeys } from "../support/http_client.ts";
import { keyIdWithPkcs11Tool, makeTestToken, objectsWithPkcs11Tool } from "../support/token.ts";

const KEYS = {
  "k-44": "ml-dsa-44",
  "k-65": "ml-dsa-65",
  "k-87": "ml-dsa-87",
  "k-composite": "composite-mldsa65-ed25519",
} as const;

const SUBJECT = "CN=alice";

Deno.test({
  name: "ca certify: ML-DSA-44/65/87 and composite keys, under ML-DSA-65 and composite CAs",
  sanitizeResources: false,
  fn: async () => {
    const token = await makeTestToken({
      keys: { "ca-65": "ml-dsa-65", "ca-composite": "composite-mldsa65-ed25519", ...KEYS },
    });
    if (token.module.name !== "svcmod") return await token.cleanup();
    const ca = await makeTestCa(token, { keyLabel: "ca-65", subject: "CN=ML-DSA-65 CA" });
    const policy = Object.keys(KEYS).map((k) => `${SUBJECT}\t${k}\n`).join("");
    const d = await startDaemon({
      token,
      policy,
      args: ["--threads", "2", "--ca-cert", ca.caPem],
    });
    try {
      const [caCert] = readCertificates(await Deno.readFile(ca.caPem));
      const before = await tokenKeys(d.socket, SUBJECT);
      for (const label of Object.keys(KEYS)) {
        const out = `${token.dir}/${label}.pem`;
        const r = await ca.run("certify", [
          ...["--key-label", label, "--profile", "document-signing", "--out", out],
        ]);
        assert.equal(r.code, 0, r.text);
        const [cert] = readCertificates(await Deno.readFile(out));
        assert.ok(ml_dsa65.verify(cert.signature, cert.tbs, caCert.publicKey), label);
        const tampered = cert.tbs.slice();
        tampered[tampered.length - 1] ^= 1;
        assert.equal(ml_dsa65.verify(cert.signature, tampered, caCert.publicKey), false);
        assert.equal(cert.spki.toBase64(), before.get(label)!.public_key, `${label}: its key`);

        const id = await keyIdWithPkcs11Tool(token, label);
        const objects = (await objectsWithPkcs11Tool(token, "cert")).filter((o) => o.id === id);
        assert.deepEqual(objects, [{ label, id }]);
        const served = (await tokenKeys(d.socket, SUBJECT)).get(label)!;
        assert.equal(served.certificate, cert.der.toBase64());
        assert.deepEqual(served.chain, [caCert.der.toBase64()]);
      }

      // A renewal: one object again, and the daemon serves the new certificate.
      const renewed = `${token.dir}/k-composite-2.pem`;
      const again = await ca.run("certify", [
        ...["--key-label", "k-composite", "--profile", "code-signing", "--out", renewed],
      ]);
      assert.equal(again.code, 0, again.text);
      const [second] = readCertificates(await Deno.readFile(renewed));
      const id = await keyIdWithPkcs11Tool(token, "k-composite");
      assert.equal(
        (await objectsWithPkcs11Tool(token, "cert")).filter((o) => o.id === id).length,
        1,
      );
      assert.equal(
        (await tokenKeys(d.socket, SUBJECT)).get("k-composite")!.certificate,
        second.der.toBase64(),
      );

      // Under a composite CA: its signature over each certificate, checked by both halves.
      const composite = await makeTestCa(token, {
        keyLabel: "ca-composite",
        dir: `${token.dir}/ca-composite`,
      });
      const [compositeCa] = readCertificates(await Deno.readFile(composite.caPem));
      for (const label of ["k-87", "k-composite"]) {
        const out = `${token.dir}/${label}-under-composite.pem`;
        const r = await composite.run("certify", [
          ...["--key-label", label, "--profile", "tls-client", "--out", out],
        ]);
        assert.equal(r.code, 0, r.text);
        const [cert] = readCertificates(await Deno.readFile(out));
        const key = {
          keyType: "composite-mldsa65-ed25519" as const,
          publicKeyRaw: compositeCa.publicKey,
        };
        const checked = await verifyIndependently(key, cert.tbs, cert.signature);
        assert.ok(checked.ok, `${label}: ${checked.verifier}`);
        const tampered = cert.tbs.slice();
        tampered[tampered.length - 1] ^= 1;
        assert.equal((await verifyIndependently(key, tampered, cert.signature)).ok, false);
      }
    } finally {
      await d.stop();
      await token.cleanup();
    }
  },
});
