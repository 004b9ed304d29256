/**
 * Differential test against `openssl ocsp -index`: the same index.txt and the same requests
 * (openssl's own, single and multi-certificate, with and without nonce, SHA-1 and SHA-256 CertIDs)
 * answered by both; statuses, serials, revocation times and reasons must agree (signatures and
 * times aside). Also: `openssl ca -revoke` on the file is seen on the next query.
 *
 * One known difference, asserted: for an E (expired) line openssl adds no SingleResponse at all
 * (its responder handles only V and R), so its answer has fewer entries than the request; ours
 * answers every CertID and says good (expiry is not revocation).
 */
import assert from "node:assert/strict";
import { IndexFileSource, parseOcspResponse, Responder } from "../lib/ocsp/mod.ts";
import { runCommand } from "./support/command.ts";
import { opensslCa, type TestCert, withTempDir } from "./support/ocsp.ts";

const INDEX_LINES = [
  "V\t350101000000Z\t\t1001\tunknown\t/CN=valid",
  "R\t350101000000Z\t260102030405Z\t1002\tunknown\t/CN=revoked, no reason",
  "R\t350101000000Z\t260102030406Z,unspecified\t1003\tunknown\t/CN=r0",
  "R\t350101000000Z\t250102030407Z,keyCompromise\t1004\tunknown\t/CN=r1",
  "R\t350101000000Z\t240102030408Z,CACompromise\t1005\tunknown\t/CN=r2",
  "R\t350101000000Z\t230102030409Z,affiliationChanged\t1006\tunknown\t/CN=r3",
  "R\t350101000000Z\t991231235959Z,superseded\t1007\tunknown\t/CN=r4",
  "R\t350101000000Z\t000101000000Z,cessationOfOperation\t1008\tunknown\t/CN=r5",
  "R\t350101000000Z\t260102030410Z,certificateHold\t1009\tunknown\t/CN=r6",
  "R\t350101000000Z\t260102030411Z,removeFromCRL\t100A\tunknown\t/CN=r8",
  "R\t350101000000Z\t260102030412Z,holdInstruction,1.2.840.10040.2.2\t100B\tunknown\t/CN=hold",
  "R\t350101000000Z\t260102030413Z,keyTime,20251231000000Z\t100C\tunknown\t/CN=keytime",
  "R\t350101000000Z\t260102030414Z,CAkeyTime,20251231000000Z\t100D\tunknown\t/CN=cakeytime",
  "V\t20550101000000Z\t\t00F1E2D3C4B5A6978877665544332211\tunknown\t/CN=long serial, far expiry",
  "E\t250101000000Z\t\t100E\tunknown\t/CN=expired",
];
const SERIALS = [
  "0x1001",
  "0x1002",
  "0x1003",
  "0x1004",
  "0x1005",
  "0x1006",
  "0x1007",
  "0x1008",
  "0x1009",
  "0x100A",
  "0x100B",
  "0x100C",
  "0x100D",
  "0xF1E2D3C4B5A6978877665544332211",
  "0x2000",
]; // deno-fmt-ignore
const EXPIRED = "0x100E";

const withDir = (fn: (dir: string) => Promise<void> | void) => withTempDir("ocsp-diff-", fn);

type Row = [certId: string, status: string, revokedAt: number | null, reason: number | null];

function rows(der: Uint8Array): { rows: Row[]; nonce: string | null } {
  const basic = parseOcspResponse(der).basic!;
  const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return {
    nonce: basic.nonce ? hex(basic.nonce) : null,
    rows: basic.singles.map((s) => [
      hex(s.certId),
      s.certStatus.status,
      s.certStatus.status === "revoked" ? s.certStatus.revokedAt : null,
      s.certStatus.status === "revoked" ? s.certStatus.reason ?? null : null,
    ]),
  };
}

async function makeRequest(
  dir: string,
  ca: TestCert,
  serials: string[],
  extra: string[],
  name: string,
) {
  const path = `${dir}/${name}.req`;
  const r = await runCommand("openssl", [
    "ocsp",
    "-issuer",
    ca.certPath,
    ...extra,
    ...serials.flatMap((s) => ["-serial", s]),
    "-reqout",
    path,
  ]);
  assert.equal(r.code, 0, r.text);
  return path;
}

