/**
 * GET /token states a key's certificate and its chain (base64 DER) when the token holds a
 * CKO_CERTIFICATE with the key's CKA_ID whose public key is the key's; a certificate stored for a
 * key with another key's public key is never served (the key is listed as without one, and the
 * daemon's log says why). The certificates are written with pkcs11-tool, as another application
 * would, while the daemon runs: each GET /token reads them afresh. In the main thread and in
 * request threads. (SoftHSM2: pkcs11-tool writes certificate objects there; svcmod's are
 * tested with `svcd ca certify`.)
 */
import assert from "node:assert/strict";
import { generateKeyPairSync, sign as nodeSign, X509Certificate } from "node:crypto";
import { buildCertificate } from "../lib/ca/certificate.ts";
import { nameFromRfc4514 } from "../lib/ca/name.ts";
import { makeTestCa, openssl } from "./support/ca.ts";
import { startDaemon } from "./support/daemon.ts";
import { tokenKeys } from "./support/http_client.ts";
import {
  keyIdWithPkcs11Tool,
  makeTestToken,
  type TestToken,
  writeCertificateWithPkcs11Tool,
} from "./support/token.ts";

const SUBJECT = "CN=alice,O=Example";

/** A certificate for the token key `keyLabel` (a responder certificate: it names the key), DER. */
async function certificateOf(
  ca: Awaited<ReturnType<typeof makeTestCa>>,
  t: TestToken,
  keyLabel: string,
): Promise<string> {
  const pem = `${t.dir}/${keyLabel}.pem`, der = `${t.dir}/${keyLabel}.der`;
  const r = await ca.run("responder", ["--key-label", keyLabel, "--out", pem]);
  assert.equal(r.code, 0, r.text);
  await openssl(["x509", "-in", pem, "-outform", "DER", "-out", der]);
  return der;
}

for (const threads of ["0", "2"]) {
  Deno.test({
    name:
      `GET /token: certificate and chain of a certified key, none for a wrong one (--threads ${threads})`,
    ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
    sanitizeResources: false,
    fn: async () => {
      const t = await makeTestToken({
        keys: { ca: "ec-p256", "k-ec": "ec-p256", "k-wrong": "ec-p256", "k-none": "ed25519" },
      });
      const ca = await makeTestCa(t, { keyLabel: "ca" });
      const policy = ["k-ec", "k-wrong", "k-none"].map((k) => `${SUBJECT}\t${k}\n`).join("");
      const d = await startDaemon({
        token: t,
        policy,
        args: ["--threads", threads, "--ca-cert", ca.caPem],
      });
      try {
        const before = await tokenKeys(d.socket, SUBJECT);
        assert.equal(before.get("k-ec")!.certificate, undefined, "none stored yet");
        assert.ok(!("chain" in before.get("k-ec")!));

        const ecCert = await certificateOf(ca, t, "k-ec");
        await writeCertificateWithPkcs11Tool(
          t,
          ecCert,
          await keyIdWithPkcs11Tool(t, "k-ec"),
          "k-ec",
        );
        // k-wrong gets a certificate of k-ec's public key, under k-wrong's CKA_ID and label.
        await writeCertificateWithPkcs11Tool(
          t,
          ecCert,
          await keyIdWithPkcs11Tool(t, "k-wrong"),
          "k-wrong",
        );

        const keys = await tokenKeys(d.socket, SUBJECT);
        const ec = keys.get("k-ec")!;
        assert.equal(ec.certificate, (await Deno.readFile(ecCert)).toBase64(), "read at once");
        const cert = new X509Certificate(Uint8Array.fromBase64(ec.certificate!));
        const caCert = new X509Certificate(await Deno.readFile(ca.caPem));
        assert.equal(ec.chain!.length, 1);
        assert.equal(ec.chain![0], new Uint8Array(caCert.raw).toBase64(), "the CA, as DER");
        assert.ok(cert.checkIssued(caCert) && cert.verify(caCert.publicKey));
        // node:crypto's view of the certificate's key is the key's SPKI the daemon states.
        const certSpki = cert.publicKey.export({ type: "spki", format: "der" });
        assert.equal(new Uint8Array(certSpki).toBase64(), ec.public_key);

        const wrong = keys.get("k-wrong")!;
        assert.ok(!("certificate" in wrong) && !("chain" in wrong), JSON.stringify(wrong));
        await d.waitForLog(/k-wrong.*does not hold the key's public key.*svcd ca certify/);
        const none = keys.get("k-none")!;
        assert.ok(!("certificate" in none) && !("chain" in none), JSON.stringify(none));
        assert.doesNotMatch(d.stderr(), new RegExp(SUBJECT), "no client subject in the log");
      } finally {
        await d.stop();
        await t.cleanup();
      }
    },
  });
}

Deno.test({
  name: "GET /token: a certificate whose issuer the daemon does not know has an empty chain",
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", other: "ec-p256", k: "ec-p256" } });
    const ca = await makeTestCa(t, { keyLabel: "ca" });
    const otherCa = await makeTestCa(t, { keyLabel: "other", subject: "CN=another CA" });
    const d = await startDaemon({
      token: t,
      policy: `${SUBJECT}\tk\n`,
      args: ["--threads", "0", "--ca-cert", otherCa.caPem],
    });
    try {
      const der = await certificateOf(ca, t, "k");
      await writeCertificateWithPkcs11Tool(t, der, await keyIdWithPkcs11Tool(t, "k"), "k");
      const k = (await tokenKeys(d.socket, SUBJECT)).get("k")!;
      assert.equal(k.certificate, (await Deno.readFile(der)).toBase64());
      assert.deepEqual(k.chain, []);
    } finally {
      await d.stop();
      await t.cleanup();
    }
  },
});

