// The policy compares subjects byte for byte only if it decodes its file the way the HTTP layer
// decodes header values. This test runs real request bytes through the HTTP reader and checks that a
// UTF-8 subject (and one with bytes 0x80-0x9f, which windows-1252 would remap) matches its grant.
import assert from "node:assert/strict";
import { RequestReader } from "../lib/http/parse.ts";
import { Policy } from "../lib/policy/mod.ts";

const utf8 = (s: string) => new TextEncoder().encode(s);
const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

function subjectOnTheWire(subjectBytes: Uint8Array): string {
  const request = concat(
    utf8("POST /sign HTTP/1.1\r\nHost: svcd\r\nX-SVC-Key: k\r\nX-SVC-Client-Subject: "),
    subjectBytes,
    utf8("\r\nContent-Length: 0\r\n\r\n"),
  );
  const step = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 }).feed(request);
  assert.equal(step.kind, "done", JSON.stringify(step));
  if (step.kind !== "done") throw new Error("unreachable");
  const header = step.request.headers.find(([name]) =>
    name.toLowerCase() === "x-svc-client-subject"
  );
  assert.ok(header, "the subject header is in the parsed request");
  return header[1];
}

for (
  const [name, subject] of [
    ["ASCII", utf8("CN=alice,O=Example,C=DE")],
    ["UTF-8", utf8("CN=Jürgen Müller,O=Bäckerei Ørsted,C=DE")],
    ["bytes 0x80-0x9f", concat(utf8("CN=x"), new Uint8Array([0x80, 0x8d, 0x9f]), utf8(",O=y"))],
  ] as const
) {
  Deno.test(`a ${name} subject from the wire matches its grant byte for byte`, () => {
    const policy = Policy.parse(concat(subject, utf8("\tsign-key\n")), "policy");
    const fromWire = subjectOnTheWire(subject);
    assert.equal(policy.allows(fromWire, "sign-key"), true);
    assert.deepEqual(policy.labelsFor(fromWire), ["sign-key"]);
  });
}

Deno.test("a subject differing in one byte on the wire does not match", () => {
  const policy = Policy.parse(utf8("CN=Jürgen,O=Ex\tsign-key\n"), "policy");
  assert.equal(policy.allows(subjectOnTheWire(utf8("CN=Jurgen,O=Ex")), "sign-key"), false);
  assert.equal(policy.allows(subjectOnTheWire(utf8("CN=JÜrgen,O=Ex")), "sign-key"), false);
});

Deno.test("whitespace around a header value never reaches the policy, as the parser assumes", () => {
  const policy = Policy.parse(utf8("  CN=alice,O=Ex \t sign-key \n"), "policy");
  const fromWire = subjectOnTheWire(utf8("  CN=alice,O=Ex \t "));
  assert.equal(fromWire, "CN=alice,O=Ex");
  assert.equal(policy.allows(fromWire, "sign-key"), true);
});
