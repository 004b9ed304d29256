import assert from "node:assert/strict";
import { runCommand } from "../../tests/support/command.ts";
import { opensslCa } from "../../tests/support/ocsp.ts";
import { parseCertificate } from "./certificate.ts";
import { certIdFor, MalformedRequest, parseOcspRequest, serialHex } from "./request.ts";
import { encodeOcspRequest } from "./request.ts";
import { MALFORMED_REQUEST, OCSP_STATUS, parseOcspResponse, UNAUTHORIZED } from "./response.ts";
import { Responder } from "./responder.ts";
import { snapshotOf } from "./index_db.ts";

// Debian python3-cryptography-vectors (installed by make setup).
const VECTORS = "/usr/lib/python3/dist-packages/cryptography_vectors/x509/ocsp";
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");

function outcome(der: Uint8Array): string {
  try {
    const r = parseOcspRequest(der);
    return `ok ${r.certIds.length} ${
      r.certIds.map((c) => c.hash ?? "unsupported").join(",")
    } nonce=${r.nonce ? hex(r.nonce) : "-"}`;
  } catch (e) {
    if (e instanceof MalformedRequest) return "malformed";
    throw e; // anything else is a crash
  }
}

Deno.test("request parser over the pyca/cryptography OCSP vectors: each accepted or refused by the rules", () => {
  const expected: Record<string, string> = {
    "ocsp-army.inapplicable-req.der": "ok 1 sha1 nonce=-",
    "ocsp-army.revoked-req.der": "ok 1 sha1 nonce=-",
    "ocsp-army.valid-req.der": "ok 1 sha1 nonce=-",
    "req-duplicate-ext.der": "malformed", // the nonce extension twice
    "req-ext-nonce.der": "ok 1 sha1 nonce=7b805a1d3726b8b84f48d2f8bfd72dfd",
    "req-ext-unknown-oid.der": "ok 1 sha1 nonce=-", // non-critical unknown: ignored
    "req-invalid-hash-alg.der": "ok 1 unsupported nonce=-", // parses; the responder says unauthorized
    "req-multi-sha1.der": "ok 2 sha1,sha1 nonce=-",
    "req-sha1.der": "ok 1 sha1 nonce=-",
  };
  const files = [...Deno.readDirSync(VECTORS)].map((e) => e.name).sort();
  assert.ok(
    files.length >= 20,
    `vectors missing in ${VECTORS}: apt-get install python3-cryptography-vectors`,
  );
  for (const name of files) {
    const der = Deno.readFileSync(`${VECTORS}/${name}`);
    // Responses sent as requests are not requests.
    const want = expected[name] ?? "malformed";
    assert.equal(outcome(der), want, name);
    // Every prefix and a flipped byte: refused or accepted, never a crash.
    for (let n = 0; n < der.length; n++) outcome(der.subarray(0, n));
    for (let i = 0; i < der.length; i++) {
      const bent = der.slice();
      bent[i] ^= 0x41;
      outcome(bent);
    }
  }
  const multi = parseOcspRequest(Deno.readFileSync(`${VECTORS}/req-multi-sha1.der`));
  assert.equal(serialHex(multi.certIds[0].serial), "98D9E5C0B4C373552DF77C5D0F1EB5128E4945F9");
});

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
// The time as `openssl ocsp -resp_text` prints it: "Sep  1 04:11:54 2018 GMT".
function opensslTime(ms: number): string {
  const d = new Date(ms);
  const day = String(d.getUTCDate()).padStart(2, " ");
  return `${MONTHS[d.getUTCMonth()]} ${day} ${
    d.toISOString().slice(11, 19)
  } ${d.getUTCFullYear()} GMT`;
}

