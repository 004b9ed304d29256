import assert from "node:assert/strict";
import {
  ctx,
  DerError,
  DerReader,
  generalizedTime,
  integer,
  MAX_DEPTH,
  oid,
  oidText,
  sequence,
  TAG,
  tlv,
  x509Time,
} from "./mod.ts";

const refuse = (bytes: number[], read: (r: DerReader) => unknown, message: RegExp) =>
  assert.throws(() => {
    const r = new DerReader(Uint8Array.from(bytes));
    read(r);
    r.finish();
  }, (e: unknown) => e instanceof DerError && message.test(e.message));

Deno.test("DER reader: lengths must be definite, minimal and inside the parent", () => {
  refuse([0x30, 0x80, 0, 0], (r) => r.next(), /indefinite/);
  refuse([0x04, 0x81, 0x05, 1, 2, 3, 4, 5], (r) => r.next(), /shortest form/);
  refuse([0x04, 0x82, 0x00, 0x85, ...new Array(0x85).fill(0)], (r) => r.next(), /shortest form/);
  refuse([0x04, 0x03, 1, 2], (r) => r.next(), /past its parent/);
  refuse([0x04, 0x85, 1, 1, 1, 1, 1], (r) => r.next(), /over 4 bytes/);
  refuse([0x1f, 0x81, 0x01, 0x00], (r) => r.next(), /multi-byte tag/);
  refuse([0x04, 0x01, 1, 0x00], (r) => r.next(), /unexpected data/);
  // Accepted: a minimal long form.
  const long = new DerReader(Uint8Array.from([0x04, 0x81, 0x80, ...new Array(0x80).fill(7)]));
  assert.equal(long.readOctetString().length, 0x80);
  long.finish();
});

Deno.test("DER reader: a child must be consumed exactly and nesting is bounded", () => {
  refuse([0x30, 0x04, 0x05, 0x00, 0x05, 0x00], (r) => {
    const c = r.enter(TAG.SEQUENCE);
    c.readNull();
    c.finish();
  }, /unexpected data/);
  let deep = oid("1.2.3");
  for (let i = 0; i <= MAX_DEPTH; i++) deep = sequence(deep);
  assert.throws(() => {
    let r = new DerReader(deep);
    for (;;) r = r.enter(TAG.SEQUENCE);
  }, /nesting deeper/);
});

Deno.test("DER reader: INTEGER, BOOLEAN, NULL, OID and BIT STRING in DER form only", () => {
  refuse([0x02, 0x02, 0x00, 0x05], (r) => r.readIntegerBytes(), /shortest form/);
  refuse([0x02, 0x02, 0xff, 0x85], (r) => r.readIntegerBytes(), /shortest form/);
  refuse([0x02, 0x00], (r) => r.readIntegerBytes(), /empty INTEGER/);
  refuse([0x02, 0x03, 1, 2, 3], (r) => r.readIntegerBytes(2), /over 2 bytes/);
  refuse([0x01, 0x01, 0x01], (r) => r.readBoolean(), /BOOLEAN not DER/);
  refuse([0x05, 0x01, 0x00], (r) => r.readNull(), /NULL with content/);
  refuse([0x06, 0x02, 0x80, 0x01], (r) => r.readOid(), /shortest form/);
  refuse([0x06, 0x02, 0x2a, 0x86], (r) => r.readOid(), /truncated/);
  refuse([0x03, 0x02, 0x01, 0xfe], (r) => r.readBitStringBytes(), /unused bits/);
  refuse([0x02, 0x01, 0x05], (r) => r.readOctetString(), /expected OCTET STRING/);
  const r = new DerReader(Uint8Array.of(0x02, 0x02, 0x00, 0x80, 0x01, 0x01, 0xff));
  assert.deepEqual([...r.readIntegerBytes()], [0x00, 0x80]);
  assert.equal(r.readBoolean(), true);
  r.finish();
  assert.equal(oidText(oid("1.2.840.113549.1.1.10").subarray(2)), "1.2.840.113549.1.1.10");
  assert.equal(oidText(oid("2.16.840.1.101.3.4.3.18").subarray(2)), "2.16.840.1.101.3.4.3.18");
});

Deno.test("DER times: written and read in DER form, impossible dates refused", () => {
  const t = Date.UTC(2031, 1, 28, 23, 59, 58);
  assert.equal(new TextDecoder().decode(generalizedTime(t + 999).subarray(2)), "20310228235958Z");
  assert.equal(new DerReader(generalizedTime(t)).readTime(), t);
  assert.equal(x509Time(t)[0], TAG.UTC_TIME);
  assert.equal(new DerReader(x509Time(t)).readTime(), t);
  assert.equal(x509Time(Date.UTC(2050, 0, 1))[0], TAG.GENERALIZED_TIME);
  const bad = (s: string) => [...tlv(TAG.GENERALIZED_TIME, new TextEncoder().encode(s))];
  refuse(bad("20310230000000Z"), (r) => r.readTime(), /out of range/);
  refuse(bad("20310228235958.5Z"), (r) => r.readTime(), /DER form/);
  refuse(bad("20310228235958+0100"), (r) => r.readTime(), /DER form/);
});

Deno.test("DER writer: small integers and explicit tags are what openssl asn1parse reads", async () => {
  const der = sequence(
    integer(0),
    integer(127),
    integer(128),
    integer(65536),
    tlv(ctx(0), integer(3)),
  );
  const out = await new Deno.Command("openssl", {
    args: ["asn1parse", "-inform", "DER"],
    stdin: "piped",
    stdout: "piped",
  }).spawn();
  const w = out.stdin.getWriter();
  await w.write(der);
  await w.close();
  const text = new TextDecoder().decode((await out.output()).stdout);
  const ints = [...text.matchAll(/INTEGER\s+:(\w+)/g)].map((m) => m[1]);
  assert.deepEqual(ints, ["00", "7F", "80", "010000", "03"]);
  assert.match(text, /cont \[ 0 \]/);
});