/**
 * A certificate of `spki` (DER) valid only in 2020, signed by a throwaway software P-256 CA: what a
 * key holds when its certificate expired and no one renewed it.
 */
async function expiredCertificate(spki: Uint8Array): Promise<Uint8Array> {
  const ca = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const name = nameFromRfc4514("CN=expired test CA");
  return await buildCertificate({
    serial: 0x2an,
    issuer: name,
    subject: nameFromRfc4514("CN=expired"),
    spki,
    notBefore: new Date("2020-01-01T00:00:00Z"),
    notAfter: new Date("2020-12-31T00:00:00Z"),
    extensions: [],
  }, {
    keyType: "ec-p256",
    sign: (tbs) => nodeSign("sha256", tbs, { key: ca.privateKey, dsaEncoding: "ieee-p1363" }),
  });
}

Deno.test({
  name: "GET /token states an expired certificate (the client warns); certify says it replaced it",
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", k: "ec-p256" } });
    const ca = await makeTestCa(t, { keyLabel: "ca" });
    const d = await startDaemon({
      token: t,
      policy: `${SUBJECT}\tk\n`,
      args: ["--threads", "0", "--ca-cert", ca.caPem],
    });
    try {
      const spki = Uint8Array.fromBase64((await tokenKeys(d.socket, SUBJECT)).get("k")!.public_key);
      const expired = await expiredCertificate(spki);
      const path = `${t.dir}/expired.der`;
      await Deno.writeFile(path, expired);
      assert.ok(new X509Certificate(expired).validTo.includes("2020"));
      await writeCertificateWithPkcs11Tool(t, path, await keyIdWithPkcs11Tool(t, "k"), "k");
      const k = (await tokenKeys(d.socket, SUBJECT)).get("k")!;
      assert.equal(k.certificate, expired.toBase64(), "served although expired");
      assert.deepEqual(k.chain, [], "its issuer is not the daemon's CA");

      const renewed = await ca.run("certify", ["--key-label", "k", "--profile", "code-signing"]);
      assert.equal(renewed.code, 0, renewed.text);
      assert.match(renewed.stderr, /replaced the key's earlier certificate 2A \(expired at 2020-/);
      assert.notEqual(
        (await tokenKeys(d.socket, SUBJECT)).get("k")!.certificate,
        expired.toBase64(),
      );
    } finally {
      await d.stop();
      await t.cleanup();
    }
  },
});
