import assert from "node:assert/strict";
import { singleHeader, utf8FromLatin1 } from "./headers.ts";

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
