import assert from "node:assert/strict";
import { pem } from "../../der/mod.ts";
import { readCertificates } from "../../ocsp/mod.ts";
import { chainAbove, keyCertificate, RefusalNotes } from "./key_certificate.ts";

/** Runs openssl in `dir` with the words of `command`; throws with its stderr when it fails. */
function openssl(dir: string, command: string): void {
  const args = command.split(" ");
  const out = new Deno.Command("openssl", { args, cwd: dir, stderr: "piped" }).outputSync();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
}

/** root → intermediate → leaf, made by openssl (P-256 keys), parsed. */
function opensslChain() {
  const dir = Deno.makeTempDirSync({ prefix: "key-certificate-" });
  try {
    Deno.writeTextFileSync(`${dir}/ca.ext`, "basicConstraints=critical,CA:TRUE\n");
    const key = (name: string) =>
      `-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ${name}.key -subj /CN=${name}`;
    openssl(dir, `req -x509 ${key("root")} -out root.pem`);
    for (const [name, issuer, ext] of [["mid", "root", " -extfile ca.ext"], ["leaf", "mid", ""]]) {
      openssl(dir, `req -new ${key(name)} -out ${name}.csr`);
      openssl(
        dir,
        `x509 -req -in ${name}.csr -CA ${issuer}.pem -CAkey ${issuer}.key -CAcreateserial${ext} ` +
          `-out ${name}.pem`,
      );
    }
    const [root, mid, leaf] = ["root", "mid", "leaf"].map((n) =>
      readCertificates(Deno.readFileSync(`${dir}/${n}.pem`))[0]
    );
    return { root, mid, leaf };
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

Deno.test("key certificate: the chain is each issuer in turn up to the self-signed CA, in any file order", () => {
  const { root, mid, leaf } = opensslChain();
  assert.deepEqual(chainAbove(leaf, [root, mid]), [mid.der, root.der]);
  assert.deepEqual(chainAbove(leaf, [mid]), [mid.der], "as far as the file goes");
  assert.deepEqual(chainAbove(leaf, [root]), [], "no issuer of the certificate: none");
  assert.deepEqual(chainAbove(root, [root, mid]), [], "a self-signed certificate has none above");
});

Deno.test("key certificate: stated only for the key's own public key, with its chain", () => {
  const { root, mid, leaf } = opensslChain();
  const caFile = new TextEncoder().encode(
    [mid, root].map((c) => pem("CERTIFICATE", c.der)).join(""),
  );
  const found = keyCertificate("k", leaf.spki, [root.der, leaf.der], () => caFile);
  assert.ok("certificate" in found);
  assert.deepEqual(found.certificate, leaf.der);
  assert.deepEqual(found.chain, [mid.der, root.der]);

  const wrong = keyCertificate("k", mid.spki, [leaf.der], () => caFile);
  assert.ok(!("certificate" in wrong));
  assert.match(wrong.refused!, /'k'.*does not hold the key's public key/);
  const garbage = keyCertificate("k", leaf.spki, [Uint8Array.of(1, 2, 3)], () => caFile);
  assert.match((garbage as { refused: string }).refused, /not a DER X\.509 certificate/);
  assert.deepEqual(keyCertificate("k", leaf.spki, [], () => caFile), {}, "none stored");
  const unreadable = keyCertificate("k", leaf.spki, [leaf.der], () => undefined);
  assert.deepEqual((unreadable as { chain: Uint8Array[] }).chain, []);
});

Deno.test("key certificate: a refusal is told once per key per interval", () => {
  const notes = new RefusalNotes(1000, 2);
  assert.equal(notes.due("a", 0), true);
  assert.equal(notes.due("a", 999), false);
  assert.equal(notes.due("b", 999), true, "another key is told");
  assert.equal(notes.due("a", 1000), true, "again after the interval");
});
