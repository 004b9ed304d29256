import assert from "node:assert/strict";
import { Policy, PolicyError } from "./policy.ts";
import { latin1 } from "../bytes/mod.ts";
import { MAX_POLICY_ERRORS } from "./parse.ts";

const enc = (s: string) => new TextEncoder().encode(s);
const bytes = (...b: number[]) => new Uint8Array(b);
const parse = (s: string) => Policy.parse(enc(s), "/etc/svcd/policy");
const parseError = (s: string | Uint8Array): PolicyError => {
  try {
    Policy.parse(typeof s === "string" ? enc(s) : s, "/etc/svcd/policy");
  } catch (e) {
    assert.ok(e instanceof PolicyError, `expected PolicyError, got ${e}`);
    return e;
  }
  assert.fail("expected the policy to be refused");
};
const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";

Deno.test("a grant allows exactly its subject and label", () => {
  const p = parse(`${ALICE}\tsign-a\n${BOB}\tsign-b\n`);
  assert.equal(p.allows(ALICE, "sign-a"), true);
  assert.equal(p.allows(ALICE, "sign-b"), false);
  assert.equal(p.allows(BOB, "sign-b"), true);
  assert.equal(p.allows("CN=carol", "sign-a"), false);
  assert.equal(p.size, 2);
  assert.deepEqual(p.warnings, []);
});

Deno.test("comparison is byte for byte: case, spaces and prefixes matter", () => {
  const p = parse(`${ALICE}\tsign-a\n`);
  assert.equal(p.allows(ALICE.toLowerCase(), "sign-a"), false);
  assert.equal(p.allows("CN=alice, O=Example, C=DE", "sign-a"), false);
  assert.equal(p.allows(ALICE + ",OU=x", "sign-a"), false);
  assert.equal(p.allows(ALICE, "SIGN-A"), false);
  assert.equal(p.allows(ALICE, "sign-"), false);
});

Deno.test("a UTF-8 subject matches the same bytes handed over as a latin1 string", () => {
  const subject = "CN=Jürgen Müller,O=Bäckerei,C=DE";
  const p = parse(`${subject}\tkey\n`);
  const asHeader = latin1(enc(subject)); // what the HTTP layer hands over
  assert.equal(p.allows(asHeader, "key"), true);
  assert.equal(p.allows(subject, "key"), false, "a decoded UTF-16 string is not the wire bytes");
  assert.deepEqual(p.warnings, []);
});

Deno.test("bytes 0x80-0x9f survive decoding (latin1, not windows-1252)", () => {
  const p = Policy.parse(bytes(0x43, 0x4e, 0x3d, 0x80, 0x09, 0x6b, 0x0a));
  assert.equal(p.allows("CN=\x80", "k"), true);
});

Deno.test("labelsFor lists a subject's labels in file order, empty for strangers", () => {
  const p = parse(`${ALICE}\tb\n${BOB}\tx\n${ALICE}\ta\n`);
  assert.deepEqual(p.labelsFor(ALICE), ["b", "a"]);
  assert.deepEqual(p.labelsFor("CN=nobody"), []);
  p.labelsFor(ALICE).push("c");
  assert.equal(p.allows(ALICE, "c"), false, "the returned list is a copy");
});

Deno.test("comments and blank lines are ignored, including indented ones", () => {
  const p = parse(`# header\n\n   \n  # indented comment\n\t\n${ALICE}\tk\n`);
  assert.equal(p.size, 1);
  assert.equal(p.allows("# header", ""), false);
});

Deno.test("CRLF line endings are accepted", () => {
  const p = parse(`# c\r\n${ALICE}\tk1\r\n${BOB}\tk2\r\n`);
  assert.equal(p.allows(ALICE, "k1"), true);
  assert.equal(p.allows(BOB, "k2"), true);
  assert.equal(p.allows(BOB, "k2\r"), false);
});

