/**
 * svcmod's certificate objects (CKO_CERTIFICATE, CKC_X_509) through the project's binding: made by
 * C_CreateObject, found by class and CKA_ID, read back as given, kept in the token directory
 * (pkcs11-tool in another process, without a login, lists them with their ID), destroyed by
 * C_DestroyObject; templates a certificate cannot have are refused with the PKCS#11 answer.
 */
import assert from "node:assert/strict";
import {
  type AttributeIn,
  boolBytes,
  check,
  CKA,
  CKC,
  CKO,
  CKR,
  encodeTemplate,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { findObjects, getAttributes } from "../../lib/token/mod.ts";
import { openSvcmod, SVCMOD_LIB, type SvcmodToken } from "./fixture.ts";

/** A DER certificate is opaque to the module: any bytes stand for one here. */
const VALUE = crypto.getRandomValues(new Uint8Array(3000));
const ID = Uint8Array.fromHex("a1b2c3d4e5f60718");

function certificateTemplate(extra: AttributeIn[] = [], value = VALUE): AttributeIn[] {
  return [
    { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
    { type: CKA.CERTIFICATE_TYPE, value: ulongBytes(CKC.X_509) },
    { type: CKA.TOKEN, value: boolBytes(true) },
    { type: CKA.PRIVATE, value: boolBytes(false) },
    { type: CKA.ID, value: ID },
    { type: CKA.LABEL, value: new TextEncoder().encode("k-cert") },
    { type: CKA.VALUE, value },
    { type: CKA.SUBJECT, value: Uint8Array.of(0x30, 0x00) },
    { type: CKA.ISSUER, value: Uint8Array.of(0x30, 0x00) },
    { type: CKA.SERIAL_NUMBER, value: Uint8Array.of(0x02, 0x01, 0x2a) },
    ...extra,
  ];
}

function create(t: SvcmodToken, template: AttributeIn[]): { rv: number; handle: number } {
  const encoded = encodeTemplate(template);
  const out = new BigUint64Array(1);
  const rv = t.mod.fn.C_CreateObject(
    t.session,
    encoded.bytes,
    template.length,
    new Uint8Array(out.buffer),
  );
  return { rv, handle: Number(out[0]) };
}

const BY_ID = [
  { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
  { type: CKA.ID, value: ID },
];

async function pkcs11ToolCertificates(t: SvcmodToken): Promise<string> {
  const out = await new Deno.Command("pkcs11-tool", {
    args: ["--module", SVCMOD_LIB, "--list-objects", "--type", "cert"],
    env: { SVCMOD_CONF: t.conf },
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout);
}

Deno.test("svcmod: a certificate object is created, found by ID, kept on disk and destroyed", async () => {
  const t = await openSvcmod();
  try {
    const made = create(t, certificateTemplate());
    check("C_CreateObject", made.rv);
    assert.deepEqual(findObjects(t.mod, t.session, BY_ID), [made.handle]);
    const read = getAttributes(t.mod, t.session, made.handle, [
      CKA.VALUE,
      CKA.CERTIFICATE_TYPE,
      CKA.PRIVATE,
      CKA.LABEL,
      CKA.SERIAL_NUMBER,
      CKA.KEY_TYPE,
    ]);
    assert.deepEqual(read.get(CKA.VALUE), VALUE);
    assert.deepEqual(read.get(CKA.CERTIFICATE_TYPE), ulongBytes(CKC.X_509));
    assert.deepEqual(read.get(CKA.PRIVATE), boolBytes(false));
    assert.equal(new TextDecoder().decode(read.get(CKA.LABEL)!), "k-cert");
    assert.deepEqual(read.get(CKA.SERIAL_NUMBER), Uint8Array.of(0x02, 0x01, 0x2a));
    assert.equal(read.get(CKA.KEY_TYPE), null, "a certificate is no key");

    // Another process, not logged in, finds it in the token directory.
    const listed = await pkcs11ToolCertificates(t);
    assert.match(listed, /label:\s+k-cert/);
    assert.match(listed, new RegExp(`ID:\\s+${ID.toHex()}`));

    check("C_DestroyObject", t.mod.fn.C_DestroyObject(t.session, made.handle));
    assert.deepEqual(findObjects(t.mod, t.session, BY_ID), []);
    assert.doesNotMatch(await pkcs11ToolCertificates(t), /k-cert/);
  } finally {
    await t.close();
  }
});

Deno.test("svcmod: a certificate template it cannot hold is refused, nothing made", async () => {
  const t = await openSvcmod();
  try {
    const without = (type: number) => certificateTemplate().filter((a) => a.type !== type);
    const cases: [string, AttributeIn[], number][] = [
      ["no value", without(CKA.VALUE), CKR.TEMPLATE_INCOMPLETE],
      ["no certificate type", without(CKA.CERTIFICATE_TYPE), CKR.TEMPLATE_INCOMPLETE],
      ["empty value", certificateTemplate([], new Uint8Array()), CKR.ATTRIBUTE_VALUE_INVALID],
      [
        "larger than 64 KiB",
        certificateTemplate([], new Uint8Array(64 * 1024 + 1)),
        CKR.ATTRIBUTE_VALUE_INVALID,
      ],
      [
        "not X.509",
        [...without(CKA.CERTIFICATE_TYPE), {
          type: CKA.CERTIFICATE_TYPE,
          value: ulongBytes(2),
        }],
        CKR.ATTRIBUTE_VALUE_INVALID,
      ],
      [
        "a key type",
        certificateTemplate([{ type: CKA.KEY_TYPE, value: ulongBytes(0) }]),
        CKR.ATTRIBUTE_TYPE_INVALID,
      ],
      [
        "trusted, by the user",
        certificateTemplate([{ type: CKA.TRUSTED, value: boolBytes(true) }]),
        CKR.ATTRIBUTE_READ_ONLY,
      ],
    ];
    for (const [name, template, rv] of cases) {
      assert.equal(create(t, template).rv, rv, name);
    }
    assert.deepEqual(findObjects(t.mod, t.session, [BY_ID[0]]), []);
  } finally {
    await t.close();
  }
});
