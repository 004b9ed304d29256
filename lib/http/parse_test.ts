// Pins the behaviour of `node:_http_common`'s HTTPParser (undocumented, llhttp-based) that the
// reader relies on. If a Deno upgrade changes any of it, these fail loudly: re-check parse.ts.
import assert from "node:assert/strict";
import { HTTPParser as NodeHTTPParser, methods } from "node:_http_common";
import { latin1 } from "../bytes/mod.ts";
import { RequestReader } from "./parse.ts";
import { bytes } from "../../tests/support/raw_http.ts";

// deno-lint-ignore no-explicit-any
const HTTPParser = NodeHTTPParser as any;

/** Runs the raw parser and returns the llhttp error code, or "ok" when it accepted everything. */
function rawParse(request: string): string {
  const p = new HTTPParser();
  p.initialize(HTTPParser.REQUEST, {}, 65536);
  p[HTTPParser.kOnHeadersComplete] = () => 0;
  p[HTTPParser.kOnBody] = () => {};
  p[HTTPParser.kOnMessageComplete] = () => {};
  const r = p.execute(bytes(request));
  return r instanceof Error ? String((r as unknown as { code: string }).code) : "ok";
}

Deno.test("HTTPParser still refuses what the reader leaves to it", () => {
  const cases: Array<[string, string]> = [
    [
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
      "HPE_UNEXPECTED_CONTENT_LENGTH",
    ],
    [
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HPE_INVALID_TRANSFER_ENCODING",
    ],
    [
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
      "HPE_INVALID_CONTENT_LENGTH",
    ],
    ["GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"], // obs-fold
    ["GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n", "HPE_CR_EXPECTED"], // bare LF
    ["GET / HTTP/1.1\rX: a\r\n\r\n", "HPE_STRICT"], // bare CR
    ["GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"],
    ["GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"],
    ["GET / HTTP/1.1\r\nX: a\x7fb\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"],
    ["GET / HTTP/1.1\r\nX\x00: a\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"],
    ["GET / HTTP/1.1\r\nX : a\r\n\r\n", "HPE_INVALID_HEADER_TOKEN"],
    ["POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\na", "HPE_INVALID_CONTENT_LENGTH"],
    ["POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "HPE_INVALID_CONTENT_LENGTH"],
    ["POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HPE_INVALID_CHUNK_SIZE"],
    ["PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HPE_PAUSED_H2_UPGRADE"],
    ["GARBAGE\r\n\r\n", "HPE_INVALID_METHOD"],
    ["GET / HTTP/1.1 x\r\n\r\n", "HPE_INVALID_VERSION"],
    ["GET / HTTP/1.1\r\n" + `X: ${"a".repeat(70000)}\r\n\r\n`, "HPE_HEADER_OVERFLOW"],
  ];
  for (const [request, code] of cases) {
    assert.equal(rawParse(request), code, `HTTPParser on ${JSON.stringify(request.slice(0, 60))}`);
  }
});

Deno.test("HTTPParser still has the leniencies the reader closes itself", () => {
  // If one of these starts failing, the parser got stricter: harmless, but update this file.
  assert.equal(rawParse("GET /\r\n\r\n"), "ok", "HTTP/0.9 request line");
  assert.equal(rawParse("GET  / HTTP/1.1\r\n\r\n"), "ok", "two spaces in the request line");
  assert.equal(
    rawParse("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"),
    "ok",
  );
  assert.deepEqual(methods.slice(0, 4), ["DELETE", "GET", "HEAD", "POST"]);
});

Deno.test("HTTPParser still hands header values one char per byte and >32 headers in batches", () => {
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
  let head = "GET /p HTTP/1.1\r\nX-Bytes: \x80\xa0\xc3\xa9\xff\r\n";
  for (let i = 0; i < 99; i++) head += `H${i}: v${i}\r\n`;
  head += "Host: svcd\r\n";
  const step = reader.feed(bytes(head + "\r\n"));
  assert.equal(step.kind, "done");
  if (step.kind !== "done") return;
  assert.equal(step.request.headers.length, 101);
  assert.deepEqual(step.request.headers[0], ["X-Bytes", "\x80\xa0\xc3\xa9\xff"]);
  assert.deepEqual(step.request.headers[99], ["H98", "v98"]);
  assert.deepEqual(step.request.headers[100], ["Host", "svcd"]);
  assert.equal(step.request.target, "/p");
});

Deno.test("the reader assembles a request fed one byte at a time", () => {
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
  const req = bytes("POST /sign HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab\x00d");
  for (let i = 0; i < req.length - 1; i++) {
    assert.equal(reader.feed(req.subarray(i, i + 1)).kind, "more");
  }
  const step = reader.feed(req.subarray(req.length - 1));
  assert.equal(step.kind, "done");
  if (step.kind === "done") assert.deepEqual(step.request.body, bytes("ab\x00d"));
});

Deno.test("the header limit is exact: the head may use all of it, not one byte more", () => {
  const limit = 1024;
  const make = (size: number) => {
    const base = "GET / HTTP/1.1\r\nHost: s\r\nX: \r\n\r\n";
    return "GET / HTTP/1.1\r\nHost: s\r\nX: " + "a".repeat(size - base.length) + "\r\n\r\n";
  };
  assert.equal(make(limit).length, limit);
  const ok = new RequestReader({ maxHeaderBytes: limit, maxBodyBytes: 10 }).feed(
    bytes(make(limit)),
  );
  assert.equal(ok.kind, "done");
  const over = new RequestReader({ maxHeaderBytes: limit, maxBodyBytes: 10 }).feed(
    bytes(make(limit + 1)),
  );
  assert.equal(over.kind, "refuse");
  if (over.kind === "refuse") assert.match(over.title, /header block too large/);
});

Deno.test("a reset reader serves the next request cleanly", () => {
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
  assert.equal(reader.feed(bytes("GET / HTTP/1.1\r\nX: a\x00\r\n\r\n")).kind, "refuse");
  reader.reset();
  const step = reader.feed(bytes("GET /again HTTP/1.0\r\n\r\n"));
  assert.equal(step.kind, "done");
  if (step.kind === "done") assert.equal(step.request.target, "/again");
});

Deno.test("Host: exactly one in HTTP/1.1, at most one in HTTP/1.0 (RFC 9112 §3.2)", () => {
  const read = (head: string) =>
    new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 }).feed(bytes(head + "\r\n"));
  const refused = (head: string, title: RegExp) => {
    const step = read(head);
    assert.equal(step.kind, "refuse", head);
    if (step.kind === "refuse") {
      assert.equal(step.status, 400);
      assert.match(step.title, title);
    }
  };
  refused("GET /health HTTP/1.1\r\n", /Host is missing/);
  refused("GET /health HTTP/1.1\r\nHost: a\r\nHost: a\r\n", /More than one Host/);
  refused("GET /health HTTP/1.1\r\nHost: a\r\nhOST: b\r\n", /More than one Host/);
  refused("GET /health HTTP/1.0\r\nHost: a\r\nHost: b\r\n", /More than one Host/);
  refused("POST /sign HTTP/1.1\r\nX-Host: a\r\nContent-Length: 0\r\n", /Host is missing/);
  assert.equal(read("GET /health HTTP/1.1\r\nHost: svcd\r\n").kind, "done");
  assert.equal(read("GET /health HTTP/1.1\r\nHost:\r\n").kind, "done", "empty Host is allowed");
  assert.equal(read("GET /health HTTP/1.0\r\n").kind, "done", "HTTP/1.0 without Host");
});

