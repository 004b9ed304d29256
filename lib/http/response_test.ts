import assert from "node:assert/strict";
import { problem } from "./problem.ts";
import { serializeResponse } from "./response.ts";
import { header, parseRawResponse } from "../../tests/support/raw_http.ts";

Deno.test("a response carries Date, Content-Length and Connection: close after the handler's headers", () => {
  const res = parseRawResponse(
    serializeResponse({ status: 200, headers: [["X-SVC-Mechanism", "CKM_EDDSA"]], body: "é" }),
  );
  assert.equal(res.status, 200);
  assert.deepEqual(res.headers.map(([n]) => n), [
    "x-svc-mechanism",
    "date",
    "content-length",
    "connection",
  ]);
  assert.equal(header(res, "content-length"), "2"); // UTF-8 bytes, not chars
  assert.equal(header(res, "connection"), "close");
  assert.ok(!Number.isNaN(Date.parse(header(res, "date")!)));
});

Deno.test("headers the listener owns, bad names, control characters and bad statuses are refused", () => {
  for (const name of ["Content-Length", "connection", "Transfer-Encoding", "Date"]) {
    assert.throws(
      () => serializeResponse({ status: 200, headers: [[name, "1"]] }),
      /written by the listener/,
    );
  }
  assert.throws(
    () => serializeResponse({ status: 200, headers: [["Bad Name", "x"]] }),
    /not a token/,
  );
  for (const value of ["a\r\nX: y", "a\nb", "a\x00b", "a\x7f"]) {
    assert.throws(
      () => serializeResponse({ status: 200, headers: [["X", value]] }),
      /control character/,
    );
  }
  for (const status of [100, 199, 600, 200.5, NaN]) {
    assert.throws(() => serializeResponse({ status }), /200\.\.599/);
  }
});

Deno.test("HEAD keeps Content-Length and drops the body", () => {
  const res = parseRawResponse(serializeResponse({ status: 200, body: "abc" }, true));
  assert.equal(header(res, "content-length"), "3");
  assert.equal(res.body.length, 0);
});

Deno.test("problem() is RFC 9457 problem+json and the same arguments give the same bytes", () => {
  const p = problem(429, "Too many requests", "at most 3 at once", [["Retry-After", "1"]]);
  assert.deepEqual(p.headers, [["Content-Type", "application/problem+json"], ["Retry-After", "1"]]);
  assert.deepEqual(JSON.parse(p.body as string), {
    type: "about:blank",
    title: "Too Many Requests",
    status: 429,
    detail: "at most 3 at once",
  });
  // With about:blank the title is the reason phrase (RFC 9457 §4.2.1); a specific title leads the detail.
  assert.deepEqual(JSON.parse(problem(503, "Queue full", "retry").body as string), {
    type: "about:blank",
    title: "Service Unavailable",
    status: 503,
    detail: "Queue full: retry",
  });
  assert.equal(JSON.parse(problem(403, "Forbidden").body as string).detail, undefined);
  assert.equal(problem(403, "Forbidden").body, problem(403, "Forbidden").body);
});
