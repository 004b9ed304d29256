import assert from "node:assert/strict";
import { createHash, generateKeyPairSync, sign, verify } from "node:crypto";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { oid, sequence, tlv } from "../der/mod.ts";
import type { Signer } from "../ocsp/mod.ts";
import { type CrlIssuer, type CrlScope, RevokedSet, signCrl } from "./crl.ts";

const CRL_URL = "http://pki.example.org/crl";
const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
const SPKI = new Uint8Array(publicKey.export({ type: "spki", format: "der" }));
/** Name: CN=CRL unit CA, written by hand (no svcd code in the way). */
const NAME = sequence(
  tlv(0x31, sequence(oid("2.5.4.3"), tlv(0x0c, new TextEncoder().encode("CRL unit CA")))),
);
const ISSUER: CrlIssuer = { name: NAME, spki: SPKI, crlUrl: CRL_URL };
const SIGNER: Signer = {
  keyType: "ec-p256",
  sign: (tbs) =>
    Promise.resolve(
      new Uint8Array(sign("sha256", tbs, { key: privateKey, dsaEncoding: "ieee-p1363" })),
    ),
};
const THIS_UPDATE = Date.UTC(2026, 0, 2, 3, 4, 5);
const TIMES = { number: 42n, thisUpdate: THIS_UPDATE, nextUpdate: THIS_UPDATE + 7 * 86_400_000 };

/** One index.txt revocation: the serial's bytes (maybe with leading zeros), when, the reason. */
interface Revocation {
  key: Uint8Array;
  at: number;
  reason: number;
}

function setOf(partitions: number, revocations: Revocation[]): RevokedSet {
  const set = new RevokedSet(partitions);
  for (const r of revocations) {
    // The visitor gets the serial inside a larger buffer, as the compact index hands it over.
    const heap = new Uint8Array([0xee, ...r.key, 0xee]);
    set.add(heap, 1, 1 + r.key.length, Math.floor(r.at / 1000), r.reason);
  }
  return set;
}

/** The CRL as pkijs reads it, its signature checked by node:crypto with the CA's public key. */
function read(der: Uint8Array): pkijs.CertificateRevocationList {
  const crl = pkijs.CertificateRevocationList.fromBER(der.slice().buffer);
  assert.equal(crl.signatureAlgorithm.algorithmId, "1.2.840.10045.4.3.2", "ecdsa-with-SHA256");
  assert.equal(crl.signature.algorithmId, crl.signatureAlgorithm.algorithmId);
  const signature = crl.signatureValue.valueBlock.valueHexView;
  assert.ok(verify("sha256", crl.tbsView, publicKey, signature), "the signature verifies");
  return crl;
}

function extension(crl: pkijs.CertificateRevocationList, id: string) {
  return crl.crlExtensions?.extensions.find((e) => e.extnID === id);
}

/** Each listed serial as a hex INTEGER content (a leading 00 where the top bit is set). */
function listedSerials(crl: pkijs.CertificateRevocationList): string[] {
  return (crl.revokedCertificates ?? []).map((c) =>
    c.userCertificate.valueBlock.valueHexView.toHex()
  );
}

function randomRevocations(count: number): Revocation[] {
  return Array.from({ length: count }, (_, i) => ({
    key: crypto.getRandomValues(new Uint8Array(16)),
    at: Date.UTC(2025, 5, 1) + i * 3_600_000,
    reason: i % 3 === 0 ? -1 : 1,
  }));
}

