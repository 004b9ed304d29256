import assert from "node:assert/strict";
import * as pkijs from "pkijs";
import {
  authorityInfoAccess,
  checkUrl,
  crlDistributionPoints,
  crlFileName,
  crlFileNames,
  distributionPointUrl,
  issuingDistributionPoint,
  missingUrls,
  partitionOf,
  UrlError,
} from "./urls.ts";

/** The unsigned big-endian bytes of a serial, as index.txt's hex gives them. */
function serialBytes(serial: bigint): Uint8Array {
  let hex = serial.toString(16);
  if (hex.length % 2) hex = "0" + hex;
  return Uint8Array.fromHex(hex);
}

/** The URIs of a DER GeneralNames list as pkijs reads it. */
function uris(names: pkijs.GeneralName[]): string[] {
  return names.map((n) => {
    assert.equal(n.type, 6, "uniformResourceIdentifier");
    return n.value as string;
  });
}

function buffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.slice().buffer;
}

Deno.test("urls: checkUrl keeps an http(s) URL without its trailing '/' and refuses every other form, naming the option", () => {
  assert.equal(checkUrl("http://pki.example.org/crl/", "--crl-url"), "http://pki.example.org/crl");
  assert.equal(
    checkUrl("https://pki.example.org:8443/ocsp", "--ocsp-url"),
    "https://pki.example.org:8443/ocsp",
  );
  for (
    const bad of [
      "ftp://pki.example.org/crl",
      "pki.example.org/crl",
      "http://pki.example.org/crl?x=1",
      "http://pki.example.org/crl#top",
      "http://pki.example.org/crl dir",
      "http://pkï.example.org/crl",
      "",
    ]
  ) {
    assert.throws(
      () => checkUrl(bad, "--crl-url"),
      (err) => err instanceof UrlError && err.message.startsWith("--crl-url "),
      bad,
    );
  }
});

Deno.test("urls: a serial's partition is the same from its number and from its bytes, and in range", () => {
  const serials = [0n, 1n, 0xffn, 0x100n, 0x4a1bn, 2n ** 127n + 12345n, 2n ** 159n - 1n];
  for (let i = 0; i < 200; i++) {
    serials.push(BigInt("0x" + crypto.getRandomValues(new Uint8Array(16)).toHex()));
  }
  for (const n of [1, 2, 3, 16, 17, 1024]) {
    for (const serial of serials) {
      const k = partitionOf(serial, n);
      assert.equal(k, Number(serial % BigInt(n)), `${serial} mod ${n}`);
      assert.equal(partitionOf(serialBytes(serial), n), k, `bytes of ${serial} mod ${n}`);
      // Leading zero bytes (a DER INTEGER's sign byte) change nothing.
      assert.equal(partitionOf(Uint8Array.of(0, ...serialBytes(serial)), n), k);
    }
  }
  assert.equal(partitionOf(0x4a1bn, 0), 0);
});

Deno.test("urls: a certificate's distribution point is its partition's file under the CRL URL, or full.crl with one partition", () => {
  assert.equal(distributionPointUrl({}, 5n), undefined);
  assert.equal(distributionPointUrl({ ocsp: "http://x/ocsp" }, 5n), undefined);
  const one = { crl: "http://pki.example.org/crl" };
  assert.equal(distributionPointUrl(one, 5n), "http://pki.example.org/crl/full.crl");
  assert.equal(
    distributionPointUrl({ ...one, crlPartitions: 1 }, 5n),
    "http://pki.example.org/crl/full.crl",
  );
  const sixteen = { ...one, crlPartitions: 16 };
  for (const [serial, k] of [[0x4a1bn, 11], [0x10n, 0], [0x1fn, 15]] as const) {
    assert.equal(distributionPointUrl(sixteen, serial), `http://pki.example.org/crl/${k}.crl`);
  }
  assert.deepEqual(crlFileNames(1), ["full.crl"]);
  assert.deepEqual(crlFileNames(3), ["full.crl", "0.crl", "1.crl", "2.crl"]);
  assert.equal(crlFileName("full"), "full.crl");
  assert.equal(crlFileName(7), "7.crl");
});

Deno.test("urls: AIA, CDP and IDP as pkijs reads them: the URLs given, the criticality RFC 5280 asks", () => {
  const both = authorityInfoAccess({
    ocsp: "http://pki.example.org/ocsp",
    caIssuers: "http://pki.example.org/certificates",
  })!;
  assert.equal(both.oid, "1.3.6.1.5.5.7.1.1");
  assert.equal(both.critical, false);
  const aia = pkijs.InfoAccess.fromBER(buffer(both.value));
  assert.deepEqual(
    aia.accessDescriptions.map((d) => [d.accessMethod, uris([d.accessLocation])[0]]),
    [
      ["1.3.6.1.5.5.7.48.1", "http://pki.example.org/ocsp"],
      ["1.3.6.1.5.5.7.48.2", "http://pki.example.org/certificates"],
    ],
  );
  const ocspOnly = pkijs.InfoAccess.fromBER(
    buffer(authorityInfoAccess({ ocsp: "http://pki.example.org/ocsp" })!.value),
  );
  assert.equal(ocspOnly.accessDescriptions.length, 1);
  assert.equal(authorityInfoAccess({ crl: "http://pki.example.org/crl" }), undefined);

  const cdp = crlDistributionPoints("http://pki.example.org/crl/3.crl");
  assert.equal(cdp.oid, "2.5.29.31");
  assert.equal(cdp.critical, false);
  const points = pkijs.CRLDistributionPoints.fromBER(buffer(cdp.value)).distributionPoints;
  assert.equal(points.length, 1);
  assert.deepEqual(uris(points[0].distributionPoint as pkijs.GeneralName[]), [
    "http://pki.example.org/crl/3.crl",
  ]);
  assert.equal(points[0].reasons, undefined);
  assert.equal(points[0].cRLIssuer, undefined);

  const idp = issuingDistributionPoint("http://pki.example.org/crl/3.crl");
  assert.equal(idp.oid, "2.5.29.28");
  assert.equal(idp.critical, true);
  const read = pkijs.IssuingDistributionPoint.fromBER(buffer(idp.value));
  assert.deepEqual(uris(read.distributionPoint as pkijs.GeneralName[]), [
    "http://pki.example.org/crl/3.crl",
  ]);
  // A partition CRL covers every kind of certificate of its partition: no "only" flag is set.
  assert.equal(read.onlyContainsUserCerts ?? false, false);
  assert.equal(read.onlyContainsCACerts ?? false, false);
  assert.equal(read.indirectCRL ?? false, false);
});

Deno.test("urls: missingUrls names each URL not recorded, with its option", () => {
  assert.deepEqual(missingUrls({}), [
    "the OCSP URL (--ocsp-url)",
    "the CRL URL (--crl-url)",
    "the CA issuers URL (--ca-issuers-url)",
  ]);
  assert.deepEqual(
    missingUrls({
      ocsp: "http://x/ocsp",
      crl: "http://x/crl",
      caIssuers: "http://x/certificates",
    }),
    [],
  );
  assert.deepEqual(missingUrls({ crl: "http://x/crl" }), [
    "the OCSP URL (--ocsp-url)",
    "the CA issuers URL (--ca-issuers-url)",
  ]);
});
