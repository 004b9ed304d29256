import assert from "node:assert/strict";
import { serializeResponse, serializeResponseInto } from "./response.ts";

const response = {
  status: 200,
  headers: [["Content-Type", "application/octet-stream"], ["X-Note", "caf\xe9"]] as [
    string,
    string,
  ][],
  body: crypto.getRandomValues(new Uint8Array(64)),
};

Deno.test("a response that fits is written into the scratch buffer, byte for byte as alone", () => {
  const scratch = new Uint8Array(4096).fill(0xaa);
  const bytes = serializeResponseInto(response, false, scratch);
  assert.equal(bytes.buffer, scratch.buffer);
  assert.equal(bytes.byteOffset, 0);
  assert.deepEqual(bytes, serializeResponse(response));
  // A latin1 header value is one byte per char, not UTF-8.
  const at = bytes.indexOf(0xe9);
  assert.ok(at > 0 && bytes[at - 1] === "f".charCodeAt(0));
  assert.deepEqual(
    serializeResponseInto(response, true, scratch),
    serializeResponse(response, true),
  );
});

Deno.test("a response larger than the scratch buffer gets a buffer of its own", () => {
  const scratch = new Uint8Array(100);
  const bytes = serializeResponseInto(response, false, scratch);
  assert.notEqual(bytes.buffer, scratch.buffer);
  assert.deepEqual(bytes, serializeResponse(response));
});

Deno.test("header names are checked on every response, also after a good one was cached", () => {
  const ok = { status: 200, headers: [["X-Fine", "1"]] as [string, string][] };
  serializeResponse(ok);
  serializeResponse(ok);
  assert.throws(() => serializeResponse({ status: 200, headers: [["Date", "x"]] }), /listener/);
  assert.throws(() => serializeResponse({ status: 200, headers: [["X Bad", "x"]] }), /token/);
  assert.throws(
    () => serializeResponse({ status: 200, headers: [["X-Fine", "a\r\nb"]] }),
    /control/,
  );
});