Deno.test("crl: each entry as pkijs reads it — the serial as a DER INTEGER, the revocation time, a reason unless none or unspecified", async () => {
  const revocations: Revocation[] = [
    { key: Uint8Array.of(0, 0, 0x7f), at: Date.UTC(1999, 11, 31, 23, 59, 59), reason: -1 },
    { key: Uint8Array.of(0x80, 0x01), at: Date.UTC(2049, 11, 31, 0, 0, 0), reason: 1 },
    { key: Uint8Array.of(0x00), at: Date.UTC(2025, 5, 1, 12, 34, 56), reason: 0 },
    { key: new Uint8Array(20).fill(0xab), at: Date.UTC(2025, 5, 1, 12, 34, 57), reason: 5 },
    { key: Uint8Array.of(0x12, 0x34), at: Date.UTC(2025, 5, 2, 0, 0, 1), reason: 10 },
  ];
  const der = await signCrl(ISSUER, setOf(1, revocations), "full", TIMES, SIGNER);
  const crl = read(der);
  assert.deepEqual(listedSerials(crl), ["7f", "008001", "00", "00" + "ab".repeat(20), "1234"]);
  const entries = crl.revokedCertificates!;
  assert.deepEqual(
    entries.map((e) => e.revocationDate.value.getTime()),
    revocations.map((r) => r.at),
  );
  const reasons = entries.map((e) => {
    const ext = e.crlEntryExtensions?.extensions ?? [];
    if (ext.length === 0) return -1;
    assert.equal(ext.length, 1);
    assert.equal(ext[0].extnID, "2.5.29.21");
    assert.equal(ext[0].critical, false);
    return (asn1js.fromBER(ext[0].extnValue.valueBlock.valueHexView).result as asn1js.Enumerated)
      .valueBlock.valueDec;
  });
  assert.deepEqual(reasons, [-1, 1, -1, 5, 10]);
});

Deno.test("crl: v2, the CA's name, thisUpdate and nextUpdate, AKI = SHA-1 of the CA key, cRLNumber as a DER INTEGER", async () => {
  const keyBits = new Uint8Array(
    pkijs.PublicKeyInfo.fromBER(SPKI.slice().buffer).subjectPublicKey.valueBlock.valueHexView,
  );
  const ski = createHash("sha1").update(keyBits).digest().toString("hex");
  const numbers: Array<[bigint, string]> = [
    [0n, "00"],
    [1n, "01"],
    [0x7fn, "7f"],
    [0x80n, "0080"],
    [1767225600000n, "019b76daa800"],
    [2n ** 159n, "008" + "0".repeat(39)],
  ];
  for (const [number, content] of numbers) {
    const crl = read(await signCrl(ISSUER, setOf(1, []), "full", { ...TIMES, number }, SIGNER));
    assert.equal(crl.version, 1, "v2");
    assert.deepEqual(new Uint8Array(crl.issuer.toSchema().toBER()), NAME);
    assert.equal(crl.thisUpdate.value.getTime(), TIMES.thisUpdate);
    assert.equal(crl.nextUpdate!.value.getTime(), TIMES.nextUpdate);
    const aki = extension(crl, "2.5.29.35")!;
    assert.equal(aki.critical, false);
    assert.equal(
      (aki.parsedValue as pkijs.AuthorityKeyIdentifier).keyIdentifier!.valueBlock.valueHexView
        .toHex(),
      ski,
    );
    const crlNumber = extension(crl, "2.5.29.20")!;
    assert.equal(crlNumber.critical, false);
    const value = asn1js.fromBER(crlNumber.extnValue.valueBlock.valueHexView).result;
    assert.ok(value instanceof asn1js.Integer);
    assert.equal(value.valueBlock.valueHexView.toHex(), content, `cRLNumber ${number}`);
    // Nothing listed: the revokedCertificates field is absent, not an empty SEQUENCE.
    assert.equal(crl.revokedCertificates, undefined);
    assert.equal(extension(crl, "2.5.29.28"), undefined, "the full CRL has no IDP");
  }
  await assert.rejects(
    signCrl(ISSUER, setOf(1, []), "full", { ...TIMES, number: -1n }, SIGNER),
    RangeError,
  );
});

