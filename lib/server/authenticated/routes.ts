/**
 * The routes of the authenticated socket: identity, refusal budget, concurrency cap and policy are
 * decided here, in that order, before any PKCS#11 call; then the token signs or verifies and, for a
 * signature, the audit line is made durable before the answer is released.
 */
import { createHash } from "node:crypto";
import type { ContinueCheck, HttpRequest, HttpResponse, RequestHead } from "../../http/mod.ts";
import { allowOf, problem, routeFor, singleHeader, utf8FromLatin1 } from "../../http/mod.ts";
import {
  DAEMON_KEY_LABELS,
  type DigestName,
  isKeyProblem,
  isTokenDead,
  KeyUnusableError,
} from "../../token/mod.ts";
import { clientIdentity } from "./identity.ts";
import { clientText } from "../log.ts";
import type { Admission, AdmissionAnswer } from "./admission.ts";
import { digestRequest } from "./digest_request.ts";
import { countThrottled } from "../../metrics/svcd.ts";
import { keyCertificate, RefusalNotes } from "./key_certificate.ts";

/** The signing key as the routes see it (a subset of lib/token's SigningKey). */
export interface RouteKey {
  label: string;
  keyType: string;
  mechanism: string;
  publicKeyRaw: Uint8Array;
  publicKeySpki?: Uint8Array;
  /** Digest names it takes in digest mode (X-SVC-Digest) with this module; may be empty. */
  digests: readonly DigestName[];
}

/**
 * What the authenticated routes need from the rest of the daemon; each part is a lib/
 * responsibility. Both thread modes build it with `authenticatedDeps` (./deps.ts): the isolate's
 * own token and policy, and the main isolate's audit log, budget and cap (./main_services.ts).
 * `K` is the token's own key type: the key a route got from `key` goes back to `sign` as it is.
 */
export interface AuthenticatedDeps<K extends RouteKey = RouteKey> {
  token: {
    key(label: string): Promise<K | undefined>;
    /**
     * With `digest`, `message` is that digest of the message (digest mode). Resolves with the
     * signature and the mechanism that made it, by name.
     */
    sign(
      key: K,
      message: Uint8Array,
      digest?: DigestName,
    ): Promise<{ signature: Uint8Array; mechanism: string }>;
    verify(
      key: K,
      message: Uint8Array,
      signature: Uint8Array,
      digest?: DigestName,
    ): Promise<boolean>;
    /**
     * The DER of the certificate objects stored for the key (by its CKA_ID), read afresh; whether
     * one is the key's is checked here. Absent: keys are listed without certificates.
     */
    certificates?(key: K): Promise<Uint8Array[]>;
    info(): Record<string, unknown>;
    loggedIn(): Promise<boolean>;
    poolStats(): { size: number; inUse: number; waiting: number; cap: number };
    /**
     * Drops keys whose token object is gone; their labels (checked at each /health). Asynchronous
     * where other isolates hold copies of their own (request threads: every one checks).
     */
    dropRemovedKeys?(): string[] | Promise<string[]>;
  };
  policy(): {
    allows(subject: string, label: string): boolean;
    labelsFor(subject: string): string[];
  };
  audit: {
    append(event: string, actor: string, fields?: Record<string, unknown>): Promise<number>;
    readonly healthy: boolean;
    readonly lastError: string | undefined;
    /** The log's counters; undefined when it keeps none. */
    stats?(): { lines: number; syncs: number; maxGroup: number; seals: number } | undefined;
  };
  /** The refusal budget's bookkeeping; its check is part of {@link admission}. */
  budget: {
    recordRefusal(identity: string): { count: number; crossed: boolean; delaySeconds: number };
    limitedCount(): number;
  };
  /** The refusal budget's check and the concurrency cap's slot (./admission.ts). */
  admission: Admission;
  /**
   * Base URL of the public side behind the proxy, named in the Link header of the 404 for its
   * routes; undefined: `http://` and the request's Host (the shipped nginx example serves the
   * public routes on port 80 of the same name).
   */
  publicUrl?: string;
  /**
   * The largest /sign or /verify body the listener takes (`--max-body`), stated by GET /token as
   * `max_body` so that a client refuses a larger message before sending it; undefined: not stated.
   */
  maxBody?: number;
  /**
   * The CA certificates (PEM or DER) the chains GET /token states are built from (`--ca-cert`),
   * read when a key has a certificate; undefined when there are none to read.
   */
  readCaCertificates?(): Uint8Array | undefined;
  log(message: string): void;
  startedAt: number;
}

