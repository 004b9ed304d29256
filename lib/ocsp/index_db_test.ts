import assert from "node:assert/strict";
import { formatIndexLine, IndexFormatError, parseIndex, parseIndexLine } from "./index_db.ts";

const EXP = Date.UTC(2035, 5, 30, 12, 0, 0);
const REV = Date.UTC(2026, 0, 2, 3, 4, 5);

Deno.test("index line: formatted as openssl ca writes it and parsed back", () => {
  const v = formatIndexLine({ status: "V", expires: EXP, serial: "0a1b", subject: "/C=DE/CN=a" });
  assert.equal(v, "V\t350630120000Z\t\t0A1B\tunknown\t/C=DE/CN=a\n");
  const r = formatIndexLine({
    status: "R",
    expires: EXP,
    revokedAt: REV,
    reason: 1,
    serial: "FF",
    subject: "/CN=b",
  });
  assert.equal(r, "R\t350630120000Z\t260102030405Z,keyCompromise\tFF\tunknown\t/CN=b\n");
  const [ev, er] = parseIndex(v + r);
  assert.deepEqual([ev.status, ev.expires, ev.serial, ev.line], ["V", EXP, "0A1B", 1]);
  assert.deepEqual([er.status, er.revokedAt, er.reason, er.subject], ["R", REV, 1, "/CN=b"]);
  const far = formatIndexLine({
    status: "E",
    expires: Date.UTC(2051, 0, 1),
    serial: "1",
    subject: "/CN=c",
  });
  assert.equal(far.split("\t")[1], "20510101000000Z");
  assert.equal(parseIndex(far)[0].expires, Date.UTC(2051, 0, 1));
  assert.throws(
    () => formatIndexLine({ status: "V", expires: EXP, serial: "1", subject: "/CN=a\tb" }),
    /TAB/,
  );
});

Deno.test("index reasons: OpenSSL's names without case, with their arguments", () => {
  const line = (rev: string) => `R\t350630120000Z\t${rev}\t01\tunknown\t/CN=x`;
  assert.equal(parseIndexLine(line("260102030405Z"), 1).reason, undefined);
  assert.equal(parseIndexLine(line("260102030405Z,cacompromise"), 1).reason, 2);
  assert.equal(parseIndexLine(line("260102030405Z,removeFromCRL"), 1).reason, 8);
  assert.equal(
    parseIndexLine(line("260102030405Z,holdInstruction,1.2.840.10040.2.2"), 1).reason,
    6,
  );
  // What `openssl ca -revoke X -crl_hold holdInstructionReject` writes: the name as given.
  for (
    const hold of ["holdInstructionReject", "holdInstructionNone", "Hold Instruction Call Issuer"]
  ) {
    assert.equal(parseIndexLine(line(`260102030405Z,holdInstruction,${hold}`), 1).reason, 6);
  }
  for (const garbage of ["holdinstructionreject", "sha256", "1.", "", "1.2.840.x"]) {
    assert.throws(
      () => parseIndexLine(line(`260102030405Z,holdInstruction,${garbage}`), 1),
      /line 1: holdInstruction needs a dotted OID or holdInstructionNone/,
      garbage,
    );
  }
  assert.equal(parseIndexLine(line("260102030405Z,keyTime,20251231000000Z"), 1).reason, 1);
  assert.equal(parseIndexLine(line("260102030405Z,CAkeyTime,20251231000000Z"), 1).reason, 2);
});

Deno.test("index reasons: only ASCII letters fold, as openssl's strcasecmp folds them", () => {
  const line = (rev: string) => `R\t350630120000Z\t${rev}\t01\tunknown\t/CN=x`;
  assert.equal(parseIndexLine(line("260102030405Z,KEYCOMPROMISE"), 1).reason, 1);
  // U+212A KELVIN SIGN lower-cases to "k" in JavaScript, but is no letter K for openssl.
  for (const name of ["\u212AeyCompromise", "CA\u212AeyTime,20251231000000Z", "supersed\u00e9"]) {
    assert.throws(
      () => parseIndex(`${line(`260102030405Z,${name}`)}\n`),
      /line 1: unknown revocation reason/,
      name,
    );
  }
});

Deno.test("index parse: every fault names its line", () => {
  const good = "V\t350630120000Z\t\t01\tunknown\t/CN=a\n";
  const cases: [string, RegExp][] = [
    ["V\t350630120000Z\t\t01\tunknown\n", /line 2: expected 6 TAB-separated fields, found 5/],
    ["X\t350630120000Z\t\t02\tunknown\t/CN=b\n", /line 2: status must be V, R or E/],
    ["V\t350631120000Z\t\t02\tunknown\t/CN=b\n", /line 2: expiry 350631120000Z is not a real time/],
    ["V\t3506301200Z\t\t02\tunknown\t/CN=b\n", /line 2: expiry must be a time/],
    ["V\t350630120000Z\t\t0a\tunknown\t/CN=b\n", /line 2: serial must be upper-case hex/],
    ["V\t350630120000Z\t\t0001\tunknown\t/CN=b\n", /line 2: serial 0001 is already on line 1/],
    [
      "V\t350630120000Z\t260102030405Z\t02\tunknown\t/CN=b\n",
      /line 2: status V with a revocation field/,
    ],
    ["R\t350630120000Z\t\t02\tunknown\t/CN=b\n", /line 2: revocation time must be a time/],
    [
      "R\t350630120000Z\t20260102030405Z\t02\tunknown\t/CN=b\n",
      /line 2: revocation time must be a time/,
    ],
    [
      "R\t350630120000Z\t260102030405Z,stolen\t02\tunknown\t/CN=b\n",
      /line 2: unknown revocation reason "stolen"/,
    ],
    [
      "R\t350630120000Z\t260102030405Z,superseded,x\t02\tunknown\t/CN=b\n",
      /line 2: reason superseded takes no argument/,
    ],
    [
      "R\t350630120000Z\t260102030405Z,keyTime\t02\tunknown\t/CN=b\n",
      /line 2: reason keyTime needs one argument/,
    ],
    ["\n", /line 2: expected 6 TAB-separated fields, found 1/],
    ["V\t350630120000Z\t\t02\tunknown\t/CN=b", /line 2: the last line has no newline/],
  ];
  for (const [second, message] of cases) {
    assert.throws(
      () => parseIndex(good + second),
      (e: unknown) => e instanceof IndexFormatError && message.test(e.message),
      second,
    );
  }
  assert.equal(parseIndex("# comment\n" + good).length, 1);
  assert.equal(parseIndex("").length, 0);
});