async function opensslAnswer(
  ca: TestCert,
  index: string,
  reqPath: string,
): Promise<Uint8Array> {
  const out = `${reqPath}.openssl.resp`;
  const r = await runCommand("openssl", [
    "ocsp",
    "-index",
    index,
    "-CA",
    ca.certPath,
    "-rsigner",
    ca.certPath,
    "-rkey",
    ca.keyPath!,
    "-reqin",
    reqPath,
    "-respout",
    out,
    "-ndays",
    "1",
  ]);
  assert.equal(r.code, 0, r.text);
  return await Deno.readFile(out);
}

Deno.test("differential: same statuses, serials, revocation times and reasons as openssl ocsp -index", () =>
  withDir(async (dir) => {
    const ca = await opensslCa(dir, "ec-p256");
    const index = `${dir}/index.txt`;
    await Deno.writeTextFile(index, INDEX_LINES.join("\n") + "\n");
    const responder = new Responder({
      source: new IndexFileSource(index),
      issuer: ca.der,
      signer: ca.signer,
    });
    const requests: [string, string[], string[]][] = [
      ...SERIALS.map((s, i): [string, string[], string[]] => [`single${i}`, [s], []]),
      ["multi-nonce", SERIALS, []],
      ["multi-no-nonce", SERIALS, ["-no_nonce"]],
      ["multi-sha256", SERIALS.slice(0, 6), ["-sha256", "-no_nonce"]],
      ["multi-sha512-nonce", SERIALS.slice(5), ["-sha512"]],
    ];
    let compared = 0;
    for (const [name, serials, extra] of requests) {
      const reqPath = await makeRequest(dir, ca, serials, extra, name);
      const ours = rows(await responder.answer(await Deno.readFile(reqPath)));
      const theirs = rows(await opensslAnswer(ca, index, reqPath));
      assert.deepEqual(ours, theirs, name);
      assert.equal(ours.rows.length, serials.length, name);
      assert.equal(ours.nonce !== null, !extra.includes("-no_nonce"), name);
      compared += ours.rows.length;
    }
    assert.ok(compared > 50);
    // The revoked lines came through with their reasons: keyTime → keyCompromise (1), etc.
    const all = rows(await responder.answer(await Deno.readFile(`${dir}/multi-no-nonce.req`))).rows;
    assert.deepEqual(all.map((r) => r[3]), [
      null,
      null,
      0,
      1,
      2,
      3,
      4,
      5,
      6,
      8,
      6,
      1,
      2,
      null,
      null,
    ]);
    assert.deepEqual(all.map((r) => r[1]).slice(-2), ["good", "unknown"]);

    // The E line: openssl leaves it out; we answer good.
    const reqPath = await makeRequest(dir, ca, ["0x1001", EXPIRED], ["-no_nonce"], "expired");
    const ours = rows(await responder.answer(await Deno.readFile(reqPath))).rows;
    const theirs = rows(await opensslAnswer(ca, index, reqPath)).rows;
    assert.deepEqual(ours.map((r) => r[1]), ["good", "good"]);
    assert.deepEqual(theirs, ours.slice(0, 1));
  }));