const te = new TextEncoder();

/**
 * The one answer for a key that is not granted, does not exist, or a subject the policy does not
 * know: a constant, so the three cannot differ by a byte and a client cannot tell them apart.
 */
export const FORBIDDEN: Readonly<HttpResponse> = Object.freeze(problem(
  403,
  "Forbidden",
  "The key is not available to this client.",
));

type Route = <K extends RouteKey>(
  req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps<K>,
) => Promise<HttpResponse>;

/** Routes of the authenticated socket: method → path → function. */
const ROUTES: Record<string, Record<string, Route>> = {
  "/sign": { POST: signRoute },
  "/verify": { POST: verifyRoute },
  "/health": { GET: healthRoute },
  "/token": { GET: tokenRoute },
};

/** Routes whose key grant is known from the head: checked before `100 Continue`. */
const GRANT_CHECKED: ReadonlySet<Route> = new Set([signRoute, verifyRoute]);

/** Paths served only by the public listener: 404 with a Link header to it, any method. */
const PUBLIC_ONLY = new Set(["/certificates", "/ocsp"]);

/** Builds the handler of the authenticated listener: a request with its body, to its answer. */
export function authenticatedHandler<K extends RouteKey>(
  deps: AuthenticatedDeps<K>,
): (req: HttpRequest) => Promise<HttpResponse> {
  return (req) => handle(req, deps);
}

/**
 * Builds the `100 Continue` check of the authenticated listener: for a request that asked for it,
 * the answer it would get from its head alone (route, method, identity, refusal budget,
 * concurrency, and for /sign and /verify the key's grant), or undefined to let the body come. The
 * handler checks all of it again with the body.
 */
export function authenticatedContinueCheck(deps: AuthenticatedDeps): ContinueCheck {
  return (head) => {
    const routed = routeAndIdentity(head, deps);
    if ("response" in routed) return routed.response;
    const answer = deps.admission.peek(routed.subject);
    if (answer.kind !== "admitted") return tooMany(answer);
    if (!GRANT_CHECKED.has(routed.route)) return undefined;
    const label = grantedLabel(head, routed.subject, deps);
    if (typeof label === "string") return undefined;
    void countRefusal(routed.subject, deps);
    return label;
  };
}

/** The route and the identity of a request, or the answer when it has none. */
function routeAndIdentity(
  head: RequestHead,
  deps: AuthenticatedDeps,
): { response: HttpResponse } | { route: Route; subject: string } {
  const refuse = (response: HttpResponse) => ({ response });
  if (PUBLIC_ONLY.has(head.path)) return refuse(publicOnly(head, deps));
  const methods = ROUTES[head.path];
  if (!methods) return refuse(problem(404, "Not Found", `No route ${head.path} on this socket.`));
  const route = routeFor(methods, head.method);
  if (!route) {
    return refuse(
      problem(405, "Method Not Allowed", `${head.path} accepts ${allowOf(methods)}.`, [
        ["Allow", allowOf(methods)],
      ]),
    );
  }
  const identity = clientIdentity(head.headers);
  if (!identity.ok) return refuse(identityRefusal(identity.reason));
  return { route, subject: identity.subject };
}

/** The 429 of the refusal budget or of the concurrency cap. */
function tooMany(answer: Exclude<AdmissionAnswer, { kind: "admitted" }>): HttpResponse {
  countThrottled(answer.kind === "limited" ? "budget" : "cap");
  if (answer.kind === "limited") {
    return problem(429, "Too Many Requests", "Too many refused requests from this client.", [
      ["Retry-After", String(answer.retryAfterSeconds)],
    ]);
  }
  return problem(429, "Too Many Requests", "Too many concurrent requests from this client.", [
    ["Retry-After", "1"],
  ]);
}

