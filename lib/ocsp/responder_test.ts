import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { opensslCa, type TestCert } from "../../tests/support/ocsp.ts";
import { parseCertificate } from "./certificate.ts";
import { explicit, octetString, oid, sequence } from "../der/mod.ts";
import { concat } from "../bytes/mod.ts";
import { formatIndexLine, type IndexLineFields } from "./index_db.ts";
import { IndexFileSource } from "./index_source.ts";
import {
  CERT_ID_HASHES,
  certIdFor,
  encodeCertId,
  encodeOcspRequest,
  type HashName,
  nonceExtension,
  OCSP_NONCE_OID,
} from "./request.ts";
import {
  INTERNAL_ERROR,
  MALFORMED_REQUEST,
  parseOcspResponse,
  TRY_LATER,
  UNAUTHORIZED,
} from "./response.ts";
import { Responder, type ResponderOptions } from "./responder.ts";
import { createHash } from "node:crypto";

const EXP = Date.UTC(2035, 0, 1);
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);

interface Fixture {
  dir: string;
  ca: TestCert;
  other: TestCert;
  index: string;
  write(lines: IndexLineFields[]): void;
  responder(extra?: Partial<ResponderOptions>): Responder;
  id(serial: number[], hash?: HashName): Uint8Array;
}

