/**
 * `svcd ca certify` on SoftHSM2, as an operator runs it: EC P-256, RSA-3072 and Ed25519 keys
 * certified for each profile; openssl verifies each certificate against ca.pem (with the
 * profile's purpose where openssl has one), Python cryptography reads its keyUsage,
 * extendedKeyUsage, subjectAltName, AIA and CDP; pkcs11-tool, directly on SoftHSM2, lists exactly
 * one certificate object with the key's ID after every certification (renewal replaces). A
 * certificate of another key's public key is refused by the writer and nothing is stored.
 */
import assert from "node:assert/strict";
import { makeTestCa, openssl, type TestCa } from "./support/ca.ts";
import { certificateFields } from "./support/certificate_fields.ts";
import { startDaemon } from "./support/daemon.ts";
import { tokenKeys } from "./support/http_client.ts";
import {
  keyIdWithPkcs11Tool,
  makeTestToken,
  objectsWithPkcs11Tool,
  openTestToken,
  type TestToken,
  testTokenPin,
} from "./support/token.ts";
import { CertificateRefused, TokenAdmin } from "../lib/token_admin/mod.ts";
import { derFromPem } from "../lib/ca/csr.ts";

const IGNORE = Deno.env.get("SVCD_TEST_MODULE") === "svcmod";

const OID = {
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
  codeSigning: "1.3.6.1.5.5.7.3.3",
  emailProtection: "1.3.6.1.5.5.7.3.4",
  documentSigning: "1.3.6.1.5.5.7.3.36",
  ocsp: "1.3.6.1.5.5.7.48.1",
  caIssuers: "1.3.6.1.5.5.7.48.2",
};

/** Each profile: its key usage (RSA adds key_encipherment for a TLS server), purposes, openssl's. */
const PROFILES = {
  "code-signing": { keyUsage: ["digital_signature"], eku: [OID.codeSigning], purpose: "any" },
  "document-signing": {
    keyUsage: ["digital_signature", "content_commitment"],
    eku: [OID.documentSigning, OID.emailProtection],
    purpose: "smimesign",
  },
  "tls-server": { keyUsage: ["digital_signature"], eku: [OID.serverAuth], purpose: "sslserver" },
  "tls-client": { keyUsage: ["digital_signature"], eku: [OID.clientAuth], purpose: "sslclient" },
} as const;

const URLS = {
  ocsp: "http://pki.example.org/ocsp",
  crl: "http://pki.example.org/crl",
  caIssuers: "http://pki.example.org/certificates",
};

async function certify(ca: TestCa, t: TestToken, label: string, args: string[]) {
  const out = `${t.dir}/${label}.pem`;
  const r = await ca.run("certify", ["--key-label", label, ...args, "--out", out]);
  return { ...r, out };
}

