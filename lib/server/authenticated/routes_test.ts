import assert from "node:assert/strict";
import type { HttpRequest } from "../../http/mod.ts";
import { CKR, Pkcs11Error } from "../../../ffi/pkcs11/mod.ts";
import { KeyUnusableError, MechanismUnavailableError } from "../../token/mod.ts";
import {
  authenticatedContinueCheck,
  type AuthenticatedDeps,
  authenticatedHandler,
  FORBIDDEN,
  type RouteKey,
} from "./routes.ts";
import { admissionInThisThread } from "./admission.ts";

const deviceRemoved = () => new Pkcs11Error("C_Sign", CKR.DEVICE_REMOVED);

/** Fakes that record every call, so the order of decisions can be asserted. */
function fakes(over: Partial<AuthenticatedDeps> = {}) {
  const calls: string[] = [];
  const key: RouteKey = {
    label: "k",
    keyType: "ed25519",
    mechanism: "CKM_EDDSA",
    publicKeyRaw: new Uint8Array(32),
    digests: [],
  };
  let auditHealthy = true;
  let refusals = 0;
  const budget = {
    check: (id: string): { limited: false } | { limited: true; retryAfterSeconds: number } => {
      calls.push(`budget.check ${id}`);
      return id === "CN=limited" ? { limited: true, retryAfterSeconds: 42 } : { limited: false };
    },
    recordRefusal: (_id: string) => {
      refusals++;
      return { count: refusals, crossed: refusals === 3, delaySeconds: 8 };
    },
    limitedCount: () => 0,
  };
  /** The concurrency cap; a test replaces `tryAcquire` to fill it. */
  const cap: { tryAcquire(id: string): (() => void) | undefined } = {
    tryAcquire: () => () => {},
  };
  const deps: AuthenticatedDeps = {
    token: {
      key: (label) => {
        calls.push(`token.key ${label}`);
        return Promise.resolve(label === "k" ? key : undefined);
      },
      sign: (k, m) => {
        calls.push("token.sign");
        return Promise.resolve({
          signature: new Uint8Array([...m].reverse()),
          mechanism: k.mechanism,
        });
      },
      verify: (_k, m, s) => {
        calls.push("token.verify");
        return Promise.resolve(
          s.length === m.length && s.every((b, i) => b === m[m.length - 1 - i]),
        );
      },
      info: () => ({ label: "t" }),
      loggedIn: () => {
        calls.push("token.loggedIn");
        return Promise.resolve(true);
      },
      poolStats: () => ({ size: 1, inUse: 0, waiting: 0, cap: 127 }),
    },
    policy: () => ({
      allows: (s, l) => s === "CN=a" && (l === "k" || l === "ghost"),
      labelsFor: (s) => s === "CN=a" ? ["k", "ghost"] : [],
    }),
    audit: {
      append: (event, actor) => {
        calls.push(`audit ${event} ${actor}`);
        return auditHealthy ? Promise.resolve(1) : Promise.reject(new Error("disk full"));
      },
      get healthy() {
        return auditHealthy;
      },
      lastError: undefined,
    },
    budget,
    admission: admissionInThisThread({ budget, cap: { tryAcquire: (id) => cap.tryAcquire(id) } }),
    log: () => {},
    startedAt: Date.now(),
    ...over,
  };
  return {
    deps,
    cap,
    calls,
    breakAudit: () => auditHealthy = false,
    failAudit: () => auditHealthy = false,
  };
}

function req(
  path: string,
  headers: Array<[string, string]>,
  body = "",
  method = "POST",
): HttpRequest {
  return {
    method,
    target: path,
    path,
    headers,
    body: new TextEncoder().encode(body),
    peer: { pid: 1, uid: 0, gid: 0 },
    id: "r1",
  };
}

const A: [string, string] = ["X-SVC-Client-Subject", "CN=a"];

Deno.test("authenticated routes: an unknown subject or ungranted key never reaches the token (policy first)", async () => {
  const { deps, calls } = fakes();
  const h = authenticatedHandler(deps);
  const r1 = await h(
    req("/sign", [["X-SVC-Client-Subject", "CN=stranger"], ["X-SVC-Key", "k"]], "m"),
  );
  const r2 = await h(req("/sign", [A, ["X-SVC-Key", "not-granted"]], "m"));
  assert.equal(r1, FORBIDDEN);
  assert.equal(r2, FORBIDDEN);
  assert.ok(!calls.some((c) => c.startsWith("token.")), calls.join());
});

