import assert from "node:assert/strict";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { runCommand } from "../../tests/support/command.ts";
import { NameError, nameFromRfc4514, nginxSubject, slashSubject } from "./name.ts";

type Value = asn1js.BaseBlock;
const utf8 = (value: string) => new asn1js.Utf8String({ value });

/** A Name from RDNs given in DER order, each a list of [oid, value]. */
function name(rdns: Array<Array<[string, Value]>>): pkijs.RelativeDistinguishedNames {
  const seq = new asn1js.Sequence({
    value: rdns.map((rdn) =>
      new asn1js.Set({
        value: rdn.map(([type, value]) =>
          new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: type }), value] })
        ),
      })
    ),
  });
  return pkijs.RelativeDistinguishedNames.fromBER(seq.toBER());
}

/** OpenSSL's own printing of a subject (a CSR with a dummy signature is enough for -subject). */
async function opensslSubject(
  subject: pkijs.RelativeDistinguishedNames,
  nameopt: string,
): Promise<string> {
  const spki = Uint8Array.fromHex(
    "302a300506032b6570032100" + "11".repeat(32),
  );
  const csr = new pkijs.CertificationRequest({
    subject,
    subjectPublicKeyInfo: pkijs.PublicKeyInfo.fromBER(spki.buffer),
    signatureAlgorithm: new pkijs.AlgorithmIdentifier({ algorithmId: "1.3.101.112" }),
    signatureValue: new asn1js.BitString({ valueHex: new Uint8Array(64).buffer }),
  });
  const file = await Deno.makeTempFile({ suffix: ".der" });
  try {
    await Deno.writeFile(file, new Uint8Array(csr.toSchema(true).toBER()));
    const r = await runCommand("openssl", [
      "req",
      "-inform",
      "DER",
      "-in",
      file,
      "-noout",
      "-subject",
      "-nameopt",
      nameopt,
    ]);
    assert.equal(r.code, 0, r.text);
    return r.stdout.replace(/^subject=/, "").replace(/\n$/, "");
  } finally {
    await Deno.remove(file);
  }
}

const bmp = (value: string) => new asn1js.BmpString({ value });
const t61 = (bytes: number[]) =>
  new asn1js.TeletexString({ valueHex: Uint8Array.from(bytes).buffer });

const CASES: Array<[string, pkijs.RelativeDistinguishedNames]> = [
  [
    "plain",
    name([[["2.5.4.6", new asn1js.PrintableString({ value: "DE" })]], [[
      "2.5.4.10",
      utf8("Example"),
    ]], [["2.5.4.3", utf8("alice")]]]),
  ],
  [
    "RFC 2253 specials",
    name([[["2.5.4.10", utf8('A,B+C"D\\E<F>G;H=I/J')]], [["2.5.4.3", utf8("#lead")]]]),
  ],
  ["leading, trailing and inner spaces", name([[["2.5.4.3", utf8("  two  spaces  ")]]])],
  [
    "a single space, a lone #, an empty value",
    name([[["2.5.4.3", utf8(" ")]], [["2.5.4.11", utf8("#")]], [["2.5.4.10", utf8("")]]]),
  ],
  ["UTF-8 two, three and four bytes", name([[["2.5.4.3", utf8("Müller – 中文 😀")]]])],
  ["control bytes and DEL", name([[["2.5.4.3", utf8("a\tb\nc\x7fd\x00e")]]])],
  [
    "BMPString and T61String (Latin-1)",
    name([[["2.5.4.3", bmp("Zoë ☃")]], [["2.5.4.10", t61([0x41, 0xe9, 0x2c])]]]),
  ],
  [
    "non-text values (SEQUENCE, BIT STRING) are dumped as #hex DER",
    name([
      [["2.5.4.3", new asn1js.Sequence({ value: [new asn1js.Integer({ value: 258 })] })]],
      [["2.5.4.10", new asn1js.BitString({ valueHex: Uint8Array.of(0xa5).buffer })]],
    ]),
  ],
  [
    "multi-valued RDN",
    name([[["2.5.4.6", new asn1js.PrintableString({ value: "DE" })]], [["2.5.4.3", utf8("alice")], [
      "0.9.2342.19200300.100.1.1",
      utf8("a1"),
    ]]]),
  ],
  [
    "every attribute type in the table",
    name([
      "2.5.4.3",
      "2.5.4.4",
      "2.5.4.5",
      "2.5.4.6",
      "2.5.4.7",
      "2.5.4.8",
      "2.5.4.9",
      "2.5.4.10",
      "2.5.4.11",
      "2.5.4.12",
      "2.5.4.13",
      "2.5.4.15",
      "2.5.4.17",
      "2.5.4.41",
      "2.5.4.42",
      "2.5.4.43",
      "2.5.4.44",
      "2.5.4.46",
      "2.5.4.65",
      "2.5.4.97",
      "1.2.840.113549.1.9.1",
      "0.9.2342.19200300.100.1.1",
      "0.9.2342.19200300.100.1.25",
    ].map((oid) => [[oid, new asn1js.PrintableString({ value: "v1" })]])),
  ],
];

