import assert from "node:assert/strict";
import { clientIdentity, singleHeader, utf8FromLatin1 } from "./identity.ts";

Deno.test("identity: exactly one header, name in any case", () => {
  assert.deepEqual(clientIdentity([["x-SVC-client-subject", "CN=a"]]), {
    ok: true,
    subject: "CN=a",
  });
});

Deno.test("identity: two headers are refused whatever their case or values, never chosen", () => {
  for (const second of [["X-SVC-Client-Subject", "CN=a"], ["X-SVC-CLIENT-SUBJECT", "CN=b"]]) {
    const id = clientIdentity([["X-SVC-Client-Subject", "CN=a"], second as [string, string]]);
    assert.deepEqual(id, { ok: false, reason: "duplicate" });
  }
});

Deno.test("identity: none or empty is refused", () => {
  assert.deepEqual(clientIdentity([["X-SVC-Key", "k"]]), { ok: false, reason: "missing" });
  assert.deepEqual(clientIdentity([["X-SVC-Client-Subject", ""]]), { ok: false, reason: "empty" });
});

Deno.test("identity: a look-alike header name is not the identity", () => {
  assert.deepEqual(clientIdentity([["X-SVC-Client-Subjectx", "CN=a"]]), {
    ok: false,
    reason: "missing",
  });
});

Deno.test("singleHeader: absent, once, repeated", () => {
  assert.equal(singleHeader([], "x-svc-key"), undefined);
  assert.equal(singleHeader([["X-Svc-Key", "k"]], "x-svc-key"), "k");
  assert.equal(singleHeader([["X-Svc-Key", "k"], ["x-svc-key", "k"]], "x-svc-key"), null);
});

Deno.test("utf8FromLatin1: UTF-8 bytes carried in a latin1 header string, or undefined", () => {
  const wire = String.fromCharCode(...new TextEncoder().encode("clé-ключ"));
  assert.equal(utf8FromLatin1(wire), "clé-ключ");
  assert.equal(utf8FromLatin1("plain"), "plain");
  assert.equal(utf8FromLatin1("\u00e9"), undefined); // a lone latin1 é is not UTF-8
});