Deno.test("authenticated routes: a granted label with no key gets the same 403 bytes", async () => {
  const { deps } = fakes();
  const r = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "ghost"]], "m"));
  assert.equal(r, FORBIDDEN);
});

Deno.test("authenticated routes: the refusal budget is checked before the policy, the token and the audit", async () => {
  const { deps, calls } = fakes();
  const r = await authenticatedHandler(deps)(
    req("/sign", [["X-SVC-Client-Subject", "CN=limited"], ["X-SVC-Key", "k"]], "m"),
  );
  assert.equal(r.status, 429);
  assert.deepEqual(r.headers?.find(([n]) => n === "Retry-After"), ["Retry-After", "42"]);
  assert.deepEqual(calls, ["budget.check CN=limited"]);
});

Deno.test("authenticated routes: the concurrency cap answers 429 Retry-After 1 and is not a refusal", async () => {
  let recorded = 0;
  const { deps, cap } = fakes();
  cap.tryAcquire = () => undefined;
  deps.budget.recordRefusal = () => (recorded++, { count: 1, crossed: false, delaySeconds: 0 });
  const r = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "m"));
  assert.equal(r.status, 429);
  assert.deepEqual(r.headers?.find(([n]) => n === "Retry-After"), ["Retry-After", "1"]);
  assert.equal(recorded, 0);
});

Deno.test("authenticated routes: the answer waits until the sign line is durable", async () => {
  const { deps, calls } = fakes();
  let durable!: () => void;
  deps.audit.append = (event, actor) => {
    calls.push(`audit ${event} ${actor}`);
    return new Promise((resolve) => (durable = () => resolve(1)));
  };
  let answered = false;
  const pending = authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "abc"))
    .then((r) => (answered = true, r));
  while (!calls.includes("audit sign CN=a")) await new Promise((r) => setTimeout(r, 0));
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(answered, false, "the signature left before its audit line was durable");
  durable();
  assert.equal((await pending).status, 200);
  assert.deepEqual(calls.slice(-2), ["token.sign", "audit sign CN=a"]);
});

Deno.test("authenticated routes: /health under a fully busy pool answers without queueing behind signers", async () => {
  const { deps, calls } = fakes();
  deps.token.poolStats = () => ({ size: 4, inUse: 4, waiting: 9, cap: 4 });
  const r = await authenticatedHandler(deps)(req("/health", [A], "", "GET"));
  assert.equal(r.status, 200);
  assert.ok(!calls.includes("token.loggedIn"));
});

Deno.test("authenticated routes: /token lists the usable keys when one granted key is unusable", async () => {
  const { deps } = fakes();
  const key = deps.token.key;
  deps.token.key = (label) =>
    label === "ghost"
      ? Promise.reject(new MechanismUnavailableError("mechanism not offered"))
      : key(label);
  const r = await authenticatedHandler(deps)(req("/token", [A], "", "GET"));
  assert.equal(r.status, 200);
  const body = JSON.parse(new TextDecoder().decode(r.body as Uint8Array));
  assert.deepEqual(body.keys.map((k: { label: string }) => k.label), ["k", "ghost"]);
  assert.match(body.keys[1].error, /mechanism not offered/);
});

Deno.test("authenticated routes: a failed audit write withholds the signature (503)", async () => {
  const { deps, failAudit } = fakes();
  const appendOk = deps.audit.append;
  deps.audit.append = (e, a, f) => {
    failAudit();
    return appendOk(e, a, f);
  };
  const r = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "abc"));
  assert.equal(r.status, 503);
  assert.ok(!String(r.body).includes("cba"));
  const next = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "abc"));
  assert.equal(next.status, 503, "signing stays stopped while the log is not writable");
});

Deno.test("authenticated routes: crossing the budget writes one identity_limited line", async () => {
  const { deps, calls } = fakes();
  const h = authenticatedHandler(deps);
  for (let i = 0; i < 6; i++) await h(req("/sign", [A, ["X-SVC-Key", "nope"]], "m"));
  assert.deepEqual(calls.filter((c) => c.startsWith("audit")), ["audit identity_limited CN=a"]);
});

Deno.test("authenticated routes: a key deleted from the token between the grant and the signature: the same 403", async () => {
  const { deps } = fakes();
  deps.token.sign = () =>
    Promise.reject(new KeyUnusableError("k", "gone", "no longer on the token"));
  const r = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "m"));
  assert.equal(r, FORBIDDEN);
});