async function withFixture(fn: (f: Fixture) => Promise<void>) {
  const dir = moduleTempDir("ocsp-responder-");
  try {
    const ca = await opensslCa(dir, "ec-p256");
    const other = await opensslCa(dir, "ec-p256", "other");
    const index = `${dir}/index.txt`;
    const issuer = parseCertificate(ca.der);
    const f: Fixture = {
      dir,
      ca,
      other,
      index,
      write: (lines) => Deno.writeTextFileSync(index, lines.map(formatIndexLine).join("")),
      responder: (extra = {}) =>
        new Responder({
          source: new IndexFileSource(index),
          issuer: ca.der,
          signer: ca.signer,
          clock: () => T0,
          ...extra,
        }),
      id: (serial, hash = "sha1") => certIdFor(issuer, Uint8Array.from(serial), hash),
    };
    f.write([
      { status: "V", expires: EXP, serial: "01", subject: "/CN=a" },
      {
        status: "R",
        expires: EXP,
        revokedAt: T0 - 86400_000,
        reason: 4,
        serial: "02",
        subject: "/CN=b",
      },
      { status: "E", expires: T0 - 1000, serial: "03", subject: "/CN=c" },
    ]);
    await fn(f);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const statuses = (der: Uint8Array) =>
  parseOcspResponse(der).basic!.singles.map((s) => s.certStatus.status);

Deno.test("responder: unparseable or out-of-rule requests get the 5-byte malformedRequest", () =>
  withFixture(async (f) => {
    const r = f.responder();
    const good = encodeOcspRequest({ certIds: [f.id([1])] });
    const badNonce = (n: Uint8Array) =>
      sequence(sequence(sequence(sequence(f.id([1]))), explicit(2, sequence(nonceExtension(n)))));
    const cases: [string, Uint8Array][] = [
      ["empty body", new Uint8Array(0)],
      ["garbage", new TextEncoder().encode("GET / HTTP/1.1")],
      ["truncated", good.subarray(0, good.length - 1)],
      ["trailing byte", concat([good, Uint8Array.of(0)])],
      [
        "indefinite length",
        concat([Uint8Array.of(0x30, 0x80), good.subarray(2), Uint8Array.of(0, 0)]),
      ],
      ["empty nonce", badNonce(new Uint8Array(0))],
      ["129-byte nonce", badNonce(new Uint8Array(129))],
      [
        "nonce not an OCTET STRING",
        sequence(
          sequence(
            sequence(sequence(f.id([1]))),
            explicit(
              2,
              sequence(sequence(oid(OCSP_NONCE_OID), octetString(Uint8Array.of(2, 1, 5)))),
            ),
          ),
        ),
      ],
      [
        "critical unknown extension",
        sequence(
          sequence(
            sequence(sequence(f.id([1]))),
            explicit(
              2,
              sequence(
                sequence(
                  oid("1.2.3.4"),
                  Uint8Array.of(1, 1, 0xff),
                  octetString(Uint8Array.of(5, 0)),
                ),
              ),
            ),
          ),
        ),
      ],
      ["empty requestList", sequence(sequence(sequence()))],
      [
        "65 single requests",
        encodeOcspRequest({ certIds: Array.from({ length: 65 }, () => f.id([1])) }),
      ],
      ["over 16 KiB", concat([Uint8Array.of(0x30, 0x82, 0x40, 0x01), new Uint8Array(0x4001)])],
      ["sha256 CertID with sha1-length hashes", encodeCertIdRequest("sha256", 20)],
    ];
    for (const [what, body] of cases) {
      assert.deepEqual([...await r.answer(body)], [0x30, 0x03, 0x0a, 0x01, 0x01], what);
    }
    assert.equal(MALFORMED_REQUEST.length, 5);
    assert.equal(
      statuses(await r.answer(badNonce(new Uint8Array(128))))[0],
      "good",
      "128 bytes is allowed",
    );
    assert.equal(
      statuses(await r.answer(badNonce(new Uint8Array(1))))[0],
      "good",
      "1 byte is allowed",
    );
  }));

function encodeCertIdRequest(hash: HashName, length: number): Uint8Array {
  return encodeOcspRequest({
    certIds: [
      encodeCertId({
        hash,
        issuerNameHash: new Uint8Array(length),
        issuerKeyHash: new Uint8Array(length),
        serial: Uint8Array.of(1),
      }),
    ],
  });
}

Deno.test("responder: every CertID answered in order, echoed exactly, under every hash algorithm", () =>
  withFixture(async (f) => {
    const r = f.responder();
    const issuer = parseCertificate(f.ca.der);
    const ids = [
      f.id([2], "sha1"),
      f.id([1], "sha224"),
      f.id([4], "sha256"),
      f.id([3], "sha384"),
      f.id([0x00, 0x80], "sha512"),
      // hash AlgorithmIdentifier without NULL parameters: echoed as sent.
      encodeCertId({
        hash: "sha256",
        issuerNameHash: createHash("sha256").update(issuer.subject).digest(),
        issuerKeyHash: createHash("sha256").update(issuer.publicKey).digest(),
        serial: Uint8Array.of(2),
        nullParameters: false,
      }),
    ];
    const basic = parseOcspResponse(await r.answer(encodeOcspRequest({ certIds: ids }))).basic!;
    assert.deepEqual(basic.singles.map((s) => s.certId), ids);
    assert.deepEqual(basic.singles.map((s) => s.certStatus.status), [
      "revoked",
      "good",
      "unknown",
      "good",
      "unknown",
      "revoked",
    ]);
    assert.deepEqual(basic.singles[0].certStatus, {
      status: "revoked",
      revokedAt: T0 - 86400_000,
      reason: 4,
    });
    for (const s of basic.singles) {
      assert.deepEqual([s.thisUpdate, s.nextUpdate], [T0, T0 + 3600_000]);
    }
    assert.equal(basic.producedAt, T0);
    assert.deepEqual(
      basic.responderKeyHash,
      new Uint8Array(createHash("sha1").update(issuer.publicKey).digest()),
    );
    assert.equal(basic.nonce, null);
    assert.deepEqual(Object.keys(CERT_ID_HASHES), ["sha1", "sha224", "sha256", "sha384", "sha512"]);
  }));

Deno.test("responder: another CA's CertID or an unknown hash → unsigned unauthorized", () =>
  withFixture(async (f) => {
    const r = f.responder();
    const foreign = certIdFor(parseCertificate(f.other.der), Uint8Array.of(1));
    assert.deepEqual(await r.answer(encodeOcspRequest({ certIds: [foreign] })), UNAUTHORIZED);
    assert.deepEqual(
      await r.answer(encodeOcspRequest({ certIds: [f.id([1]), foreign] })),
      UNAUTHORIZED,
    );
    // Our name hash with another key hash (same subject, other key) is not ours either.
    const issuer = parseCertificate(f.ca.der);
    const wrongKey = encodeCertId({
      hash: "sha1",
      issuerNameHash: createHash("sha1").update(issuer.subject).digest(),
      issuerKeyHash: new Uint8Array(20),
      serial: Uint8Array.of(1),
    });
    assert.deepEqual(await r.answer(encodeOcspRequest({ certIds: [wrongKey] })), UNAUTHORIZED);
    const md5Id = sequence(
      sequence(oid("1.2.840.113549.2.5")),
      octetString(new Uint8Array(16)),
      octetString(new Uint8Array(16)),
      Uint8Array.of(2, 1, 1),
    );
    const md5 = encodeOcspRequest({ certIds: [md5Id] });
    assert.deepEqual(await r.answer(md5), UNAUTHORIZED);
    assert.deepEqual([...UNAUTHORIZED], [0x30, 0x03, 0x0a, 0x01, 0x06]);
  }));

Deno.test("responder: database missing or corrupt → tryLater; restored → answers; a revocation shows on the next query", () =>
  withFixture(async (f) => {
    const r = f.responder();
    const req = encodeOcspRequest({ certIds: [f.id([1])] });
    assert.deepEqual(statuses(await r.answer(req)), ["good"]);
    const good = Deno.readTextFileSync(f.index);
    Deno.writeTextFileSync(f.index, good + "V\tbroken\n");
    assert.deepEqual([...await r.answer(req)], [0x30, 0x03, 0x0a, 0x01, 0x03]);
    Deno.removeSync(f.index);
    assert.deepEqual(await r.answer(req), TRY_LATER);
    Deno.writeTextFileSync(f.index, good);
    assert.deepEqual(statuses(await r.answer(req)), ["good"]);
    // Revoke 01 in place, same instant: the cached "good" must not be served.
    Deno.writeTextFileSync(
      f.index,
      good.replace(/^V\t(\d+Z)\t\t01\t/m, `R\t$1\t260101000000Z,keyCompromise\t01\t`),
    );
    assert.deepEqual(parseOcspResponse(await r.answer(req)).basic!.singles[0].certStatus, {
      status: "revoked",
      revokedAt: Date.UTC(2026, 0, 1),
      reason: 1,
    });
  }));

Deno.test("responder: requests without a nonce come from the cache; nonce requests are signed live", () =>
  withFixture(async (f) => {
    let now = T0;
    const r = f.responder({ clock: () => now, validitySeconds: 600, cacheEntries: 2 });
    const a = encodeOcspRequest({ certIds: [f.id([1])] });
    const first = await r.answer(a);
    assert.deepEqual(await r.answer(a), first);
    assert.equal(r.signatures, 1);
    // Concurrent identical requests share one signature.
    const [x, y] = await Promise.all([
      r.answer(encodeOcspRequest({ certIds: [f.id([2])] })),
      r.answer(encodeOcspRequest({ certIds: [f.id([2])] })),
    ]);
    assert.deepEqual(x, y);
    assert.equal(r.signatures, 2);
    // Nonce: signed each time, nonce echoed.
    for (let i = 0; i < 3; i++) {
      const nonce = crypto.getRandomValues(new Uint8Array(16));
      const resp = parseOcspResponse(
        await r.answer(encodeOcspRequest({ certIds: [f.id([1])], nonce })),
      );
      assert.deepEqual(resp.basic!.nonce, nonce);
    }
    assert.equal(r.signatures, 5);
    // Half the validity gone: re-signed with a new thisUpdate.
    now = T0 + 299_000;
    assert.deepEqual(await r.answer(a), first);
    now = T0 + 300_000;
    const later = parseOcspResponse(await r.answer(a)).basic!;
    assert.equal(later.singles[0].thisUpdate, now);
    assert.equal(r.signatures, 6);
    // Bounded: two entries held; a third pushes the oldest out.
    await r.answer(encodeOcspRequest({ certIds: [f.id([3])] }));
    assert.equal(r.signatures, 7);
    await r.answer(encodeOcspRequest({ certIds: [f.id([2])] }));
    assert.equal(r.signatures, 8, "the entry for serial 2 was the oldest and was dropped");
  }));

Deno.test("responder: the cache is keyed by the exact CertID bytes, not by the serial", () =>
  withFixture(async (f) => {
    const r = f.responder();
    const issuer = parseCertificate(f.ca.der);
    const noNull = (hash: HashName) =>
      encodeCertId({
        hash,
        issuerNameHash: createHash(hash).update(issuer.subject).digest(),
        issuerKeyHash: createHash(hash).update(issuer.publicKey).digest(),
        serial: Uint8Array.of(2),
        nullParameters: false,
      });
    // One serial, four spellings of its CertID, asked one after another without a nonce.
    const ids = [f.id([2], "sha1"), f.id([2], "sha256"), noNull("sha1"), noNull("sha256")];
    for (const round of [1, 2]) {
      for (const id of ids) {
        const basic = parseOcspResponse(await r.answer(encodeOcspRequest({ certIds: [id] })))
          .basic!;
        assert.deepEqual(basic.singles.map((s) => s.certId), [id], `round ${round}`);
        assert.equal(basic.singles[0].certStatus.status, "revoked");
      }
    }
    assert.equal(r.signatures, ids.length, "the second round came from the cache");
    // The same CertIDs in another order are another request.
    const pair = parseOcspResponse(
      await r.answer(encodeOcspRequest({ certIds: [ids[1], ids[0]] })),
    );
    assert.deepEqual(pair.basic!.singles.map((s) => s.certId), [ids[1], ids[0]]);
  }));

Deno.test("responder: the cache holds at most cacheBytes of responses, oldest dropped first", () =>
  withFixture(async (f) => {
    const ask = (r: Responder, serial: number) =>
      r.answer(encodeOcspRequest({ certIds: [f.id([serial])] }));
    const probe = f.responder();
    await ask(probe, 1);
    const one = probe.cachedBytes; // one response and its key; ECDSA signatures vary by 1–2 bytes
    assert.ok(one > 100 && one < 1000, `${one}`);
    const r = f.responder({ cacheBytes: Math.floor(2.5 * one) });
    for (const serial of [1, 3, 4]) await ask(r, serial);
    assert.equal(r.signatures, 3);
    assert.ok(r.cachedBytes <= 2.5 * one && r.cachedBytes > 1.5 * one, `${r.cachedBytes}`);
    await ask(r, 4);
    await ask(r, 3);
    assert.equal(r.signatures, 3, "the two newest are still cached");
    await ask(r, 1);
    assert.equal(r.signatures, 4, "the oldest was dropped to stay under the byte bound");
    // A bound smaller than one response keeps nothing and still answers.
    const none = f.responder({ cacheBytes: 10 });
    assert.deepEqual(statuses(await ask(none, 1)), ["good"]);
    assert.deepEqual(statuses(await ask(none, 1)), ["good"]);
    assert.equal([none.signatures, none.cachedBytes].join(), "2,0");
    // A database change empties the cache and its count.
    f.write([{ status: "V", expires: EXP, serial: "01", subject: "/CN=a" }]);
    await ask(r, 1);
    assert.ok(r.cachedBytes <= one + 2, `${r.cachedBytes}`);
  }));

Deno.test("responder: a failing signer → unsigned internalError, and the failure is not cached", () =>
  withFixture(async (f) => {
    let fail = true;
    const errors: unknown[] = [];
    const r = f.responder({
      signer: {
        keyType: "ec-p256",
        sign: (m) => fail ? Promise.reject(new Error("token gone")) : f.ca.signer.sign(m),
      },
      onSignError: (e) => errors.push(e),
    });
    const req = encodeOcspRequest({ certIds: [f.id([1])] });
    assert.deepEqual([...await r.answer(req)], [0x30, 0x03, 0x0a, 0x01, 0x02]);
    assert.deepEqual(await r.answer(req), INTERNAL_ERROR);
    assert.equal(errors.length, 2);
    fail = false;
    assert.deepEqual(statuses(await r.answer(req)), ["good"]);
  }));

Deno.test("responder: refuses a responder certificate from another CA or a signer of another key type", () =>
  withFixture((f) => {
    assert.throws(() => f.responder({ responderCertificate: f.other.der }), /not issued by the CA/);
    assert.throws(
      () => f.responder({ signer: { keyType: "ed25519", sign: () => new Uint8Array(64) } }),
      /not a ed25519 key/,
    );
    assert.throws(() => f.responder({ validitySeconds: 0 }), /validity/);
    return Promise.resolve();
  }));

Deno.test("responder: the observer is told each answer's status, each CertID's status and each cache lookup", () =>
  withFixture(async (f) => {
    const told: string[] = [];
    const loads: boolean[] = [];
    let fail = false;
    const r = f.responder({
      source: new IndexFileSource(f.index, { onLoad: (ok) => loads.push(ok) }),
      signer: {
        keyType: "ec-p256",
        sign: (m) => fail ? Promise.reject(new Error("token gone")) : f.ca.signer.sign(m),
      },
      observer: {
        answered: (status, certs) => told.push(`${status}:${certs.join(",")}`),
        cacheLookup: (hit) => told.push(hit ? "hit" : "miss"),
      },
    });
    const three = encodeOcspRequest({ certIds: [f.id([1]), f.id([2]), f.id([9])] });
    await r.answer(three);
    await r.answer(three);
    await r.answer(encodeOcspRequest({ certIds: [f.id([3])], nonce: Uint8Array.of(1, 2) }));
    await r.answer(Uint8Array.of(0x30, 0x00));
    await r.answer(
      encodeOcspRequest({
        certIds: [certIdFor(parseCertificate(f.other.der), Uint8Array.of(1), "sha1")],
      }),
    );
    fail = true;
    await r.answer(encodeOcspRequest({ certIds: [f.id([3])] }));
    const good = Deno.readTextFileSync(f.index);
    Deno.writeTextFileSync(f.index, good + "V\tbroken\n");
    await r.answer(three);
    assert.deepEqual(told, [
      "miss",
      "successful:good,revoked,unknown",
      "hit",
      "successful:good,revoked,unknown",
      "successful:good",
      "malformed_request:",
      "unauthorized:",
      "miss",
      "internal_error:",
      "try_later:",
    ]);
    // The first read loaded; the broken rewrite did not.
    assert.deepEqual(loads, [true, false]);
  }));