Deno.test("a last line without a newline is a grant", () => {
  assert.equal(parse(`${ALICE}\tk`).allows(ALICE, "k"), true);
});

Deno.test("whitespace at the line ends and around the TAB is dropped", () => {
  const p = parse(`  ${ALICE} \t  k1  \t \n${BOB}\tmy key \n`);
  assert.equal(p.allows(ALICE, "k1"), true);
  assert.equal(p.allows(BOB, "my key"), true, "inner spaces of a label stay");
});

Deno.test("several TABs in a row are one separator (aligned columns)", () => {
  const p = parse(`${ALICE}\t\t\tk1\n`);
  assert.equal(p.allows(ALICE, "k1"), true);
});

Deno.test("a line without a TAB is refused with file and line; spaces get a hint", () => {
  const e = parseError(`# ok\n${ALICE}\tk\nCN=bob  key\n`);
  assert.equal(e.line, 3);
  assert.match(e.message, /^\/etc\/svcd\/policy line 3: no TAB .*not spaces/);
  assert.match(parseError("CN=bob\n").message, /line 1: no TAB between subject and label/);
});

Deno.test("a third TAB-separated field is refused", () => {
  const e = parseError(`${ALICE}\tk1\tk2\n`);
  assert.equal(e.line, 1);
  assert.match(e.message, /3 TAB-separated fields/);
  assert.match(parseError(`${ALICE}\t \tk2\n`).message, /3 TAB-separated fields/);
});

Deno.test("an empty subject or label is refused", () => {
  assert.match(parseError("\tk1\n").message, /line 1: empty subject/);
  assert.match(parseError("  \tk1\n").message, /line 1: empty subject/);
  assert.match(parseError(`${ALICE}\t\n`).message, /line 1: empty label/);
  assert.match(parseError(`${ALICE}\t   \r\n`).message, /line 1: empty label/);
});

Deno.test("NUL and control bytes are refused, naming the byte", () => {
  const nul = parseError(bytes(...enc("CN=a"), 0, ...enc("\tk\n")));
  assert.match(nul.message, /line 1: byte 0x00 \(NUL\) at column 5.*binary or UTF-16/);
  assert.match(parseError(`${ALICE}\tk\x01\n`).message, /byte 0x01 \(control\)/);
  assert.match(parseError(`${ALICE}\tk\x7f\n`).message, /byte 0x7f \(DEL\)/);
  assert.match(parseError(`${ALICE}\rCN=b\tk\n`).message, /byte 0x0d \(CR\).*line endings/);
});

Deno.test("a UTF-16 file is refused, not read as garbage grants", () => {
  const text = `${ALICE}\tk\n`;
  const utf16 = new Uint8Array(text.length * 2);
  for (let i = 0; i < text.length; i++) utf16[i * 2] = text.charCodeAt(i);
  assert.match(parseError(utf16).message, /NUL/);
});

Deno.test("every bad line is reported, the first one in .line", () => {
  const e = parseError(`a\nb\n${ALICE}\tk\nc\nd\ne\nf\ng\n`);
  assert.equal(e.line, 1);
  assert.deepEqual(e.problems.map((p) => p.line), [1, 2, 4, 5, 6, 7, 8]);
  assert.match(e.message, /and 2 more bad lines/);
});

Deno.test("a file of bad lines keeps the first MAX_POLICY_ERRORS of them and counts the rest", () => {
  const e = parseError("no tab here\n".repeat(MAX_POLICY_ERRORS + 150));
  assert.equal(e.problems.length, MAX_POLICY_ERRORS);
  assert.equal(e.problemsLeftOut, 150);
  assert.deepEqual(e.problems.at(-1)!.line, MAX_POLICY_ERRORS);
  assert.match(e.message, new RegExp(`and ${MAX_POLICY_ERRORS + 150 - 5} more bad lines`));
});