Deno.test("authenticated routes: a dead token answers 503 (the token itself tells the daemon to stop)", async () => {
  const { deps } = fakes();
  deps.token.sign = () => Promise.reject(deviceRemoved());
  const r = await authenticatedHandler(deps)(req("/sign", [A, ["X-SVC-Key", "k"]], "m"));
  assert.equal(r.status, 503);
  assert.match(String(r.body), /token is unusable/);
});

Deno.test("authenticated routes: /token lists an unusable key with why; any other failure is a 500, not a key entry", async () => {
  const { deps } = fakes();
  deps.token.key = (label) =>
    label === "ghost"
      ? Promise.reject(new KeyUnusableError("ghost", "missing-public-key", "no public key"))
      : Promise.resolve(undefined);
  const listed = await authenticatedHandler(deps)(req("/token", [A], "", "GET"));
  assert.equal(listed.status, 200);
  const body = JSON.parse(new TextDecoder().decode(listed.body as Uint8Array));
  assert.deepEqual(body.keys, [{ label: "ghost", error: "no public key" }]);

  deps.token.key = () => Promise.reject(new TypeError("a bug, not a key"));
  const failed = await authenticatedHandler(deps)(req("/token", [A], "", "GET"));
  assert.equal(failed.status, 500);
});

Deno.test("authenticated routes: /token states the listener's body limit as max_body, when it has one", async () => {
  const read = async (over: Partial<AuthenticatedDeps>) => {
    const r = await authenticatedHandler(fakes(over).deps)(req("/token", [A], "", "GET"));
    assert.equal(r.status, 200);
    return JSON.parse(new TextDecoder().decode(r.body as Uint8Array));
  };
  assert.equal((await read({ maxBody: 4096 })).max_body, 4096);
  assert.ok(!("max_body" in await read({})), "no limit given: no field, not a guess");
});

Deno.test("authenticated routes: /verify splits signature and message by the length header", async () => {
  const { deps } = fakes();
  const h = authenticatedHandler(deps);
  const ok = await h(
    req("/verify", [A, ["X-SVC-Key", "k"], ["X-SVC-Signature-Length", "3"]], "cbaabc"),
  );
  assert.equal(ok.status, 200);
  const bad = await h(
    req("/verify", [A, ["X-SVC-Key", "k"], ["X-SVC-Signature-Length", "3"]], "cbxabc"),
  );
  assert.equal(bad.status, 422);
  const twice = await h(req("/verify", [
    A,
    ["X-SVC-Key", "k"],
    ["X-SVC-Signature-Length", "3"],
    ["x-svc-signature-length", "3"],
  ], "cbaabc"));
  assert.equal(twice.status, 400);
});

Deno.test("authenticated routes: /health and /token answer only subjects the policy knows", async () => {
  const { deps, calls } = fakes();
  const h = authenticatedHandler(deps);
  const stranger: [string, string] = ["X-SVC-Client-Subject", "CN=stranger"];
  assert.equal(await h(req("/health", [stranger], "", "GET")), FORBIDDEN);
  assert.equal(await h(req("/token", [stranger], "", "GET")), FORBIDDEN);
  assert.ok(!calls.some((c) => c.startsWith("token.")), calls.join());
  assert.equal((await h(req("/health", [A], "", "GET"))).status, 200);
});

Deno.test("authenticated routes: /health asks the token live; a dead token answers 503", async () => {
  const { deps } = fakes();
  deps.token.loggedIn = () => Promise.reject(deviceRemoved());
  const r = await authenticatedHandler(deps)(req("/health", [A], "", "GET"));
  assert.equal(r.status, 503);
});

Deno.test("authenticated routes: /health is 503 when the session is no longer logged in", async () => {
  const { deps } = fakes();
  deps.token.loggedIn = () => Promise.resolve(false);
  const r = await authenticatedHandler(deps)(req("/health", [A], "", "GET"));
  assert.equal(r.status, 503);
});

Deno.test("authenticated routes: the audit keys are never signed, verified or listed with, whatever the policy grants", async () => {
  const { deps, calls } = fakes();
  const audit = ["svc-audit", "svc-audit-sign"];
  deps.policy = () => ({ allows: () => true, labelsFor: () => ["k", ...audit] });
  const h = authenticatedHandler(deps);
  for (const label of audit) {
    assert.equal(await h(req("/sign", [A, ["X-SVC-Key", label]], "m")), FORBIDDEN);
    const verify = await h(
      req("/verify", [A, ["X-SVC-Key", label], ["X-SVC-Signature-Length", "1"]], "mm"),
    );
    assert.equal(verify, FORBIDDEN);
  }
  const listed = await h(req("/token", [A], "", "GET"));
  const body = JSON.parse(new TextDecoder().decode(listed.body as Uint8Array));
  assert.deepEqual(body.keys.map((k: { label: string }) => k.label), ["k"]);
  assert.deepEqual(calls.filter((c) => c.startsWith("token.")), ["token.key k"]);
});

