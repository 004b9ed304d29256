/**
 * svcd's metrics, declared once (every isolate loads this module, so slots agree; see
 * ./registry.ts), and the small functions the daemon calls where requests and answers happen.
 * Label values are closed sets: routes, statuses, key types from the token, never a client's
 * subject or a key label a client sent.
 *
 * @example
 * ```ts
 * countResponse("authenticated", "/sign", 200);
 * ```
 */
import { KEY_TYPE_NAMES } from "../token/mod.ts";
import type { ListenerEvent } from "../http/mod.ts";
import { MetricsRegistry } from "./registry.ts";
import { declareProcessMetrics } from "./process.ts";

/** The registry of this isolate. */
export const metrics: MetricsRegistry = new MetricsRegistry();

const LISTENERS = ["authenticated", "public"];
/** RFC 6960 OCSPResponseStatus names, snake_case. */
const OCSP_RESPONSE_STATUSES = [
  "successful",
  "malformed_request",
  "internal_error",
  "try_later",
  "unauthorized",
];
/** Routes as label values; any other path counts as `other`. */
const ROUTES = ["/sign", "/verify", "/health", "/token", "/certificates", "/ocsp", "/crl"];
const STATUSES = [
  "200",
  "400",
  "401",
  "403",
  "404",
  "405",
  "408",
  "409",
  "411",
  "413",
  "415",
  "417",
  "422",
  "429",
  "431",
  "500",
  "501",
  "503",
  "505",
];