/** Route, identity and admission first, then the route; the slot is held until the answer. */
async function handle<K extends RouteKey>(
  req: HttpRequest,
  deps: AuthenticatedDeps<K>,
): Promise<HttpResponse> {
  const routed = routeAndIdentity(req, deps);
  if ("response" in routed) return routed.response;
  const { route, subject } = routed;
  const taken = deps.admission.admit(subject);
  // In this thread the answer is at hand: no extra turn of the event loop per request.
  const admitted = taken instanceof Promise ? await taken : taken;
  if (admitted.kind !== "admitted") return tooMany(admitted);
  try {
    const res = await route(req, subject, deps);
    if (res.status === 403 || res.status === 400) await countRefusal(subject, deps);
    return res;
  } catch (err) {
    return failure(err, req, deps);
  } finally {
    admitted.release();
  }
}

/**
 * The 404 for a public route, with a Link a client behind the proxy can follow: the
 * public side's URL (--public-url), else http:// and the request's Host when it is a plain host
 * name, else the path alone.
 */
function publicOnly(head: RequestHead, deps: AuthenticatedDeps): HttpResponse {
  const host = singleHeader(head.headers, "host")?.replace(/:\d{1,5}$/, "");
  const base = deps.publicUrl ?? (host && PLAIN_HOST.test(host) ? `http://${host}` : "");
  return problem(404, "Not Found", "This route is served by the public listener.", [
    ["Link", `<${base}${head.path}>; rel="alternate"; title="public listener"`],
  ]);
}

/** A DNS name or IPv4 address, nothing a header or a URL could be bent with. */
const PLAIN_HOST = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;

function identityRefusal(reason: "missing" | "empty" | "duplicate"): HttpResponse {
  const detail = reason === "duplicate"
    ? "More than one X-SVC-Client-Subject header arrived; the proxy must replace the client's header, not add to it."
    : "No client identity: the proxy must set X-SVC-Client-Subject.";
  return problem(400, "Bad Request", detail);
}

async function countRefusal(subject: string, deps: AuthenticatedDeps): Promise<void> {
  const { crossed, count, delaySeconds } = deps.budget.recordRefusal(subject);
  if (!crossed) return;
  try {
    await deps.audit.append("identity_limited", subject, { count, delay_seconds: delaySeconds });
  } catch (err) {
    deps.log(`audit: identity_limited line not written: ${(err as Error).message}`);
  }
}

/** An error a route did not answer itself; a dead token is the token's to report (Token.onDead). */
function failure(err: unknown, req: HttpRequest, deps: AuthenticatedDeps): HttpResponse {
  // The key was deleted from the token between the grant check and the signature: as if absent.
  if (err instanceof KeyUnusableError && err.reason === "gone") return FORBIDDEN;
  if (isTokenDead(err)) {
    return problem(503, "Service Unavailable", "The token is unusable; the daemon is restarting.", [
      ["Retry-After", "5"],
    ]);
  }
  if (err instanceof AuditBarrierError) {
    return problem(
      503,
      "Service Unavailable",
      "The audit log cannot be written; no signature was released.",
      [
        ["Retry-After", "5"],
      ],
    );
  }
  deps.log(
    `request ${req.id} ${clientText(req.method)} ${clientText(req.path)} failed: ${
      (err as Error).message
    }`,
  );
  return problem(500, "Internal Server Error", `Request ${req.id} failed; see the daemon's log.`);
}

/** The audit write of a signature failed: the signature is withheld. */
class AuditBarrierError extends Error {
  override name = "AuditBarrierError";
}

/** The request's key label if the policy grants it to the subject; else 400 or the constant 403. */
function grantedLabel(
  head: RequestHead,
  subject: string,
  deps: AuthenticatedDeps,
): string | HttpResponse {
  const label = singleHeader(head.headers, "x-svc-key");
  if (label === null) return problem(400, "Bad Request", "More than one X-SVC-Key header.");
  if (label === undefined || label === "") {
    return problem(400, "Bad Request", "The X-SVC-Key header names the key and is required.");
  }
  // The policy decides before any PKCS#11 call: an unknown subject or an ungranted label never
  // reaches the token, and a granted label that names no key gets the same bytes. The daemon's own
  // keys are never a client's, whatever the policy in force says.
  if (DAEMON_KEY_LABELS.has(label) || !deps.policy().allows(subject, label)) return FORBIDDEN;
  return label;
}

/** Key label of a request, and the key, if the subject may use it; else 400 or the constant 403. */
async function authorisedKey<K extends RouteKey>(
  req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps<K>,
): Promise<K | HttpResponse> {
  const label = grantedLabel(req, subject, deps);
  if (typeof label !== "string") return label;
  return await keyByHeaderLabel(label, deps) ?? FORBIDDEN;
}

