/**
 * pkijs (an independent ASN.1/PKI implementation) reads our requests and responses the same way
 * our readers do, and verifies an ECDSA response's signature against the CA.
 */
import assert from "node:assert/strict";
import * as pkijs from "pkijs";
import { formatIndexLine, IndexFileSource, parseOcspRequest, Responder } from "../lib/ocsp/mod.ts";
import { parseCertificate } from "../lib/ocsp/certificate.ts";
import { certIdFor, encodeOcspRequest, serialContent } from "../lib/ocsp/request.ts";
import { opensslCa, withTempDir } from "./support/ocsp.ts";

const hex = (b: ArrayBuffer | Uint8Array) =>
  Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, "0")).join("");

Deno.test("pkijs reads our OCSP request and response as we do, and verifies the signature", () =>
  withTempDir("ocsp-pkijs-", async (dir) => {
    const ca = await opensslCa(dir, "ec-p256");
    const index = `${dir}/index.txt`;
    const exp = Date.UTC(2035, 0, 1), revokedAt = Date.UTC(2026, 1, 3, 4, 5, 6);
    await Deno.writeTextFile(
      index,
      formatIndexLine({ status: "V", expires: exp, serial: "0A", subject: "/CN=a" }) +
        formatIndexLine({
          status: "R",
          expires: exp,
          revokedAt,
          reason: 5,
          serial: "0B",
          subject: "/CN=b",
        }),
    );
    const issuer = parseCertificate(ca.der);
    const nonce = crypto.getRandomValues(new Uint8Array(20));
    const req = encodeOcspRequest({
      certIds: ["0A", "0B", "0C"].map((s, i) =>
        certIdFor(issuer, serialContent(s), i === 1 ? "sha384" : "sha1")
      ),
      nonce,
    });

    const theirsReq = pkijs.OCSPRequest.fromBER(req.slice().buffer);
    const ours = parseOcspRequest(req);
    assert.deepEqual(
      theirsReq.tbsRequest.requestList.map((r) =>
        hex(r.reqCert.serialNumber.valueBlock.valueHexView)
      ),
      ours.certIds.map((c) => hex(c.serial)),
    );
    const pkNonce = theirsReq.tbsRequest.requestExtensions!.find((e) =>
      e.extnID === "1.3.6.1.5.5.7.48.1.2"
    )!;
    assert.equal(hex(pkNonce.extnValue.valueBlock.valueHexView), "0414" + hex(nonce));

    const responder = new Responder({
      source: new IndexFileSource(index),
      issuer: ca.der,
      signer: ca.signer,
    });
    const resp = await responder.answer(req);
    const theirs = pkijs.OCSPResponse.fromBER(resp.slice().buffer);
    assert.equal(theirs.responseStatus.valueBlock.valueDec, 0);
    const basic = pkijs.BasicOCSPResponse.fromBER(
      theirs.responseBytes!.response.valueBlock.valueHexView.slice().buffer,
    );
    const singles = basic.tbsResponseData.responses;
    assert.deepEqual(singles.map((s) => hex(s.certID.serialNumber.valueBlock.valueHexView)), [
      "0a",
      "0b",
      "0c",
    ]);
    assert.deepEqual(singles.map((s) => s.certID.hashAlgorithm.algorithmId), [
      "1.3.14.3.2.26",
      "2.16.840.1.101.3.4.2.2",
      "1.3.14.3.2.26",
    ]);
    // certStatus CHOICE: [0] good, [1] revoked, [2] unknown.
    assert.deepEqual(singles.map((s) => s.certStatus.idBlock.tagNumber), [0, 1, 2]);
    const ext = basic.tbsResponseData.responseExtensions!.find((e) =>
      e.extnID === "1.3.6.1.5.5.7.48.1.2"
    )!;
    assert.equal(hex(ext.extnValue.valueBlock.valueHexView), "0414" + hex(nonce));
    const caCert = pkijs.Certificate.fromBER(ca.der.slice().buffer);
    // The CA signs itself (no certs in the response): hand pkijs the signer, as -verify_other does.
    basic.certs = [caCert];
    assert.equal(await basic.verify({ trustedCerts: [caCert] }), true);
    // A changed digit of producedAt (inside the signed data) fails pkijs's verification.
    const bent = resp.slice();
    const at = bent.findIndex((b, k) => b === 0x18 && bent[k + 1] === 0x0f) + 2 + 13;
    bent[at] = bent[at] === 0x30 ? 0x31 : 0x30;
    const bentBasic = pkijs.BasicOCSPResponse.fromBER(
      pkijs.OCSPResponse.fromBER(bent.buffer).responseBytes!.response.valueBlock.valueHexView
        .slice().buffer,
    );
    bentBasic.certs = [caCert];
    assert.equal(await bentBasic.verify({ trustedCerts: [caCert] }).catch(() => false), false);
  }));