Deno.test({
  name:
    "svcd ca certify: EC, RSA and Ed25519 keys for each profile, verified, stored beside the key",
  ignore: IGNORE,
  fn: async () => {
    const t = await makeTestToken({
      keys: { ca: "ec-p256", "k-ec": "ec-p256", "k-rsa": "rsa-3072", "k-ed": "ed25519" },
    });
    try {
      const ca = await makeTestCa(t, { keyLabel: "ca" });
      const urls = await ca.run("urls", [
        ...["--ocsp-url", URLS.ocsp, "--crl-url", URLS.crl, "--ca-issuers-url", URLS.caIssuers],
      ]);
      assert.equal(urls.code, 0, urls.text);
      for (const label of ["k-ec", "k-rsa", "k-ed"]) {
        const id = await keyIdWithPkcs11Tool(t, label);
        for (const [profile, want] of Object.entries(PROFILES)) {
          const dns = profile === "tls-server"
            ? ["--dns", "sign.example.org", "--dns", "b.example.org"]
            : [];
          const r = await certify(ca, t, label, ["--profile", profile, ...dns]);
          assert.equal(r.code, 0, r.text);
          await openssl(["verify", "-CAfile", ca.caPem, "-purpose", want.purpose, r.out]);

          const f = certificateFields(r.out);
          const rsaServer = label === "k-rsa" && profile === "tls-server";
          assert.deepEqual(
            f.keyUsage.toSorted(),
            [...want.keyUsage, ...(rsaServer ? ["key_encipherment"] : [])].toSorted(),
            `${label} ${profile}`,
          );
          assert.ok(f.keyUsageCritical);
          assert.deepEqual(f.extendedKeyUsage.toSorted(), [...want.eku].toSorted());
          assert.equal(f.basicConstraintsCa, false);
          assert.deepEqual(
            f.dnsNames,
            profile === "tls-server" ? ["sign.example.org", "b.example.org"] : [],
          );
          assert.deepEqual(
            f.authorityInfoAccess.toSorted(),
            [
              [OID.ocsp, URLS.ocsp],
              [OID.caIssuers, URLS.caIssuers],
            ].toSorted(),
          );
          assert.deepEqual(f.crlUrls, [`${URLS.crl}/full.crl`]);

          // Directly on SoftHSM2: one certificate object, with the key's ID and label.
          const certs = (await objectsWithPkcs11Tool(t, "cert")).filter((o) => o.id === id);
          assert.deepEqual(certs, [{ label, id }], `${label} ${profile}: one certificate object`);
        }
      }
      // Every one is in the index (OCSP and CRLs cover them): 12 certifications.
      const index = await Deno.readTextFile(`${ca.dir}/index.txt`);
      assert.equal(index.trim().split("\n").length, 12);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name: "svcd ca certify: without URLs no AIA or CDP; usage mistakes are refused with exit 2",
  ignore: IGNORE,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", k: "ec-p256" } });
    try {
      const ca = await makeTestCa(t, { keyLabel: "ca" });
      const r = await certify(ca, t, "k", [
        "--profile",
        "code-signing",
        "--subject",
        "CN=Builds,O=Example",
      ]);
      assert.equal(r.code, 0, r.text);
      const f = certificateFields(r.out);
      assert.deepEqual([f.authorityInfoAccess, f.crlUrls], [[], []]);
      const subject = await openssl([
        "x509",
        "-in",
        r.out,
        "-noout",
        "-subject",
        "-nameopt",
        "RFC2253",
      ]);
      assert.match(subject, /CN=Builds,O=Example/);
      for (
        const args of [
          ["--profile", "nonsense"],
          ["--profile", "tls-server"],
          ["--profile", "tls-client", "--dns", "a.example.org"],
          ["--profile", "tls-server", "--dns", "not a name"],
          [],
        ]
      ) {
        const bad = await certify(ca, t, "k", args);
        assert.equal(bad.code, 2, `${args.join(" ")}: ${bad.text}`);
      }
      const missing = await certify(ca, t, "no-such-key", ["--profile", "code-signing"]);
      assert.equal(missing.code, 1, missing.text);
      assert.match(missing.stderr, /no-such-key/);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name:
    "svcd ca certify: a renewal replaces the certificate; GET /token states the new one at once",
  ignore: IGNORE,
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", k: "ed25519" } });
    const ca = await makeTestCa(t, { keyLabel: "ca" });
    const subject = "CN=alice";
    const d = await startDaemon({
      token: t,
      policy: `${subject}\tk\n`,
      args: ["--threads", "0", "--ca-cert", ca.caPem],
    });
    const served = async () => (await tokenKeys(d.socket, subject)).get("k")!.certificate;
    try {
      const first = await certify(ca, t, "k", ["--profile", "document-signing"]);
      assert.equal(first.code, 0, first.text);
      const firstDer = derFromPem(await Deno.readFile(first.out), "CERTIFICATE");
      assert.equal(await served(), firstDer.toBase64());

      const second = await certify(ca, t, "k", ["--profile", "document-signing"]);
      assert.equal(second.code, 0, second.text);
      assert.match(second.stderr, /replaced the key's earlier certificate .*valid until/);
      const secondDer = derFromPem(await Deno.readFile(second.out), "CERTIFICATE");
      assert.notEqual(secondDer.toBase64(), firstDer.toBase64());
      assert.equal(await served(), secondDer.toBase64(), "the renewal is served at once");
      const id = await keyIdWithPkcs11Tool(t, "k");
      assert.equal((await objectsWithPkcs11Tool(t, "cert")).filter((o) => o.id === id).length, 1);
    } finally {
      await d.stop();
      await t.cleanup();
    }
  },
});

Deno.test({
  name: "the certificate writer refuses a certificate of another key's public key; nothing stored",
  ignore: IGNORE,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", a: "ec-p256", b: "ec-p256" } });
    try {
      const ca = await makeTestCa(t, { keyLabel: "ca" });
      const ofA = await certify(ca, t, "a", ["--profile", "code-signing"]);
      assert.equal(ofA.code, 0, ofA.text);
      const der = derFromPem(await Deno.readFile(ofA.out), "CERTIFICATE");
      const token = openTestToken(t);
      try {
        await token.login(testTokenPin(t));
        const b = (await token.key("b"))!;
        await assert.rejects(
          () => new TokenAdmin(token).storeCertificate(b, der),
          (err) =>
            err instanceof CertificateRefused && /not the public key of 'b'/.test(err.message),
        );
        assert.deepEqual(await token.certificates(b), []);
      } finally {
        token.close();
      }
      const idB = await keyIdWithPkcs11Tool(t, "b");
      assert.deepEqual((await objectsWithPkcs11Tool(t, "cert")).filter((o) => o.id === idB), []);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name: "svcd ca list shows a certificate past its expiry as E (expired)",
  ignore: IGNORE,
  fn: async () => {
    const t = await makeTestToken({ keys: { ca: "ec-p256", k: "ec-p256", l: "ec-p256" } });
    try {
      const ca = await makeTestCa(t, { keyLabel: "ca" });
      for (const label of ["k", "l"]) {
        const r = await certify(ca, t, label, ["--profile", "code-signing"]);
        assert.equal(r.code, 0, r.text);
      }
      // The first line's expiry moved to 2021, as if a year had passed since.
      const index = `${ca.dir}/index.txt`;
      const lines = (await Deno.readTextFile(index)).split("\n");
      lines[0] = lines[0].replace(/^V\t\d{12}Z/, "V\t210101000000Z");
      await Deno.writeTextFile(index, lines.join("\n"));
      const list = await ca.run("list");
      assert.equal(list.code, 0, list.text);
      const statuses = list.stdout.split("\n").slice(1).filter((l) => l !== "").map((l) => l[0]);
      assert.deepEqual(statuses, ["E", "V"]);
    } finally {
      await t.cleanup();
    }
  },
});