/**
 * Header values and policy entries are latin1 strings (one char per byte, compared byte for byte);
 * the token's labels are UTF-8 (CKA_LABEL). A label whose bytes are not UTF-8 names no key.
 */
async function keyByHeaderLabel<K extends RouteKey>(
  label: string,
  deps: AuthenticatedDeps<K>,
): Promise<K | undefined> {
  const utf8 = utf8FromLatin1(label);
  return utf8 === undefined ? undefined : await deps.token.key(utf8);
}

function isResponse<K extends RouteKey>(x: K | HttpResponse): x is HttpResponse {
  return (x as HttpResponse).status !== undefined;
}

async function signRoute<K extends RouteKey>(
  req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps<K>,
): Promise<HttpResponse> {
  const key = await authorisedKey(req, subject, deps);
  if (isResponse(key)) return key;
  const asked = digestRequest(req.headers, key, req.body);
  if ("status" in asked) return asked;
  const { digest } = asked;
  if (!deps.audit.healthy) {
    return problem(
      503,
      "Service Unavailable",
      "The audit log cannot be written; signing is stopped.",
      [
        ["Retry-After", "5"],
      ],
    );
  }
  const { signature, mechanism } = await deps.token.sign(key, req.body, digest);
  try {
    await deps.audit.append("sign", subject, {
      key: key.label,
      mechanism,
      ...(digest ? digestAuditFields(digest, req.body) : { message_sha256: sha256Hex(req.body) }),
      signature_sha256: sha256Hex(signature),
      request_id: req.id,
    });
  } catch (err) {
    throw new AuditBarrierError((err as Error).message);
  }
  const headers: [string, string][] = [
    ["Content-Type", "application/octet-stream"],
    ["X-SVC-Mechanism", mechanism],
    ["X-SVC-Key-Type", key.keyType],
  ];
  if (digest) headers.push(["X-SVC-Digest", digest]);
  return { status: 200, headers, body: signature };
}

/**
 * A digest signature's audit fields: the mode, the digest's name and the digest as sent, so an
 * auditor matches the line to the artifact by its hash.
 */
function digestAuditFields(digest: DigestName, value: Uint8Array): Record<string, string> {
  return { mode: "digest", digest, digest_value: value.toHex() };
}

/** Largest signature any supported key type produces (ML-DSA-87: 4627 bytes) with headroom. */
const MAX_SIGNATURE_BYTES = 16384;

async function verifyRoute<K extends RouteKey>(
  req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps<K>,
): Promise<HttpResponse> {
  const length = signatureLength(req);
  if (typeof length !== "number") return length;
  const key = await authorisedKey(req, subject, deps);
  if (isResponse(key)) return key;
  const signature = req.body.subarray(0, length);
  const message = req.body.subarray(length);
  const asked = digestRequest(req.headers, key, message);
  if ("status" in asked) return asked;
  const valid = await deps.token.verify(key, message, signature, asked.digest);
  if (!valid) return problem(422, "Unprocessable Content", "The signature is not valid.");
  return { status: 200, headers: [["Content-Type", "text/plain"]], body: "valid\n" };
}

function signatureLength(req: HttpRequest): number | HttpResponse {
  const raw = singleHeader(req.headers, "x-svc-signature-length");
  const bad = (why: string) => problem(400, "Bad Request", `X-SVC-Signature-Length ${why}.`);
  if (raw === null) return bad("appears more than once");
  if (raw === undefined) return bad("is required: the decimal byte length of the signature");
  if (!/^[0-9]{1,6}$/.test(raw)) return bad("must be a decimal byte count");
  const n = Number(raw);
  if (n === 0 || n > MAX_SIGNATURE_BYTES) return bad(`must be from 1 to ${MAX_SIGNATURE_BYTES}`);
  if (n > req.body.length) return bad("is larger than the body");
  return n;
}

