import assert from "node:assert/strict";
import type { HttpRequest } from "../../http/mod.ts";
import { publicHandler } from "./routes.ts";

function req(method: string, path: string, body = new Uint8Array()): HttpRequest {
  return {
    method,
    target: path,
    path,
    headers: [["Host", "svcd"]],
    body,
    peer: { pid: 1, uid: 0, gid: 0 },
    id: "0",
  };
}

const asked: Uint8Array[] = [];
const handler = publicHandler({
  certificates: new TextEncoder().encode("-----BEGIN CERTIFICATE-----\n"),
  responder: {
    answer: (der) => {
      asked.push(der);
      return Promise.resolve(Uint8Array.of(0x30, 0x00));
    },
  },
});
const header = (h: Array<[string, string]> | undefined, name: string) =>
  h?.find(([n]) => n.toLowerCase() === name)?.[1];

Deno.test("public routes: POST /ocsp hands the body to the responder; its bytes are the answer", async () => {
  const res = await handler(req("POST", "/ocsp", Uint8Array.of(1, 2, 3)));
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, Uint8Array.of(0x30, 0x00));
  assert.equal(header(res.headers, "content-type"), "application/ocsp-response");
  assert.equal(header(res.headers, "cache-control"), undefined);
  assert.deepEqual(asked.at(-1), Uint8Array.of(1, 2, 3));
});

Deno.test("public routes: GET /ocsp and other methods 405 with Allow: POST", async () => {
  const before = asked.length;
  for (const method of ["GET", "HEAD", "PUT", "DELETE"]) {
    const res = await handler(req(method, "/ocsp"));
    assert.equal(res.status, 405, method);
    assert.equal(header(res.headers, "allow"), "POST");
  }
  assert.equal(asked.length, before, "the responder is never asked for a GET");
});

Deno.test("public routes: /sign, /verify, /health, /token and unknown paths 404", async () => {
  for (const path of ["/sign", "/verify", "/health", "/token", "/", "/certificates/x"]) {
    assert.equal((await handler(req("POST", path))).status, 404, path);
  }
});

Deno.test("public routes: GET /certificates is the PEM chain; POST is 405 Allow: GET, HEAD", async () => {
  const res = await handler(req("GET", "/certificates"));
  assert.equal(res.status, 200);
  assert.equal(header(res.headers, "content-type"), "application/pem-certificate-chain");
  const post = await handler(req("POST", "/certificates"));
  assert.equal(post.status, 405);
  assert.equal(header(post.headers, "allow"), "GET, HEAD");
});
