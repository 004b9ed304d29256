import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import {
  actorBytes,
  actorMembers,
  auditFileName,
  auditFileNumber,
  chainInput,
  chainInputWithRoom,
  hashedLine,
  lineBody,
  lineBytes,
  lineBytesV1,
  lineHash,
  memberHead,
  memberTail,
  sealedLine,
  sealInput,
  splitTrailer,
  ZERO_MAC,
} from "./format.ts";

const latin1 = (bytes: number[]) => String.fromCharCode(...bytes);
const roundTrip = (actor: string) => actorBytes(JSON.parse(`{${actorMembers(actor)}}`));

Deno.test("actor: valid UTF-8 bytes are stored decoded and come back byte for byte", () => {
  const bytes = [...new TextEncoder().encode("CN=Zoë Ünal,O=Exämple,C=DE")];
  const members = actorMembers(latin1(bytes));
  assert.equal(members, `"actor":"CN=Zoë Ünal,O=Exämple,C=DE"`);
  assert.deepEqual([...roundTrip(latin1(bytes))], bytes);
});

Deno.test("actor: invalid UTF-8 is kept exactly in actor_bytes", () => {
  const bytes = [0x43, 0x4e, 0x3d, 0xff, 0xc3, 0x28, 0x00, 0x0a];
  const parsed = JSON.parse(`{${actorMembers(latin1(bytes))}}`);
  assert.equal(typeof parsed.actor_bytes, "string");
  assert.deepEqual([...actorBytes(parsed)], bytes);
});

Deno.test("actor: a leading BOM and control characters survive", () => {
  const bytes = [0xef, 0xbb, 0xbf, 0x41, 0x09, 0x0a, 0x22, 0x5c];
  assert.deepEqual([...roundTrip(latin1(bytes))], bytes);
});

Deno.test("actor: ASCII (controls included) is stored as it is, the same as the general path gives", () => {
  for (const actor of ["CN=a,O=B", "svcd", 'CN=\x00\x1f\x7f"\\']) {
    assert.equal(actorMembers(actor), `"actor":${JSON.stringify(actor)}`);
    assert.deepEqual(roundTrip(actor), Uint8Array.from(actor, (c) => c.charCodeAt(0)));
  }
});

Deno.test("actor: empty, non-string or non-byte strings are refused with a clear error", () => {
  assert.throws(() => actorMembers(""), /non-empty/);
  assert.throws(() => actorMembers(42 as unknown as string), /non-empty string/);
  assert.throws(() => actorMembers("CN=\u20ac"), /U\+20ac at 3.*one char per byte/);
});

Deno.test("fields: order kept, undefined left out, reserved and odd names refused", () => {
  const tail = memberTail(new Date(0), { key: "k", skip: undefined, n: 3 });
  assert.equal(tail, `,"time":"1970-01-01T00:00:00.000Z","key":"k","n":3`);
  assert.throws(() => memberTail(new Date(), { mac: "x" }), /written by the log itself/);
  assert.throws(() => memberTail(new Date(), { "a b": 1 }), /lower_snake_case/);
  assert.throws(() => memberTail(new Date(), { big: 1n }), /cannot be written as JSON/);
  assert.throws(() => memberHead("Sign!", "a"), /lower_snake_case/);
});

Deno.test("fields: time and string values are written exactly as toISOString and JSON give them", () => {
  const start = Date.UTC(2026, 10, 22, 23, 59, 58, 990);
  const times = [-62198755200001, -1, 0, 5, 99, 100, 999, 1000, 253402300799999, 253402300800000];
  for (let ms = start; ms < start + 2100; ms += 7) times.push(ms);
  for (const ms of times) {
    const t = new Date(ms);
    assert.equal(memberTail(t), `,"time":${JSON.stringify(t.toISOString())}`);
  }
  assert.throws(() => memberTail(new Date(NaN)), RangeError);
  const values = ["k-ec", "", " !#[]~", 'a"b', "a\\b", "tab\there", "Zoë", "\u007f", "\ud800"];
  for (const v of values) {
    assert.equal(
      memberTail(new Date(0), { v }),
      `,"time":"1970-01-01T00:00:00.000Z","v":${JSON.stringify(v)}`,
    );
  }
});

