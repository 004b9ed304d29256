import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { runCommand } from "../../tests/support/command.ts";
import { opensslCa } from "../../tests/support/ocsp.ts";
import { parseCertificate } from "./certificate.ts";
import { certIdFor, MalformedRequest, parseOcspRequest, serialHex } from "./request.ts";
import { encodeOcspRequest } from "./request.ts";
import { MALFORMED_REQUEST, OCSP_STATUS, parseOcspResponse, UNAUTHORIZED } from "./response.ts";
import { Responder } from "./responder.ts";
import { snapshotOf } from "./index_db.ts";
import { boolean, explicit, octetString, oid, sequence, tlv } from "../der/mod.ts";
import { bytesEqual, concat } from "../bytes/mod.ts";
import { OCSP_NONCE_OID } from "./request.ts";
import { pycaAcceptsOcspRequests } from "../../tests/support/pyca.ts";

const set = (...parts: Uint8Array[]) => tlv(0x31, concat(parts));

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
  // Vectors this table does not name (a newer release of the vectors adds some): Python
  // cryptography's verdict decides whether it is a request we must accept. The others in the folder
  // are responses, which are not requests.
  const unnamed = files.filter((name) => !(name in expected));
  const pycaVerdict = new Map(
    pycaAcceptsOcspRequests(unnamed.map((name) => Deno.readFileSync(`${VECTORS}/${name}`)))
      .map((accepted, i) => [unnamed[i], accepted]),
  );
  for (const name of files) {
    const der = Deno.readFileSync(`${VECTORS}/${name}`);
    const got = outcome(der);
    if (name in expected) assert.equal(got, expected[name], name);
    else assert.equal(got !== "malformed", pycaVerdict.get(name), `${name}: ours (${got}) vs pyca`);
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
  const dir = moduleTempDir("ocsp-req-");
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
  const dir = moduleTempDir("ocsp-req-");
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

Deno.test("strictness: signed requests, requestorName, version and critical FALSE — as Python cryptography reads them", async () => {
  const dir = moduleTempDir("ocsp-strict-");
  try {
    const ca = await opensslCa(dir, "ec-p256");
    const openssl = async (name: string, extra: string[]) => {
      const path = `${dir}/${name}.der`;
      const args = ["ocsp", "-issuer", ca.certPath, "-serial", "0x1A", "-no_nonce", ...extra];
      const r = await runCommand("openssl", [...args, "-reqout", path]);
      assert.equal(r.code, 0, r.text);
      return await Deno.readFile(path);
    };
    const signer = ["-signer", ca.certPath, "-signkey", ca.keyPath!];
    const plain = await openssl("plain", []);
    const certIdList = plain.subarray(4); // 30 LL | 30 LL | requestList
    assert.equal(plain[1] + 2, plain.length);
    const tbsWith = (...before: Uint8Array[]) =>
      sequence(sequence(...before, certIdList.subarray(0)));
    const nonceExt = (critical: Uint8Array[]) =>
      explicit(
        2,
        sequence(
          sequence(oid(OCSP_NONCE_OID), ...critical, octetString(octetString(Uint8Array.of(7)))),
        ),
      );
    const dirName = (rdns: Uint8Array[]) => explicit(1, explicit(4, sequence(...rdns)));
    const atv = (value: Uint8Array) => sequence(oid("2.5.4.3"), value);
    const utf8 = (s: string) => tlv(0x0c, new TextEncoder().encode(s));
    // [name, request, we accept, Python cryptography accepts (when not the same)]
    const cases: [string, Uint8Array, boolean, boolean?][] = [
      ["signed by openssl, requestorName and certs", await openssl("signed", signer), true],
      [
        "signed by openssl, no certs",
        await openssl("signed-nocerts", [...signer, "-no_certs"]),
        true,
      ],
      [
        "requestorName dNSName",
        tbsWith(explicit(1, tlv(0x82, new TextEncoder().encode("a.example")))),
        true,
      ],
      ["requestorName directoryName", tbsWith(dirName([set(atv(utf8("x")))])), true],
      [
        "requestorName two-value RDN in DER order",
        tbsWith(dirName([set(atv(utf8("a")), atv(utf8("b")))])),
        true,
      ],
      [
        "requestorName iPAddress",
        tbsWith(explicit(1, tlv(0x87, Uint8Array.of(127, 0, 0, 1)))),
        true,
      ],
      [
        "requestorName registeredID",
        tbsWith(explicit(1, tlv(0x88, Uint8Array.of(0x2a, 0x03)))),
        true,
      ],
      ["requestorName an INTEGER", tbsWith(Uint8Array.from([0xa1, 0x03, 0x02, 0x01, 0x05])), false],
      [
        "requestorName two GeneralNames",
        tbsWith(explicit(1, tlv(0x82, Uint8Array.of(0x61)), tlv(0x82, Uint8Array.of(0x61)))),
        false,
      ],
      [
        "requestorName directoryName value with a BER length",
        tbsWith(dirName([set(sequence(oid("2.5.4.3"), Uint8Array.of(0x0c, 0x81, 0x01, 0x78)))])),
        false,
      ],
      [
        "requestorName directoryName with a constructed string",
        tbsWith(dirName([set(atv(tlv(0x2c, tlv(0x0c, Uint8Array.of(0x78)))))])),
        false,
        true, // BER; Python takes an attribute value as raw bytes
      ],
      [
        "requestorName RDN out of DER order",
        tbsWith(dirName([set(atv(utf8("b")), atv(utf8("a")))])),
        false,
      ],
      [
        "requestorName BMPString of odd length",
        tbsWith(dirName([set(atv(tlv(0x1e, Uint8Array.of(0, 0x41, 0))))])),
        false,
        true, // Python checks the characters only when the name is read
      ],
      [
        "requestorName an unknown [9]",
        tbsWith(explicit(1, tlv(0x89, Uint8Array.of(1)))),
        false,
      ],
      ["explicit version v1", tbsWith(explicit(0, Uint8Array.of(2, 1, 0))), false],
      [
        "nonce critical TRUE",
        sequence(sequence(certIdList.subarray(0), nonceExt([boolean(true)]))),
        true,
      ],
      [
        "nonce critical FALSE written out",
        sequence(sequence(certIdList.subarray(0), nonceExt([boolean(false)]))),
        false,
      ],
    ];
    const ours = cases.map(([, der]) => outcome(der) !== "malformed");
    const theirs = pycaAcceptsOcspRequests(cases.map(([, der]) => der));
    for (const [i, [name, der, accepted, pyca = accepted]] of cases.entries()) {
      assert.equal(ours[i], accepted, `${name}: ours (${outcome(der)})`);
      assert.equal(theirs[i], pyca, `${name}: Python cryptography`);
    }
    assert.equal(parseOcspRequest(cases[0][1]).signed, true);
    assert.equal(serialHex(parseOcspRequest(cases[0][1]).certIds[0].serial), "1A");
    // The certificates a signed request carries must parse as X.509: a certificate whose
    // tbsCertificate is not a SEQUENCE was let through before.
    const signed = cases[0][1];
    const at = signed.findIndex((_, k) =>
      bytesEqual(signed.subarray(k, k + ca.der.length), ca.der)
    );
    assert.ok(at > 0);
    const broken = signed.slice();
    broken[at + 4] = 0x31; // 30 82 LL LL | 30 → 31
    assert.equal(outcome(broken), "malformed");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