Deno.test("crl: each partition lists exactly its serials (serial mod N) in file order, with a critical IDP naming its URL; the full CRL lists all", async () => {
  const partitions = 5;
  const revocations = randomRevocations(40);
  const set = setOf(partitions, revocations);
  assert.equal(set.count, 40);
  assert.deepEqual(set.scopes(), ["full", 0, 1, 2, 3, 4]);
  // The INTEGER content: no leading zero bytes, one 00 where the top bit would read as a sign.
  const hexOf = (r: Revocation) => {
    const hex = r.key.toHex().replace(/^(00)+(?=..)/, "");
    return (parseInt(hex.slice(0, 2), 16) & 0x80 ? "00" : "") + hex;
  };
  const full = read(await signCrl(ISSUER, set, "full", TIMES, SIGNER));
  assert.deepEqual(listedSerials(full), revocations.map(hexOf));
  let listed = 0;
  for (let k = 0; k < partitions; k++) {
    const mine = revocations.filter((r) => BigInt("0x" + r.key.toHex()) % 5n === BigInt(k));
    assert.equal(set.countOf(k), mine.length);
    const crl = read(await signCrl(ISSUER, set, k, TIMES, SIGNER));
    assert.deepEqual(listedSerials(crl), mine.map(hexOf), `partition ${k}`);
    const idp = extension(crl, "2.5.29.28")!;
    assert.equal(idp.critical, true);
    const names = (idp.parsedValue as pkijs.IssuingDistributionPoint)
      .distributionPoint as pkijs.GeneralName[];
    assert.deepEqual(names.map((n) => n.value), [`${CRL_URL}/${k}.crl`]);
    listed += mine.length;
  }
  assert.equal(listed, 40);
  // An empty partition's CRL lists nothing and has no revokedCertificates field.
  const sparse = setOf(4, [{ key: Uint8Array.of(0x04), at: THIS_UPDATE, reason: 1 }]);
  assert.equal(sparse.countOf(1), 0);
  assert.equal(
    read(await signCrl(ISSUER, sparse, 1, TIMES, SIGNER)).revokedCertificates,
    undefined,
  );
  // A partition's IDP needs the CRL URL.
  await assert.rejects(signCrl({ ...ISSUER, crlUrl: undefined }, sparse, 0, TIMES, SIGNER));
});

Deno.test("crl: changedSince names the full CRL and the partitions whose entries changed, and nothing when none did", () => {
  const revocations = randomRevocations(30);
  const before = setOf(4, revocations);
  assert.deepEqual(before.changedSince(undefined), ["full", 0, 1, 2, 3]);
  assert.deepEqual(setOf(4, revocations).changedSince(before), []);

  const added: Revocation = { key: Uint8Array.of(0x01, 0x02), at: THIS_UPDATE, reason: 1 };
  const k = 0x0102 % 4;
  assert.deepEqual(setOf(4, [...revocations, added]).changedSince(before), ["full", k]);
  // The same serials with another reason, or another time, are a change of that partition too.
  const withAdded = setOf(4, [...revocations, added]);
  assert.deepEqual(setOf(4, [...revocations, { ...added, reason: 4 }]).changedSince(withAdded), [
    "full",
    k,
  ]);
  assert.deepEqual(
    setOf(4, [...revocations, { ...added, at: THIS_UPDATE + 1000 }]).changedSince(withAdded),
    ["full", k],
  );
  // A removal (a hold released) changes its partition.
  const first = revocations[0];
  const kFirst = Number(BigInt("0x" + first.key.toHex()) % 4n);
  assert.deepEqual(setOf(4, revocations.slice(1)).changedSince(before), ["full", kFirst]);
  // Another partition count: every CRL is new.
  assert.deepEqual(setOf(2, revocations).changedSince(before), ["full", 0, 1]);
  // One partition: the full CRL alone.
  assert.deepEqual(setOf(1, [...revocations, added]).changedSince(setOf(1, revocations)), ["full"]);
  const scopes: CrlScope[] = setOf(1, []).scopes();
  assert.deepEqual(scopes, ["full"]);
});