Deno.test("authenticated routes: before 100 Continue, the head alone is refused for route, identity, grant, budget and cap", () => {
  const { deps, cap, calls } = fakes();
  let capFull = false;
  let held = 0;
  cap.tryAcquire = () => {
    if (capFull) return undefined;
    held++;
    return () => held--;
  };
  let refusals = 0;
  const record = deps.budget.recordRefusal;
  deps.budget.recordRefusal = (id) => (refusals++, record(id));
  const continueCheck = authenticatedContinueCheck(deps);
  const head = (path: string, headers: Array<[string, string]>, method = "POST") => {
    const { body: _body, id: _id, ...rest } = req(path, headers, "", method);
    return continueCheck(rest)?.status;
  };
  const K: [string, string] = ["X-SVC-Key", "k"];
  assert.equal(head("/nowhere", [A, K]), 404);
  assert.equal(head("/ocsp", [A]), 404);
  assert.equal(head("/health", [A], "POST"), 405);
  assert.equal(head("/sign", [K]), 400, "no identity");
  assert.equal(head("/sign", [A]), 400, "no key named");
  assert.equal(head("/sign", [["X-SVC-Client-Subject", "CN=b"], K]), 403, "not granted");
  assert.equal(head("/verify", [A, ["X-SVC-Key", "svc-audit"]]), 403, "a daemon key");
  assert.equal(refusals, 3, "the grant refusals count toward the budget, as after the body");
  assert.equal(head("/sign", [["X-SVC-Client-Subject", "CN=limited"], K]), 429);
  assert.equal(head("/sign", [A, K]), undefined, "granted: the body may come");
  assert.equal(head("/verify", [A, K]), undefined);
  assert.equal(head("/health", [A], "GET"), undefined);
  assert.equal(held, 0, "the admission check holds no concurrency slot");
  capFull = true;
  assert.equal(head("/sign", [A, K]), 429);
  assert.ok(!calls.some((c) => c.startsWith("token.")), "the token is never asked before the body");
});

Deno.test("authenticated routes: HEAD is GET without the body (the listener drops it); 405s name GET, HEAD", async () => {
  const { deps } = fakes();
  const h = authenticatedHandler(deps);
  const get = await h(req("/health", [A], "", "GET"));
  const head = await h(req("/health", [A], "", "HEAD"));
  assert.equal(head.status, 200);
  assert.deepEqual(head.headers, get.headers);
  assert.equal((await h(req("/token", [A], "", "HEAD"))).status, 200);
  const post = await h(req("/health", [A], "", "POST"));
  assert.equal(post.status, 405);
  assert.deepEqual(post.headers?.find(([n]) => n === "Allow"), ["Allow", "GET, HEAD"]);
  const headSign = await h(req("/sign", [A, ["X-SVC-Key", "k"]], "", "HEAD"));
  assert.equal(headSign.status, 405, "HEAD of a POST-only route");
  assert.deepEqual(headSign.headers?.find(([n]) => n === "Allow"), ["Allow", "POST"]);
});

Deno.test("authenticated routes: the public routes' 404 links to --public-url, else to http:// and a plain Host", async () => {
  const link = async (over: Partial<AuthenticatedDeps>, host: string, path: string) => {
    const { deps } = fakes(over);
    const r = await authenticatedHandler(deps)(req(path, [["Host", host], A], "", "GET"));
    assert.equal(r.status, 404);
    return r.headers?.find(([n]) => n === "Link")?.[1];
  };
  const rel = '; rel="alternate"; title="public listener"';
  assert.equal(
    await link({ publicUrl: "http://ocsp.example.org" }, "sign.example.org", "/ocsp"),
    `<http://ocsp.example.org/ocsp>${rel}`,
  );
  assert.equal(
    await link({}, "sign.example.org:443", "/certificates"),
    `<http://sign.example.org/certificates>${rel}`,
  );
  // A Host that is not a plain name never reaches the header: the path alone.
  assert.equal(await link({}, "evil.example>; rel=x, <http://x", "/ocsp"), `</ocsp>${rel}`);
});
