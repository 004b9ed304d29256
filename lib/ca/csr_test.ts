import assert from "node:assert/strict";
import { signatureFields, spkiAlgorithmIdentifier } from "../ocsp/mod.ts";
import { bitString, explicit, integer, oid, sequence, TAG, tlv } from "../der/mod.ts";
import { runCommand } from "../../tests/support/command.ts";
import { pqKey, type PqKeyType } from "../../tests/support/ocsp.ts";
import { readPublicKey, readRequest, RequestError } from "./csr.ts";
import { nginxSubject } from "./name.ts";

async function openssl(args: string[]): Promise<void> {
  const r = await runCommand("openssl", args);
  assert.equal(r.code, 0, r.text);
}

const OPENSSL_REQUESTS: Record<string, string[]> = {
  "ECDSA P-256 / SHA-256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-sha256"],
  "ECDSA P-384 / SHA-384": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384", "-sha384"],
  "Ed25519": ["-newkey", "ed25519"],
  "RSA PKCS#1 v1.5 / SHA-256": ["-newkey", "rsa:2048", "-sha256"],
  "RSA-PSS / SHA-384": [
    "-newkey",
    "rsa:2048",
    "-sha384",
    "-sigopt",
    "rsa_padding_mode:pss",
    "-sigopt",
    "rsa_pss_saltlen:20",
  ],
};

for (const [label, args] of Object.entries(OPENSSL_REQUESTS)) {
  Deno.test(`csr: openssl's ${label} request is accepted (PEM and DER); a flipped bit is refused`, async () => {
    const dir = await Deno.makeTempDir();
    try {
      await openssl([
        "req",
        "-new",
        ...args,
        "-nodes",
        "-keyout",
        `${dir}/k`,
        "-subj",
        "/O=Example/CN=alice",
        "-out",
        `${dir}/r.pem`,
      ]);
      await openssl(["req", "-in", `${dir}/r.pem`, "-outform", "DER", "-out", `${dir}/r.der`]);
      await openssl(["pkey", "-in", `${dir}/k`, "-pubout", "-outform", "DER", "-out", `${dir}/p`]);
      for (const file of ["r.pem", "r.der"]) {
        const { subject, spki } = await readRequest(await Deno.readFile(`${dir}/${file}`));
        assert.equal(nginxSubject(subject), "CN=alice,O=Example");
        assert.deepEqual(spki, await Deno.readFile(`${dir}/p`));
      }
      const der = await Deno.readFile(`${dir}/r.der`);
      for (const at of [der.length - 3, 40]) { // the signature; the subject inside the signed part
        const bad = der.slice();
        bad[at] ^= 1;
        await assert.rejects(readRequest(bad), RequestError);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

/** A PKCS#10 request signed by a software post-quantum key (OpenSSL 3.0 cannot make one). */
async function pqRequest(type: PqKeyType): Promise<Uint8Array> {
  const { publicKey, signer } = pqKey(type);
  const name = sequence(
    tlv(TAG.SET, sequence(oid("2.5.4.3"), tlv(TAG.UTF8_STRING, new TextEncoder().encode(type)))),
  );
  const spki = sequence(spkiAlgorithmIdentifier(type), bitString(publicKey));
  const info = sequence(integer(0), name, spki, explicit(0));
  return sequence(info, ...(await signatureFields(signer, info)));
}

for (const type of ["ml-dsa-44", "ml-dsa-87", "composite-mldsa65-ed25519"] as const) {
  Deno.test(`csr: a ${type} request's self-signature is checked`, async () => {
    const der = await pqRequest(type);
    assert.equal(nginxSubject((await readRequest(der)).subject), `CN=${type}`);
    const bad = der.slice();
    bad[bad.length - 10] ^= 1;
    await assert.rejects(readRequest(bad), /self-signature does not verify/);
  });
}

Deno.test("csr: bytes that are not one request, or trailing bytes, are refused with what was expected", async () => {
  await assert.rejects(
    readRequest(new TextEncoder().encode("hello")),
    /expected DER or a PEM block/,
  );
  const der = await pqRequest("ml-dsa-44");
  await assert.rejects(readRequest(Uint8Array.of(...der, 0)), /not one complete DER structure/);
  assert.throws(() => readPublicKey(Uint8Array.of(0x30, 0x03, 0x02, 0x01, 0x00)), RequestError);
});