Deno.test("response reader over the pyca vectors: what openssl reads, we read; what it refuses, we refuse", async () => {
  const files = [...Deno.readDirSync(VECTORS)].map((e) => e.name).filter((n) => n.includes("resp"))
    .sort();
  for (const name of files) {
    const path = `${VECTORS}/${name}`;
    const o = await runCommand("openssl", ["ocsp", "-respin", path, "-resp_text", "-noverify"]);
    const refused = /Responder Error: \S+ \((\d+)\)/.exec(o.text);
    if (refused) {
      const ours = parseOcspResponse(Deno.readFileSync(path));
      assert.ok(ours.basic === undefined, name);
      const code = typeof ours.status === "number" ? ours.status : OCSP_STATUS[ours.status];
      assert.equal(code, Number(refused[1]), name);
      continue;
    }
    const status = /OCSP Response Status: (\w+)/.exec(o.text)?.[1];
    if (!status || /error/.test(o.stderr)) {
      assert.throws(() => parseOcspResponse(Deno.readFileSync(path)), Error, name);
      continue;
    }
    const ours = parseOcspResponse(Deno.readFileSync(path));
    assert.equal(ours.status, status, name);
    const theirs = [
      ...o.stdout.matchAll(
        /Cert Status: (\w+)(?:\n\s*Revocation Time: ([^\n]+))?(?:\n\s*Revocation Reason: \w+ \(0x(\d+)\))?/g,
      ),
    ]
      .map((m) => [m[1], m[2] ?? null, m[3] === undefined ? null : Number(m[3])]);
    const mine = (ours.basic?.singles ?? []).map((s) =>
      s.certStatus.status === "revoked"
        ? ["revoked", opensslTime(s.certStatus.revokedAt), s.certStatus.reason ?? null]
        : [s.certStatus.status, null, null]
    );
    assert.deepEqual(mine, theirs, name);
  }
});

Deno.test("encoded requests read the same in openssl and Python cryptography", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ocsp-req-" });
  try {
    const ca = await opensslCa(dir, "ed25519");
    const issuer = parseCertificate(ca.der);
    const nonce = Uint8Array.from({ length: 32 }, (_, i) => i);
    const req = encodeOcspRequest({
      certIds: [
        certIdFor(issuer, Uint8Array.of(0x00, 0xab, 0xcd), "sha256"),
        certIdFor(issuer, Uint8Array.of(0x05)),
      ],
      nonce,
    });
    await Deno.writeFile(`${dir}/req.der`, req);
    const text = await runCommand("openssl", [
      "ocsp",
      "-reqin",
      `${dir}/req.der`,
      "-req_text",
      "-noverify",
    ]);
    assert.equal(text.code, 0, text.text);
    assert.match(
      text.stdout,
      /Hash Algorithm: sha256[\s\S]*Serial Number: ABCD[\s\S]*Hash Algorithm: sha1[\s\S]*Serial Number: 05/,
    );
    assert.match(text.stdout, new RegExp(`OCSP Nonce:\\s*\\n\\s*0420${hex(nonce).toUpperCase()}`));
    const py = await runCommand("/usr/bin/python3", [
      "-c",
      `
import sys
from cryptography.x509 import ocsp, OCSPNonce
r = ocsp.load_der_ocsp_request(open(sys.argv[1], "rb").read())
print(r.serial_number, r.hash_algorithm.name, r.issuer_key_hash.hex(), r.extensions.get_extension_for_class(OCSPNonce).value.nonce.hex())
`,
      `${dir}/req.der`,
    ]);
    // cryptography reads single-certificate requests only: it must refuse two, so check one as well.
    assert.notEqual(py.code, 0);
    await Deno.writeFile(
      `${dir}/one.der`,
      encodeOcspRequest({
        certIds: [certIdFor(issuer, Uint8Array.of(0x00, 0xab, 0xcd), "sha256")],
        nonce,
      }),
    );
    const one = await runCommand("/usr/bin/python3", [
      "-c",
      `
import sys
from cryptography.x509 import ocsp, OCSPNonce
r = ocsp.load_der_ocsp_request(open(sys.argv[1], "rb").read())
print(r.serial_number, r.hash_algorithm.name, r.issuer_key_hash.hex(), r.extensions.get_extension_for_class(OCSPNonce).value.nonce.hex())
`,
      `${dir}/one.der`,
    ]);
    assert.equal(one.code, 0, one.text);
    const keyHash = hex(
      new Uint8Array(await crypto.subtle.digest("SHA-256", issuer.publicKey.slice())),
    );
    assert.equal(one.stdout.trim(), `${0xabcd} sha256 ${keyHash} ${hex(nonce)}`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the responder answers each pyca request vector by the rules: not our CA → unauthorized, else malformed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "ocsp-req-" });
  try {
    const ca = await opensslCa(dir, "ec-p256");
    const responder = new Responder({
      source: { current: () => snapshotOf([]) },
      issuer: ca.der,
      signer: ca.signer,
    });
    for (const name of [...Deno.readDirSync(VECTORS)].map((e) => e.name)) {
      const der = Deno.readFileSync(`${VECTORS}/${name}`);
      const want = outcome(der) === "malformed" ? MALFORMED_REQUEST : UNAUTHORIZED;
      assert.deepEqual(await responder.answer(der), want, name);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