Deno.test("a line splits back into the body its hash covers, the hash and the seal (and v1: the MAC)", () => {
  const body = new TextEncoder().encode(
    lineBody(memberHead("sign", "CN=a"), 9, memberTail(new Date(0)), ZERO_MAC),
  );
  const hash = crypto.getRandomValues(new Uint8Array(32));
  const seal = crypto.getRandomValues(new Uint8Array(32));
  const cases = [
    { line: lineBytes(body, hash), members: ["hash"], version: 2, seal: undefined },
    { line: lineBytes(body, hash, seal), members: ["hash", "seal"], version: 2, seal },
    { line: lineBytesV1(body, hash), members: ["mac"], version: 1, seal: undefined },
  ];
  for (const c of cases) {
    assert.equal(c.line.at(-1), 0x0a);
    const parts = splitTrailer(c.line.subarray(0, c.line.length - 1))!;
    assert.deepEqual(parts.body, body);
    assert.deepEqual(parts.value, hash);
    assert.equal(parts.version, c.version);
    assert.deepEqual(parts.seal, c.seal);
    const parsed = JSON.parse(new TextDecoder().decode(c.line));
    assert.deepEqual(Object.keys(parsed), ["event", "actor", "seq", "time", "prev", ...c.members]);
    assert.equal(parsed[c.members[0]], hash.toHex());
  }
});

Deno.test("a line built in one buffer has the same chain input and written bytes as the plain path", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  const prev = crypto.getRandomValues(new Uint8Array(32));
  const seal = crypto.getRandomValues(new Uint8Array(32));
  const fields = [{ key: "k" }, { note: "Zoë €𝄞" }, { lone: "\ud800x" }, {}];
  for (const f of fields) {
    const body = lineBody(
      memberHead("sign", "CN=Zo\xc3\xab"),
      12,
      memberTail(new Date(0), f),
      prev,
    );
    const input = chainInputWithRoom(prev, body);
    assert.deepEqual(input, chainInput(prev, enc(body)));
    const hash = lineHash(input);
    // The oracle: node:crypto's SHA-256 of prev ‖ body, fed in two parts.
    assert.deepEqual(hash, new Uint8Array(createHash("sha256").update(prev).update(body).digest()));
    const line = hashedLine(input, hash);
    assert.deepEqual(line, lineBytes(enc(body), hash));
    assert.deepEqual(sealedLine(line, seal), lineBytes(enc(body), hash, seal));
  }
});

Deno.test("a seal's input is its label and the hash: never the length of a v1 MAC input", () => {
  const hash = new Uint8Array(32).fill(7);
  const input = sealInput(hash);
  assert.equal(new TextDecoder().decode(input.subarray(0, -32)), "svcd-audit-seal-v2 ");
  assert.deepEqual(input.subarray(-32), hash);
});

Deno.test("splitTrailer refuses lines that do not end with a well-formed hash, seal or MAC", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  const hex = "a".repeat(64);
  assert.equal(splitTrailer(enc(`{"a":1}`)), undefined);
  for (const name of ["mac", "hash"]) {
    assert.equal(splitTrailer(enc(`{"a":1,"${name}":"${"A".repeat(64)}"}`)), undefined);
    assert.equal(splitTrailer(enc(`{"a":1,"${name}":"${"a".repeat(63)}"}`)), undefined);
    assert.notEqual(splitTrailer(enc(`{"a":1,"${name}":"${hex}"}`)), undefined);
  }
  assert.equal(splitTrailer(enc(`{"a":1,"seal":"${hex}"}`)), undefined, "a seal needs a hash");
  assert.equal(splitTrailer(enc(`{"a":1,"mac":"${hex}","seal":"${hex}"}`)), undefined);
  assert.equal(splitTrailer(enc(`{"a":1,"hash":"${hex}","seal":"${hex}"`)), undefined);
  assert.notEqual(splitTrailer(enc(`{"a":1,"hash":"${hex}","seal":"${hex}"}`)), undefined);
});

Deno.test("file names: six digits, parsed back, out of range refused", () => {
  assert.equal(auditFileName(1), "audit.log.000001");
  assert.equal(auditFileNumber("audit.log.000123"), 123);
  assert.equal(auditFileNumber("audit.log.123"), undefined);
  assert.equal(auditFileNumber("audit.log.0000012"), undefined);
  assert.throws(() => auditFileName(1_000_000), /out of range/);
});