Deno.test("differential: `openssl ca -revoke` on the index is seen on the next query, as openssl sees it", () =>
  withDir(async (dir) => {
    const ca = await opensslCa(dir, "ec-p256");
    await Deno.mkdir(`${dir}/certs`);
    await Deno.writeTextFile(`${dir}/index.txt`, "");
    await Deno.writeTextFile(`${dir}/serial`, "A001\n");
    await Deno.writeTextFile(
      `${dir}/ca.cnf`,
      `[ca]\ndefault_ca = d\n[d]\ndatabase = ${dir}/index.txt\nnew_certs_dir = ${dir}/certs\n` +
        `certificate = ${ca.certPath}\nprivate_key = ${ca.keyPath}\nserial = ${dir}/serial\n` +
        `default_md = sha256\ndefault_days = 30\npolicy = p\nunique_subject = no\n[p]\ncommonName = supplied\n`,
    );
    const openssl = async (args: string[]) => {
      const r = await runCommand("openssl", args);
      assert.equal(r.code, 0, r.text);
    };
    await openssl([
      "req",
      "-new",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      `${dir}/leaf.key`,
      "-subj",
      "/CN=leaf",
      "-out",
      `${dir}/leaf.csr`,
    ]);
    const issue = (out: string) =>
      openssl(["ca", "-batch", "-config", `${dir}/ca.cnf`, "-in", `${dir}/leaf.csr`, "-out", out]);
    const revoke = (pem: string, ...how: string[]) =>
      openssl(["ca", "-config", `${dir}/ca.cnf`, "-revoke", pem, ...how]);
    await issue(`${dir}/leaf.pem`);
    const responder = new Responder({
      source: new IndexFileSource(`${dir}/index.txt`),
      issuer: ca.der,
      signer: ca.signer,
    });
    const reqPath = await makeRequest(dir, ca, ["0xA001"], ["-no_nonce"], "leaf");
    const req = await Deno.readFile(reqPath);
    assert.equal(rows(await responder.answer(req)).rows[0][1], "good");
    await revoke(`${dir}/leaf.pem`, "-crl_reason", "keyCompromise");
    const after = rows(await responder.answer(req));
    assert.equal(after.rows[0][1], "revoked");
    assert.equal(after.rows[0][3], 1);
    assert.deepEqual(after, rows(await opensslAnswer(ca, `${dir}/index.txt`, reqPath)));

    // A hold, in the form openssl-ca(1) documents: the line ends `,holdInstruction,holdInstructionReject`.
    await issue(`${dir}/held.pem`);
    await revoke(`${dir}/held.pem`, "-crl_hold", "holdInstructionReject");
    assert.match(
      await Deno.readTextFile(`${dir}/index.txt`),
      /,holdInstruction,holdInstructionReject\tA002\t/,
    );
    const bothPath = await makeRequest(dir, ca, ["0xA001", "0xA002"], ["-no_nonce"], "both");
    const held = rows(await responder.answer(await Deno.readFile(bothPath)));
    assert.deepEqual(held.rows.map((r) => [r[1], r[3]]), [["revoked", 1], ["revoked", 6]]);
    assert.deepEqual(held, rows(await opensslAnswer(ca, `${dir}/index.txt`, bothPath)));
  }));

Deno.test("differential: hand-written serials (`A`, `00AB`, `00`) match as openssl matches them", () =>
  withDir(async (dir) => {
    // openssl's index compares serials with their leading '0' characters skipped (apps.c
    // index_serial_cmp), against BN_bn2hex of the asked serial: `A` and `0A`, `00AB` and `AB` are
    // one serial to it. svcd canonicalises the same way, so both answer alike.
    const ca = await opensslCa(dir, "ec-p256");
    const index = `${dir}/index.txt`;
    await Deno.writeTextFile(
      index,
      [
        "V\t350101000000Z\t\tA\tunknown\t/CN=unpadded",
        "R\t350101000000Z\t260102030405Z,superseded\t00AB\tunknown\t/CN=zeros",
        "V\t350101000000Z\t\t00\tunknown\t/CN=zero",
        "V\t350101000000Z\t\t000C0D\tunknown\t/CN=odd",
      ].join("\n") + "\n",
    );
    const responder = new Responder({
      source: new IndexFileSource(index),
      issuer: ca.der,
      signer: ca.signer,
    });
    const serials = ["0xA", "0x0A", "0xAB", "0x0", "0xC0D", "0xB", "0xA0"];
    const reqPath = await makeRequest(dir, ca, serials, ["-no_nonce"], "serials");
    const ours = rows(await responder.answer(await Deno.readFile(reqPath)));
    assert.deepEqual(ours.rows.map((r) => r[1]), [
      "good",
      "good",
      "revoked",
      "good",
      "good",
      "unknown",
      "unknown",
    ]);
    assert.deepEqual(ours, rows(await opensslAnswer(ca, index, reqPath)));
  }));