Deno.test("invalid UTF-8 is allowed byte for byte, with a warning", () => {
  const p = Policy.parse(bytes(...enc("CN=J"), 0xfc, ...enc("rgen\tk\n")), "pol");
  assert.equal(p.allows("CN=J\xfcrgen", "k"), true);
  assert.equal(p.warnings.length, 1);
  assert.match(p.warnings[0], /^pol line 1: the subject is not valid UTF-8/);
});

Deno.test("a UTF-8 byte-order mark is dropped with a warning", () => {
  const p = Policy.parse(bytes(0xef, 0xbb, 0xbf, ...enc(`${ALICE}\tk\n`)), "pol");
  assert.equal(p.allows(ALICE, "k"), true);
  assert.match(p.warnings.join("\n"), /line 1: a UTF-8 byte-order mark/);
});

Deno.test("a duplicate pair is one grant, warned about with both lines", () => {
  const p = parse(`${ALICE}\tk\n${BOB}\tk\n${ALICE}\t\tk \n`);
  assert.equal(p.size, 2);
  assert.deepEqual(p.labelsFor(ALICE), ["k"]);
  assert.match(p.warnings.join("\n"), /line 3: duplicate of the grant on line 1/);
});

Deno.test("legacy slash subjects are warned about, naming line and the RFC 4514 form", () => {
  const p = parse(`${ALICE}\tk\n/C=DE/O=Example/CN=bob\tk\n`);
  assert.equal(p.allows("/C=DE/O=Example/CN=bob", "k"), true, "still granted byte for byte");
  assert.equal(p.warnings.length, 1);
  assert.match(p.warnings[0], /^\/etc\/svcd\/policy line 2: .*legacy slash form/);
  assert.match(p.warnings[0], /'CN=bob,O=Example,C=DE'/);
});

Deno.test("OpenSSL display form and non-DN subjects are warned about", () => {
  assert.match(parse("C = DE, O = Ex, CN = a\tk\n").warnings[0], /OpenSSL's display form/);
  assert.match(parse("alice\tk\n").warnings[0], /does not look like a distinguished name/);
});

Deno.test("a label that looks like an end-of-line comment is warned about", () => {
  const p = parse(`${ALICE}\tk # for alice\n`);
  assert.equal(p.allows(ALICE, "k # for alice"), true);
  assert.match(p.warnings[0], /no end-of-line comments/);
});

Deno.test("an empty file or one with only comments is valid, refuses everyone, and warns", () => {
  for (const text of ["", "# nobody yet\n\n"]) {
    const p = parse(text);
    assert.equal(p.size, 0);
    assert.equal(p.allows(ALICE, "k"), false);
    assert.match(p.warnings.join("\n"), /grants nothing; every request .* refused/);
  }
});

Deno.test("source defaults to <policy> in messages", () => {
  assert.throws(() => Policy.parse(enc("x\n")), /^PolicyError: <policy> line 1:/m);
});

Deno.test("grantedLabels lists each label once with the line of its first grant", () => {
  const p = parse(`# c\n${ALICE}\tk1\n${BOB}\tk2\n${BOB}\tk1\n`);
  assert.deepEqual(p.grantedLabels(), [{ label: "k1", line: 2 }, { label: "k2", line: 3 }]);
});

Deno.test("a policy handed to another isolate as data grants exactly what the parsed one does", () => {
  const text = "CN=a\tk1\nCN=a\tk2\nCN=b\tk1\n# comment\nCN=\xe9\tk3\n";
  const parsed = Policy.parse(Uint8Array.from(text, (c) => c.charCodeAt(0)));
  const copy = Policy.fromData(structuredClone(parsed.toData()));
  assert.equal(copy.size, parsed.size);
  for (const subject of ["CN=a", "CN=b", "CN=\xe9", "CN=c"]) {
    assert.deepEqual(copy.labelsFor(subject), parsed.labelsFor(subject), subject);
    for (const label of ["k1", "k2", "k3"]) {
      assert.equal(
        copy.allows(subject, label),
        parsed.allows(subject, label),
        `${subject} ${label}`,
      );
    }
  }
});
