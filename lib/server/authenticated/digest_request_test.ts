import assert from "node:assert/strict";
import type { HttpResponse } from "../../http/mod.ts";
import {
  digestLengthWrong,
  digestMode,
  digestRequest,
  digestUnsupported,
} from "./digest_request.ts";

function problemOf(res: HttpResponse | undefined | object) {
  assert.ok(res && "status" in res, "a refusal");
  const r = res as HttpResponse;
  assert.equal(r.status, 400);
  assert.deepEqual(r.headers?.[0], ["Content-Type", "application/problem+json"]);
  return JSON.parse(r.body as string) as { type: string; title: string; detail: string };
}

Deno.test("digestMode: no header is message mode; names match case-insensitively", () => {
  assert.deepEqual(digestMode([["X-SVC-Key", "k"]]), { digest: undefined });
  assert.deepEqual(digestMode([["x-svc-digest", "SHA-384"]]), { digest: "sha-384" });
  assert.deepEqual(digestMode([["X-Svc-Digest", "Ml-Dsa-Mu"]]), { digest: "ml-dsa-mu" });
});

Deno.test("digestMode: an unknown name or two headers is digest-unknown, listing the names", () => {
  for (const value of ["sha-1", "sha256", "", "sha-256 ", "ml-dsa"]) {
    const doc = problemOf(digestMode([["X-SVC-Digest", value]]));
    assert.equal(doc.type, "urn:svcd:problem:digest-unknown");
    assert.match(doc.detail, /sha-256, sha-384, sha-512, ml-dsa-mu/);
  }
  const twice = problemOf(digestMode([["X-SVC-Digest", "sha-256"], ["x-svc-digest", "sha-256"]]));
  assert.equal(twice.type, "urn:svcd:problem:digest-unknown");
  assert.match(twice.detail, /More than one X-SVC-Digest/);
});

Deno.test("digestUnsupported: the key type's names, none, or the module's missing mechanism", () => {
  const ec = { keyType: "ec-p256", digests: ["sha-256", "sha-384", "sha-512"] as const };
  assert.equal(digestUnsupported(ec, "sha-512"), undefined);
  const wrong = problemOf(digestUnsupported(ec, "ml-dsa-mu"));
  assert.equal(wrong.type, "urn:svcd:problem:digest-unsupported");
  assert.match(wrong.detail, /ec-p256 keys take X-SVC-Digest sha-256, sha-384, sha-512/);
  const ed = problemOf(digestUnsupported({ keyType: "ed25519", digests: [] }, "sha-256"));
  assert.match(ed.detail, /ed25519 keys take no digest mode/);
  // An ML-DSA key on a module without CKM_ML_DSA_EXTERNAL_MU (SoftHSM2) takes no name here.
  const lacking = problemOf(digestUnsupported({ keyType: "ml-dsa-65", digests: [] }, "ml-dsa-mu"));
  assert.equal(lacking.type, "urn:svcd:problem:digest-unsupported");
  assert.match(lacking.detail, /module behind svcd lacks CKM_ML_DSA_EXTERNAL_MU/);
});

Deno.test("digestLengthWrong: each digest's length exactly", () => {
  assert.equal(digestLengthWrong(new Uint8Array(32), "sha-256"), undefined);
  assert.equal(digestLengthWrong(new Uint8Array(48), "sha-384"), undefined);
  assert.equal(digestLengthWrong(new Uint8Array(64), "sha-512"), undefined);
  assert.equal(digestLengthWrong(new Uint8Array(64), "ml-dsa-mu"), undefined);
  const doc = problemOf(digestLengthWrong(new Uint8Array(33), "sha-256"));
  assert.equal(doc.type, "urn:svcd:problem:digest-length");
  assert.match(doc.detail, /sha-256 digest is 32 bytes; 33 arrived/);
});

Deno.test("digestRequest: unknown before unsupported before length; same bytes every time", () => {
  const ml = { keyType: "ml-dsa-44", digests: ["ml-dsa-mu"] as const };
  const ask = (name: string, n: number) =>
    digestRequest([["X-SVC-Digest", name]], ml, new Uint8Array(n));
  assert.equal(problemOf(ask("md5", 1)).type, "urn:svcd:problem:digest-unknown");
  assert.equal(problemOf(ask("sha-256", 1)).type, "urn:svcd:problem:digest-unsupported");
  assert.equal(problemOf(ask("ml-dsa-mu", 1)).type, "urn:svcd:problem:digest-length");
  assert.deepEqual(ask("ml-dsa-mu", 64), { digest: "ml-dsa-mu" });
  assert.deepEqual(ask("sha-256", 1), ask("sha-256", 1));
});