async function healthRoute(
  _req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps,
): Promise<HttpResponse> {
  if (!knownToPolicy(subject, deps)) return FORBIDDEN;
  const dropped = await deps.token.dropRemovedKeys?.() ?? [];
  if (dropped.length > 0) {
    deps.log(`keys: ${dropped.join(", ")} no longer on the token: no longer used`);
  }
  const token = await tokenHealth(deps);
  const ok = token.logged_in === true && deps.audit.healthy;
  return json(ok ? 200 : 503, {
    status: ok ? "ok" : "unavailable",
    token,
    pool: deps.token.poolStats(),
    audit: {
      writable: deps.audit.healthy,
      error: deps.audit.lastError ?? null,
      ...(deps.audit.stats?.() ?? {}),
    },
    limited_identities: deps.budget.limitedCount(),
    uptime_seconds: Math.floor((Date.now() - deps.startedAt) / 1000),
  });
}

/**
 * Live token state: C_GetTokenInfo and a pooled session's login state. When
 * every session is lent out the session check is skipped rather than queued behind the signers
 * (/health must answer under load): those busy sessions would themselves report a lost login.
 */
async function tokenHealth(deps: AuthenticatedDeps): Promise<Record<string, unknown>> {
  try {
    const info = deps.token.info();
    const pool = deps.token.poolStats();
    if (pool.size > 0 && pool.inUse >= pool.cap) {
      return {
        present: true,
        logged_in: true,
        label: info.label,
        session_check: "skipped: all busy",
      };
    }
    return { present: true, logged_in: await deps.token.loggedIn(), label: info.label };
  } catch (err) {
    return { present: false, logged_in: false, error: (err as Error).message };
  }
}

/** /health and /token answer only subjects the policy knows; others get the one 403. */
function knownToPolicy(subject: string, deps: AuthenticatedDeps): boolean {
  return deps.policy().labelsFor(subject).length > 0;
}

async function tokenRoute<K extends RouteKey>(
  _req: HttpRequest,
  subject: string,
  deps: AuthenticatedDeps<K>,
): Promise<HttpResponse> {
  if (!knownToPolicy(subject, deps)) return FORBIDDEN;
  const keys = [];
  for (const label of deps.policy().labelsFor(subject)) {
    if (DAEMON_KEY_LABELS.has(label)) continue;
    let key: K | undefined;
    try {
      key = await keyByHeaderLabel(label, deps);
    } catch (err) {
      // One unusable key (a type or mechanism the module does not offer) does not hide the others.
      if (!isKeyProblem(err)) throw err;
      keys.push({ label: utf8FromLatin1(label) ?? label, error: err.message });
      continue;
    }
    if (!key) continue;
    keys.push({
      label: key.label,
      key_type: key.keyType,
      mechanism: key.mechanism,
      public_key: key.publicKeySpki ? key.publicKeySpki.toBase64() : null,
      public_key_raw: key.publicKeyRaw.toBase64(),
      digests: key.digests,
      ...await certificateMembers(key, deps),
    });
  }
  const limit = deps.maxBody === undefined ? {} : { max_body: deps.maxBody };
  return json(200, { token: deps.token.info(), ...limit, keys });
}

/** Each wrong certificate is told to the log at most once per key per interval. */
const refusalNotes = new RefusalNotes();

/**
 * GET /token's `certificate` and `chain` of a key (base64 DER), when the token holds a certificate
 * for it whose public key is the key's; else none, and the log says why a stored one was not used.
 */
async function certificateMembers<K extends RouteKey>(
  key: K,
  deps: AuthenticatedDeps<K>,
): Promise<{ certificate?: string; chain?: string[] }> {
  if (!deps.token.certificates || !key.publicKeySpki) return {};
  let stored: Uint8Array[];
  try {
    stored = await deps.token.certificates(key);
  } catch (err) {
    if (isTokenDead(err)) throw err;
    if (refusalNotes.due(key.label)) {
      deps.log(`key '${key.label}': its certificate cannot be read: ${(err as Error).message}`);
    }
    return {};
  }
  const found = keyCertificate(
    key.label,
    key.publicKeySpki,
    stored,
    () => deps.readCaCertificates?.(),
  );
  if ("certificate" in found) {
    return {
      certificate: found.certificate.toBase64(),
      chain: found.chain.map((der) => der.toBase64()),
    };
  }
  if (found.refused && refusalNotes.due(key.label)) deps.log(found.refused);
  return {};
}

function json(status: number, value: unknown): HttpResponse {
  return {
    status,
    headers: [["Content-Type", "application/json"]],
    body: te.encode(JSON.stringify(value) + "\n"),
  };
}

// node:crypto hashes synchronously; Web Crypto's digest is a round trip to the thread pool.
function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}
