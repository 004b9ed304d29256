import assert from "node:assert/strict";
import { loadPublicFiles, PublicFileError } from "./files.ts";
import { readCertificates } from "../../ocsp/mod.ts";
import { opensslCa } from "../../../tests/support/ocsp.ts";

/** A self-signed EC CA by openssl (valid 3650 days), its key in the same PEM file after it. */
async function caFileWithKey(dir: string): Promise<{ file: string; certPem: string }> {
  const ca = await opensslCa(dir, "ec-p256");
  const certPem = Deno.readTextFileSync(ca.certPath);
  const file = `${dir}/chain-with-key.pem`;
  Deno.writeTextFileSync(file, "a comment\n" + certPem + Deno.readTextFileSync(ca.keyPath!));
  return { file, certPem };
}

Deno.test("public files: /certificates serves the certificates only, re-encoded, never a key", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { file, certPem } = await caFileWithKey(dir);
    const files = loadPublicFiles({ caCertificates: file });
    const served = new TextDecoder().decode(files.certificatesPem);
    assert.doesNotMatch(served, /PRIVATE KEY|comment/);
    assert.deepEqual(readCertificates(files.certificatesPem)[0].der, files.issuer.der);
    assert.equal(served.replaceAll("\n", ""), certPem.replaceAll("\n", ""));
    // A DER file is served as PEM too.
    Deno.writeFileSync(`${dir}/ca.der`, files.issuer.der);
    assert.deepEqual(
      loadPublicFiles({ caCertificates: `${dir}/ca.der` }).certificatesPem,
      files.certificatesPem,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("public files: a CA outside its validity is refused with what to do", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const { file } = await caFileWithKey(dir);
    const later = Date.now() + 3651 * 86_400_000;
    assert.throws(
      () => loadPublicFiles({ caCertificates: file }, later),
      (e) => e instanceof PublicFileError && /expired at .*svcd ca init/.test(e.message),
    );
    const earlier = Date.now() - 86_400_000;
    assert.throws(
      () => loadPublicFiles({ caCertificates: file }, earlier),
      (e) => e instanceof PublicFileError && /not valid before/.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