for (const [label, subject] of CASES) {
  Deno.test(`nginx form = openssl -nameopt RFC2253 (nginx's $ssl_client_s_dn): ${label}`, async () => {
    assert.equal(nginxSubject(subject), await opensslSubject(subject, "RFC2253"));
  });
}

Deno.test("slash form = openssl's oneline (what openssl ca writes into index.txt)", async () => {
  for (const i of [0, 2, 8]) {
    const subject = CASES[i][1];
    assert.equal(slashSubject(subject), await opensslSubject(subject, "compat"), CASES[i][0]);
  }
});

Deno.test("an attribute type outside the table is refused, not printed in a form the proxy does not send", () => {
  const subject = name([[["1.2.3.4.5", utf8("x")]]]);
  assert.throws(() => nginxSubject(subject), NameError);
});

Deno.test("--subject in RFC 4514 round-trips to the same nginx string and to openssl's", async () => {
  for (
    const text of [
      "CN=alice,O=Example,C=DE",
      "CN=Acme\\, Inc. \\+ more,OU=Dev,O=Example,DC=example,DC=org",
      "CN=\\#1  lead and trail\\ ,O=M\\C3\\BCller",
      "emailAddress=a@example.org,CN=x",
      "UID=a1+CN=alice,C=DE",
    ]
  ) {
    const subject = nameFromRfc4514(text);
    assert.equal(nginxSubject(subject), text);
    assert.equal(await opensslSubject(subject, "RFC2253"), text);
  }
});

Deno.test("--subject hex escapes are bytes: \\C3\\BC is ü", () => {
  assert.equal(nginxSubject(nameFromRfc4514("CN=M\\C3\\BCller")), "CN=M\\C3\\BCller");
  assert.equal(nginxSubject(nameFromRfc4514("CN=Müller")), "CN=M\\C3\\BCller");
});

Deno.test("multi-valued RDN members are sorted into DER order", () => {
  const a = nameFromRfc4514("CN=alice+UID=a1");
  const b = nameFromRfc4514("UID=a1+CN=alice");
  assert.deepEqual(new Uint8Array(a.toSchema().toBER()), new Uint8Array(b.toSchema().toBER()));
});

Deno.test("bad --subject values are refused with what to write instead", () => {
  assert.throws(() => nameFromRfc4514("/C=DE/O=Example/CN=alice"), /CN=alice,O=Example,C=DE/);
  assert.throws(() => nameFromRfc4514("C = DE, CN = x"), NameError);
  assert.throws(() => nameFromRfc4514("XYZ=1"), /unknown attribute type 'XYZ'/);
  assert.throws(() => nameFromRfc4514("CN=a\\"), /lone backslash/);
  assert.throws(() => nameFromRfc4514("CN=a,C=Germany"), /two capital letters/);
  assert.throws(() => nameFromRfc4514("CN=a,C=D_"), /PrintableString/);
  assert.throws(() => nameFromRfc4514("CN=#0403616263"), /hex-encoded/);
  assert.throws(() => nameFromRfc4514("noequals"), NameError);
});