const requests = metrics.counter(
  "svcd_http_requests_total",
  "HTTP answers sent, by listener, route and status (the proxy's requests).",
  { listener: LISTENERS, route: ROUTES, status: STATUSES },
);
const signSeconds = metrics.histogram(
  "svcd_sign_duration_seconds",
  "Time to answer POST /sign in the handler (policy, token, audit line durable).",
  [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
);
const signatures = metrics.counter(
  "svcd_signatures_total",
  "Signatures returned, by key type and mode (message: the daemon hashes; digest: the client did).",
  { key_type: KEY_TYPE_NAMES, mode: ["message", "digest"] },
);
const auditGroupLines = metrics.histogram(
  "svcd_audit_group_lines",
  "Audit lines made durable by one group commit (one seal, one fdatasync).",
  [1, 2, 4, 8, 16, 32, 64, 128, 256],
);
const auditSyncSeconds = metrics.histogram(
  "svcd_audit_fdatasync_duration_seconds",
  "fdatasync time of one audit group commit.",
  [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
);
const auditFailures = metrics.counter(
  "svcd_audit_write_failures_total",
  "Audit groups that could not be sealed, written or synced (their lines were refused: 503).",
);
const checkpointCopies = metrics.counter(
  "svcd_audit_checkpoint_copies_total",
  "Checkpoint lines copied to syslog, by result.",
  { result: ["sent", "dropped"] },
);
const acceptorHeld = metrics.gauge(
  "svcd_acceptor_held_connections",
  "Connections held before a handler takes them (silent, reading or queued), by listener.",
  { listener: LISTENERS },
);
const acceptorFull = metrics.counter(
  "svcd_acceptor_queue_full_total",
  "Connections answered 503 at once because the listener held --queue-depth already.",
  { listener: LISTENERS },
);
const deadlineDrops = metrics.counter(
  "svcd_deadline_drops_total",
  "Connections closed by a deadline, by listener and phase.",
  { listener: LISTENERS, phase: ["first_byte", "request", "write"] },
);
const budgetCrossings = metrics.counter(
  "svcd_refusal_budget_crossings_total",
  "Times an identity's refusals crossed the budget threshold (it is delayed from then on).",
);
const policyReloads = metrics.counter(
  "svcd_policy_reloads_total",
  "Policy reloads (SIGHUP), by result.",
  { result: ["ok", "failed"] },
);
const sessionsInUse = metrics.gauge(
  "svcd_token_sessions_in_use",
  "Token sessions lent out to operations (every isolate's pool).",
);
const sessionsMax = metrics.gauge(
  "svcd_token_sessions_max",
  "Cap of the token session pools (every isolate's pool).",
);
const throttled = metrics.counter(
  "svcd_throttled_total",
  "429 answers, by reason (budget: the identity's refusals crossed the budget; cap: it had --workers − 1 requests in flight).",
  { reason: ["budget", "cap"] },
);
const tokenPresent = metrics.gauge(
  "svcd_token_present",
  "1 when the token answers C_GetTokenInfo, else 0 (sampled when scraped).",
);
const tokenLoggedIn = metrics.gauge(
  "svcd_token_logged_in",
  "1 when a session of the token is in a user state, else 0 (sampled when scraped).",
);
const ocspResponses = metrics.counter(
  "svcd_ocsp_responses_total",
  "OCSP responses, by response status (successful: signed; the others are unsigned errors).",
  { status: OCSP_RESPONSE_STATUSES },
);
const ocspCertStatuses = metrics.counter(
  "svcd_ocsp_certificate_statuses_total",
  "Certificate statuses given in successful OCSP responses (one per CertID).",
  { status: ["good", "revoked", "unknown"] },
);
const ocspCacheHits = metrics.counter(
  "svcd_ocsp_cache_hits_total",
  "OCSP requests without a nonce answered from a cached signed response.",
);
const ocspCacheMisses = metrics.counter(
  "svcd_ocsp_cache_misses_total",
  "OCSP requests without a nonce that needed a new signature (absent, stale or dropped).",
);
const revocationLoads = metrics.counter(
  "svcd_revocation_database_loads_total",
  "Reads of the revocation database (index.txt) after it changed, by result (failed: unreadable, unparseable or over --ocsp-max-entries; answers are tryLater until it loads).",
  { result: ["ok", "failed"] },
);
const crlSigned = metrics.counter(
  "svcd_crl_signed_total",
  "CRLs signed and written to the CRL folder (--ca-dir): after a change of their entries, or at half their validity.",
);
const crlFailures = metrics.counter(
  "svcd_crl_failures_total",
  "Rounds that left the CRLs as they were, by stage (index: the database could not be read; sign: the token did not sign; write: the CRL folder could not be written; number: no cRLNumber could be taken). The last good CRLs are served until their nextUpdate.",
  { stage: ["index", "sign", "write", "number"] },
);
declareProcessMetrics(metrics);

const SIGN_SLOT = signSeconds.slot();
const GROUP_SLOT = auditGroupLines.slot();
const SYNC_SLOT = auditSyncSeconds.slot();
const FAILURE_SLOT = auditFailures.slot();
const SENT_SLOT = checkpointCopies.slot("sent");
const DROPPED_SLOT = checkpointCopies.slot("dropped");
const CROSSING_SLOT = budgetCrossings.slot();
const THROTTLED_BUDGET_SLOT = throttled.slot("budget");
const THROTTLED_CAP_SLOT = throttled.slot("cap");
const CACHE_HIT_SLOT = ocspCacheHits.slot();
const CACHE_MISS_SLOT = ocspCacheMisses.slot();
/** Status slots of the /sign route, found once: the hot path does one array write. */
const signStatus = new Map<string, number[]>(
  LISTENERS.map((l) => [l, STATUSES.map((s) => requests.slot(l, "/sign", s))]),
);

/** The route label of a path: a known route (or a sub-path of /ocsp), else `other`. */
export function routeLabel(path: string): string {
  if (ROUTES.includes(path)) return path;
  if (path.startsWith("/crl/")) return "/crl";
  return path.startsWith("/ocsp/") ? "/ocsp" : "other";
}

/**
 * Counts one answer.
 * @example countResponse("authenticated", "/sign", 200)
 */
export function countResponse(listener: string, path: string, status: number): void {
  if (path === "/sign") {
    const i = STATUSES.indexOf(String(status));
    const slots = signStatus.get(listener);
    if (slots && i >= 0) return requests.inc(slots[i]);
  }
  requests.inc(requests.slot(listener, routeLabel(path), String(status)));
}

/** Records one /sign: its time and, when it returned a signature, key type and mode. */
export function countSign(seconds: number, keyType: string | undefined, digest: boolean): void {
  signSeconds.observe(SIGN_SLOT, seconds);
  if (keyType !== undefined) {
    signatures.inc(signatures.slot(keyType, digest ? "digest" : "message"));
  }
}

/** Counts a listener event that answers or drops a connection (503 queue full, deadlines, parse errors). */
export function countListenerEvent(listener: string, event: ListenerEvent): void {
  if (event.kind === "queue_full") {
    acceptorFull.inc(acceptorFull.slot(listener));
    countResponse(listener, "", 503);
  } else if (event.kind === "deadline") {
    deadlineDrops.inc(deadlineDrops.slot(listener, event.phase));
  } else if (event.kind === "parse_error") countResponse(listener, "", event.status);
  else if (event.kind === "handler_error") countResponse(listener, "", 500);
}

/** The audit log's observations (lib/audit/observers.ts). */
export const auditMetrics = {
  groupCommitted(lines: number, syncSeconds: number): void {
    auditGroupLines.observe(GROUP_SLOT, lines);
    auditSyncSeconds.observe(SYNC_SLOT, syncSeconds);
  },
  writeFailed(): void {
    auditFailures.inc(FAILURE_SLOT);
  },
  checkpointCopied(sent: boolean): void {
    checkpointCopies.inc(sent ? SENT_SLOT : DROPPED_SLOT);
  },
};

/** An identity crossed its refusal budget. */
export function countBudgetCrossing(): void {
  budgetCrossings.inc(CROSSING_SLOT);
}

/** A policy reload finished. */
export function countPolicyReload(ok: boolean): void {
  policyReloads.inc(policyReloads.slot(ok ? "ok" : "failed"));
}

/** This isolate's gauges: the connections its listener holds and its session pool. */
export function setIsolateGauges(
  listener: string,
  held: number,
  pool: { inUse: number; cap: number } | undefined,
): void {
  acceptorHeld.set(acceptorHeld.slot(listener), held);
  if (pool) {
    sessionsInUse.set(sessionsInUse.slot(), pool.inUse);
    sessionsMax.set(sessionsMax.slot(), pool.cap);
  }
}

/** A 429: the refusal budget (`limited`) or the concurrency cap (`capped`). */
export function countThrottled(reason: "budget" | "cap"): void {
  throttled.inc(reason === "budget" ? THROTTLED_BUDGET_SLOT : THROTTLED_CAP_SLOT);
}

/** The token's state as last sampled (main isolate only: one region holds it). */
export function setTokenState(present: boolean, loggedIn: boolean): void {
  tokenPresent.set(tokenPresent.slot(), present ? 1 : 0);
  tokenLoggedIn.set(tokenLoggedIn.slot(), loggedIn ? 1 : 0);
}

/** The OCSP responder's observations (lib/ocsp Responder's `observer`). */
export const ocspMetrics = {
  answered(status: string, certStatuses: readonly string[]): void {
    ocspResponses.inc(ocspResponses.slot(status));
    for (const s of certStatuses) ocspCertStatuses.inc(ocspCertStatuses.slot(s));
  },
  cacheLookup(hit: boolean): void {
    (hit ? ocspCacheHits : ocspCacheMisses).inc(hit ? CACHE_HIT_SLOT : CACHE_MISS_SLOT);
  },
};

/** The revocation database was read after a change (lib/ocsp IndexFileSource's `onLoad`). */
export function countRevocationLoad(ok: boolean): void {
  revocationLoads.inc(revocationLoads.slot(ok ? "ok" : "failed"));
}

/** The CRL keeper's observations (lib/ca CrlKeeper's `onSigned` and `onFailure`). */
export const crlMetrics = {
  signed(count: number): void {
    crlSigned.inc(crlSigned.slot(), count);
  },
  failed(stage: "index" | "sign" | "write" | "number"): void {
    crlFailures.inc(crlFailures.slot(stage));
  },
};