Deno.test("latin1 maps each byte to one char", () => {
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const s = latin1(all);
  assert.equal(s.length, 256);
  for (let i = 0; i < 256; i++) assert.equal(s.charCodeAt(i), i);
});

Deno.test("a request followed by a second one in the same bytes is refused, never merged", () => {
  const first = "POST /sign? HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: CN=fuzz\r\n" +
    "X-SVC-Key: k1\r\nContent-Length: 3\r\n\r\nAAA";
  const seconds = [
    "POST /zzz HTTP/1.1\r\nHost: other\r\nContent-Length: 3\r\n\r\nBBB",
    "GET /x HTTP/1.1\r\nHost: other\r\n\r\n",
    "P", // the first byte of a next request is enough
    "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nBPOST /b HTTP/1.1\r\n",
  ];
  for (const second of seconds) {
    for (const split of [0, 1, first.length]) {
      // In one feed, and with the second request arriving in a later feed of the same reader.
      const whole = first + second;
      const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
      let step = reader.feed(bytes(whole.slice(0, whole.length - split)));
      if (split > 0) step = reader.feed(bytes(whole.slice(whole.length - split)));
      assert.equal(step.kind, "refuse", `${JSON.stringify(second)} split ${split}`);
      if (step.kind === "refuse") {
        assert.equal(step.status, 400);
        assert.equal(step.title, "One request per connection");
      }
    }
  }
});

Deno.test("HTTP/1.0 with keep-alive does not merge a second request either", () => {
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
  const step = reader.feed(bytes(
    "POST /sign HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nA" +
      "POST /sign HTTP/1.0\r\nHost: a\r\nContent-Length: 1\r\n\r\nB",
  ));
  assert.equal(step.kind, "refuse");
});

Deno.test("one complete request alone is still read as it was sent", () => {
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 });
  const step = reader.feed(
    bytes("POST /sign HTTP/1.1\r\nHost: a\r\nX-SVC-Key: k\r\nContent-Length: 3\r\n\r\nAAA"),
  );
  assert.equal(step.kind, "done");
  if (step.kind !== "done") return;
  assert.equal(step.request.target, "/sign");
  assert.equal(latin1(step.request.body), "AAA");
  assert.equal(step.request.headers.length, 3);
});

Deno.test("a PRI request line (the HTTP/2 preface method) is refused at once, not left waiting for the preface", () => {
  // llhttp holds "PRI … HTTP/1.1\r\n\r\n" waiting for "SM\r\n\r\n"; found by tests/fuzz.
  for (const request of ["PRI /token HTTP/1.1\r\n\r\n", "PRI /sign HTTP/1.1\r\nHost: a\r\n"]) {
    const step = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1024 }).feed(
      bytes(request),
    );
    assert.equal(step.kind, "refuse", request);
    if (step.kind === "refuse") assert.equal(step.status, 400);
  }
});
