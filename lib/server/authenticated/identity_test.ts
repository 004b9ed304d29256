import assert from "node:assert/strict";
import { clientIdentity } from "./identity.ts";

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
