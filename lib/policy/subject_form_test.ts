import assert from "node:assert/strict";
import { legacyToRfc4514, subjectFormAdvice } from "./subject_form.ts";

Deno.test("legacy slash form is reversed into RFC 4514", () => {
  assert.equal(legacyToRfc4514("/C=DE/O=Example/CN=alice"), "CN=alice,O=Example,C=DE");
});

Deno.test("RFC 4514 special characters in values are escaped; '/' inside a value stays", () => {
  assert.equal(legacyToRfc4514("/C=DE/O=Acme, Inc./CN=a+b"), "CN=a\\+b,O=Acme\\, Inc.,C=DE");
  assert.equal(legacyToRfc4514("/O=A/B Corp/CN=x"), "CN=x,O=A/B Corp");
});

Deno.test("well-formed RFC 4514 subjects get no advice", () => {
  assert.equal(subjectFormAdvice("CN=alice,O=Example,C=DE"), undefined);
  assert.equal(subjectFormAdvice("CN=a/b,O=Example"), undefined);
});
