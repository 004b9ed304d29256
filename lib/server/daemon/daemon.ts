/**
 * The daemon's life: start-up checks in the order that fails cheapest and never wastes a login,
 * one login, the audit file of this module opening, the listeners (the authenticated one in this
 * thread or in request threads, the public one in public threads), signals, and the stop. The
 * request path of both `--threads` settings is in ../README.md.
 */
import { Listener } from "../../http/mod.ts";
import { PolicyFile } from "../../policy/mod.ts";
import { ConcurrencyCap, RefusalBudget } from "../../throttle/mod.ts";
import { isTokenDead, Token } from "../../token/mod.ts";
import type { AuditHealth, PublicThreadSetup, ThreadTokenOptions } from "../threads/protocol.ts";
import {
  auditKeysFromToken,
  AuditLog,
  auditObservers,
  type AuditOptions,
} from "../../audit/mod.ts";
import { type PublicConfig, type ServeConfig, servedBy, type TokenConfig } from "./config.ts";
import { StartupError, startupFindings } from "./checks.ts";
import { MetricsListener } from "../../metrics/listener.ts";
import { countedListener, type MetricsShare, sampleGauges } from "../../metrics/observe.ts";
import {
  countBudgetCrossing,
  countListenerEvent,
  countPolicyReload,
  metrics,
  setTokenState,
} from "../../metrics/svcd.ts";

export { checkFileLimit, StartupError } from "./checks.ts";
import { DaemonLog, listenerEventText, pooledMessage } from "../log.ts";
import { authenticatedContinueCheck, authenticatedHandler } from "../authenticated/routes.ts";
import { authenticatedDeps } from "../authenticated/deps.ts";
import { servicesInThisThread } from "../authenticated/services_in_this_thread.ts";
import type { LocalMainServices } from "../authenticated/main_services.ts";
import { ServiceNotifier } from "./notify.ts";
import { coalesced } from "./coalesced.ts";
import { EXIT } from "../../cli/exit.ts";
import { PublicThreads, PublicThreadsError } from "../threads/public_threads.ts";
import type { IndexMemory } from "../../ocsp/mod.ts";
import { RequestThreads, RequestThreadsError } from "../threads/request_threads.ts";

/** Exit code when a listener's thread (public or request thread) failed at run time (EX_SOFTWARE). */
export const EXIT_LISTENER_FAILED = EXIT.listenerFailed;

/** Exit code when the token died under the daemon: the service manager restarts it. */
export const EXIT_TOKEN_DEAD = EXIT.tokenDead;

/** How long a stop waits for in-flight requests before it closes their connections. */
const STOP_GRACE_MS = 10_000;

/** After a dead token, long enough for in-flight requests to send their 503, no more. */
const DEAD_TOKEN_GRACE_MS = 1_000;

const daemonLog = new DaemonLog();

/**
 * Writes one line to the daemon's own log (stderr, read by journald), rate-limited per `kind` and
 * made safe by lib/server/log.ts; text from a client must already be quoted with `clientText`.
 */
export function log(message: string, kind = "daemon"): void {
  daemonLog.line(kind, message);
}

/**
 * Writes the counts of suppressed lines still pending (before the process exits).
 */
export function flushLog(): void {
  daemonLog.flush();
}

/**
 * Start-up checks shared by `serve` and `--check-config` (./checks.ts): warnings are
 * logged, fatal findings stop the start with every one of them. Returns the loaded policy and
 * the revocation database the check read.
 */
export async function checkConfig(
  config: ServeConfig,
): Promise<{ policy: PolicyFile; revocationMemory?: IndexMemory }> {
  const { policy, findings, revocationMemory } = await startupFindings(config);
  for (const f of findings) {
    if (!f.fatal) log(f.message, f.message.startsWith("policy:") ? "policy" : "check");
  }
  const fatal = findings.filter((f) => f.fatal).map((f) => f.message);
  if (fatal.length > 0 || !policy) throw new StartupError(fatal.join("\n"));
  return { policy, revocationMemory };
}

/** Reads the PIN, opens the module and logs in once; the PIN buffer is zeroized by login. */
async function openToken(config: TokenConfig): Promise<Token> {
  const pin = Token.readPinCredential(config.credentialsDir);
  let token: Token;
  try {
    token = Token.open({
      ...config,
      onPooled: (label) => log(pooledMessage(label, config.inlineSignLimitUs)),
    });
  } catch (err) {
    pin.fill(0);
    throw err;
  }
  try {
    await token.login(pin);
  } catch (err) {
    token.close();
    throw new StartupError(
      `login to token '${config.tokenLabel}' failed: ${(err as Error).message}; ` +
        "the daemon does not retry (a role locks after five failures): check the credential svc-pin",
    );
  }
  await token.signThreadStarted().catch((err) => {
    token.close();
    throw new StartupError(`${err.message}; reinstall the package, or serve with --threads 1`);
  });
  return token;
}

type Budget = Pick<RefusalBudget, "check" | "recordRefusal" | "limitedCount" | "close">;
type Audit =
  & Pick<AuditLog, "append" | "healthy" | "lastError" | "close">
  & Partial<Pick<AuditLog, "stats">>;

/**
 * A seam: replacements for parts of the daemon, for benchmarks that measure what a part costs
 * (bench/serve.ts) and for tests that hold a start-up step open
 * (tests/support/daemon_held_audit.ts). main.ts never passes it: the daemon runs with the real ones.
 */
export interface DaemonParts {
  openBudget?: (config: ServeConfig) => Budget;
  openAudit?: (
    config: ServeConfig,
    token: Token,
    onHealthChange: (health: AuditHealth) => void,
  ) => Promise<Audit>;
}

function openBudget(config: ServeConfig): Budget {
  const budget = RefusalBudget.open(config.throttle);
  return {
    check: (identity) => budget.check(identity),
    recordRefusal: (identity) => {
      const recorded = budget.recordRefusal(identity);
      if (recorded.crossed) countBudgetCrossing();
      return recorded;
    },
    limitedCount: () => budget.limitedCount(),
    close: () => budget.close(),
  };
}

/**
 * Opens this login's audit file with the token's audit keys. A token that dies under an audit line
 * (a reload, a checkpoint, a retry) is reported by the token itself (Token.onDead). Each change of
 * the log's health is logged and given to `onHealthChange` (the request threads' copy of it).
 * `seams` is a seam for benches only (bench/serve.ts): the daemon never passes it.
 */
export function openAuditLog(
  config: ServeConfig,
  token: Token,
  onHealthChange: (health: AuditHealth) => void = () => {},
  seams: Pick<AuditOptions, "sync"> = {},
): Promise<Audit> {
  const { syslogSocket, ...auditOptions } = config.audit;
  return AuditLog.open({
    ...auditOptions,
    ...seams,
    ...auditObservers(syslogSocket, log),
    keys: auditKeysFromToken(token),
    login: { token: config.token.tokenLabel, module: config.token.modulePath },
    onHealthChange: (healthy, error) => {
      log(
        healthy
          ? "audit: the log is writable again; signing resumes"
          : `audit: the log cannot be written (${error}); signing stops until it can`,
      );
      onHealthChange({ healthy, lastError: error });
    },
  });
}

/** The first reason to stop wins; `requested` resolves when there is one. */
class StopRequest {
  code: number | undefined;
  readonly requested: Promise<void>;
  #resolve!: () => void;

  constructor(readonly notify: ServiceNotifier) {
    this.requested = new Promise((resolve) => (this.#resolve = resolve));
  }

  request(code: number, why: string): void {
    if (this.code !== undefined) return;
    this.code = code;
    log(`stopping: ${why}`);
    this.notify.stopping(`stopping: ${why}`);
    this.#resolve();
  }
}

/** What start-up has opened so far, closed in reverse by {@link release}. */
interface Opened {
  budget?: Budget;
  token?: Token;
  audit?: Audit;
  /** A module operation of a thread may still run: the module must not be finalised. */
  moduleInUse?: boolean;
  /** The request threads (--threads ≥ 1), once they accept. */
  threads?: RequestThreads;
}

/**
 * Runs the daemon until SIGTERM/SIGINT (exit 0) or a dead token (exit {@link EXIT_TOKEN_DEAD}).
 * Whatever start-up step fails or is interrupted, what it opened before is closed again.
 */
export async function runDaemon(config: ServeConfig, parts: DaemonParts = {}): Promise<number> {
  const stop = new StopRequest(ServiceNotifier.fromEnv(log));
  const opened: Opened = {};
  let policy: PolicyFile | undefined;
  // Signals are ours from the first moment: a SIGTERM during the login or the audit opening stops
  // after that step, with a shutdown line, never by the default action (exit 143, nothing logged).
  // They stay until the process exits: a second SIGTERM while the stop finishes must not kill it.
  const reload = coalesced(() => policy ? reloadPolicy(policy, opened) : Promise.resolve());
  Deno.addSignalListener("SIGHUP", () => void hangUp(opened, reload));
  const onTerm = () => stop.request(0, "signal");
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onTerm);

  try {
    const checked = await checkConfig(config);
    policy = checked.policy;
    opened.budget = (parts.openBudget ?? openBudget)(config);
    const token = opened.token = await openToken(config.token);
    log(
      `logged in to token '${config.token.tokenLabel}' through ${config.token.modulePath}` +
        (config.token.signThread ? "; quick signatures are made on a sign thread" : ""),
    );
    token.onDead((err) => stop.request(EXIT_TOKEN_DEAD, `token is dead: ${err.message}`));
    const audit = opened.audit = await (parts.openAudit ?? openAuditLog)(
      config,
      token,
      (health) => opened.threads?.auditHealth(health),
    );
    if (stop.code === undefined) {
      opened.moduleInUse = await serve(
        config,
        {
          policy,
          token,
          audit,
          budget: opened.budget,
          revocationMemory: checked.revocationMemory,
        },
        stop,
        opened,
      );
    }
  } catch (err) {
    if (isTokenDead(err)) stop.request(EXIT_TOKEN_DEAD, `token is dead: ${err.message}`);
    await release(opened);
    if (stop.code !== EXIT_TOKEN_DEAD) throw err;
    log(`stopped (exit ${EXIT_TOKEN_DEAD})`);
    flushLog();
    return EXIT_TOKEN_DEAD;
  }
  await release(opened);
  const code = stop.code ?? 0;
  log(`stopped (exit ${code})`);
  flushLog();
  return code;
}

/** What start-up opened that the authenticated listener serves with. */
interface Running {
  policy: PolicyFile;
  token: Token;
  audit: Audit;
  budget: Budget;
  /** The revocation database as the start-up check read it, for the public threads. */
  revocationMemory?: IndexMemory;
}

/** The authenticated listener, in this isolate or in request threads; both close alike. */
interface AuthenticatedSide {
  /** Resolves when the listener stopped by itself (the single-thread reactor ended). */
  served: Promise<void>;
  /** True when every session of the side was closed (see {@link PublicThreads.close}). */
  close(graceMs: number): Promise<boolean>;
  /** Refreshes this isolate's sampled gauges (for a scrape). */
  sample?: () => void;
}

/**
 * Listens until a stop is requested, then serves the connections already made and closes; true
 * when the module must be left to the process exit (see {@link PublicThreads.close}).
 */
async function serve(
  config: ServeConfig,
  running: Running,
  stop: StopRequest,
  opened: Opened,
): Promise<boolean> {
  // The one audit log, budget and cap, whichever isolates run the routes.
  const services = servicesInThisThread({
    audit: running.audit,
    budget: running.budget,
    cap: ConcurrencyCap.forWorkers(config.listener.workers),
    token: running.token,
  });
  const startedAt = Date.now();
  // Region 0: this isolate; then one per request thread, then one per public thread.
  const share = config.metrics
    ? metrics.share(1 + config.threads + (config.public?.threads ?? 0))
    : undefined;
  const side = config.threads === 0
    ? serveInThisThread(config, running, services, startedAt)
    : await serveInThreads(config, running, services, startedAt, stop, opened, share);
  let publicListener: PublicThreads | undefined;
  let metricsListener: MetricsListener | undefined;
  let publicClosed: boolean | undefined;
  let sideClosed: boolean | undefined;
  try {
    await running.audit.append("listener_start", "svcd", {
      listener: "authenticated",
      socket: config.listener.path,
    });
    if (config.public) {
      publicListener = await startPublicListener(
        config,
        config.public,
        running.token,
        stop,
        share && { buffer: share, firstRegion: 1 + config.threads },
        running.revocationMemory,
      );
      await running.audit.append("listener_start", "svcd", {
        listener: "public",
        socket: config.public.socket,
      });
    }
    if (config.metrics) {
      const sampleMain = side.sample ?? (() => {});
      const beforeScrape = () => {
        sampleMain();
        return sampleTokenState(running.token);
      };
      metricsListener = MetricsListener.open(config.metrics, beforeScrape, (event) => {
        log(`metrics ${listenerEventText(event)}`, `metrics_${event.kind}`);
      });
      log(`metrics listener on ${config.metrics.socket} (peer uid ${config.metrics.peerUid})`);
    }
    const { path, proxyUid } = config.listener;
    log(`listening on ${path} (proxy uid ${proxyUid}, ${servedBy(config)})`);
    // Type=notify: `systemctl start` returns once the sockets accept, not when the process exists.
    stop.notify.ready(`listening on ${path}`);
    await Promise.race([side.served, stop.requested]);
    stop.request(0, "listener ended");
  } finally {
    const grace = stop.code === EXIT_TOKEN_DEAD ? DEAD_TOKEN_GRACE_MS : STOP_GRACE_MS;
    // Both listeners stop before the token is released: the threads' sessions are in this module.
    [sideClosed, publicClosed] = await Promise.all([
      side.close(grace),
      publicListener?.close(grace),
      metricsListener?.close(),
    ]);
    await side.served;
  }
  // A thread that did not close its sessions may still be inside the module.
  return publicClosed === false || sideClosed === false;
}

/**
 * The token's state for a scrape: present when C_GetTokenInfo answers, logged in when a session is
 * in a user state (the live checks /token makes). A module that cannot answer counts as neither.
 */
async function sampleTokenState(token: Token): Promise<void> {
  let present = false, loggedIn = false;
  try {
    token.info();
    present = true;
    loggedIn = await token.loggedIn();
  } catch { /* a dead or removed token: both 0 */ }
  setTokenState(present, loggedIn);
}

/** --threads 0: the authenticated listener and its routes run on the main thread. */
function serveInThisThread(
  config: ServeConfig,
  running: Running,
  services: LocalMainServices,
  startedAt: number,
): AuthenticatedSide {
  const deps = authenticatedDeps(running.token, () => running.policy.current, services, {
    publicUrl: config.publicUrl,
    maxBody: config.listener.maxBodyBytes,
    caCertificates: config.caCertificates,
    log: (message) => log(message, "authenticated"),
    startedAt,
  });
  const listener = Listener.open({
    ...config.listener,
    log: (event) => {
      countListenerEvent("authenticated", event);
      log(listenerEventText(event), event.kind);
    },
    ...countedListener("authenticated", {
      handler: authenticatedHandler(deps),
      continueCheck: authenticatedContinueCheck(deps),
    }),
  });
  // One request in hand signs on this thread: the sign thread's hand-off would only delay it.
  running.token.signOnThreadWhile(() => listener.othersInHand);
  const served = listener.serve();
  const sample = sampleGauges(
    "authenticated",
    () => listener.stats(),
    () => running.token.poolStats(),
  );
  return { served, close: (grace) => listener.close(grace).then(() => true), sample };
}

/**
 * --threads N ≥ 1: N request threads accept from the socket and run the routes; this isolate keeps
 * the budget, the cap and the audit log (../threads/request_threads.ts).
 */
async function serveInThreads(
  config: ServeConfig,
  running: Running,
  services: LocalMainServices,
  startedAt: number,
  stop: StopRequest,
  opened: Opened,
  share: SharedArrayBuffer | undefined,
): Promise<AuthenticatedSide> {
  const policy = running.policy.current;
  let threads: RequestThreads;
  try {
    threads = await RequestThreads.start(
      {
        path: config.listener.path,
        proxyUid: config.listener.proxyUid,
        queueDepth: config.listener.queueDepth,
        maxBodyBytes: config.listener.maxBodyBytes,
        workers: config.listener.workers,
        token: threadTokenOptions(config, running.token),
        policy: policy.toData(),
        audit: { healthy: running.audit.healthy, lastError: running.audit.lastError },
        publicUrl: config.publicUrl,
        caCertificates: config.caCertificates,
        startedAt,
        metrics: share && { buffer: share, firstRegion: 1 },
      },
      config.threads,
      services,
      {
        log: (message) => log(message, "authenticated"),
        onListenerEvent: (event) => {
          countListenerEvent("authenticated", event);
          log(listenerEventText(event), event.kind);
        },
        onTokenDead: (err) => stop.request(EXIT_TOKEN_DEAD, `token is dead: ${err.message}`),
        onFailure: (err) => stop.request(EXIT_LISTENER_FAILED, err.message),
      },
    );
  } catch (err) {
    if (err instanceof RequestThreadsError) throw new StartupError(err.message);
    throw err;
  }
  opened.threads = threads;
  // A reload that finished while the threads started installed its policy in none of them.
  if (running.policy.current !== policy) await threads.installPolicy(running.policy.current);
  threads.auditHealth({ healthy: running.audit.healthy, lastError: running.audit.lastError });
  // The threads never stop by themselves: a failure or a dead token requests the stop instead.
  const served = Promise.withResolvers<void>();
  return {
    served: served.promise,
    close: (grace) => threads.close(grace).finally(served.resolve),
    // The main isolate's pool (the threads sample their own listener and pool).
    sample: sampleGauges("authenticated", () => IDLE_STATS, () => running.token.poolStats()),
  };
}

/** This isolate holds no authenticated connection with --threads ≥ 1: its threads do. */
const IDLE_STATS = { waiting: 0, reading: 0, queued: 0 };

/** Starts the public listener's threads; what they report goes to the daemon's log and stop. */
async function startPublicListener(
  config: ServeConfig,
  pub: PublicConfig,
  token: Token,
  stop: StopRequest,
  share: MetricsShare | undefined,
  revocationMemory: IndexMemory | undefined,
): Promise<PublicThreads> {
  try {
    const setup = { ...publicSetup(config, pub, token), metrics: share, revocationMemory };
    const started = await PublicThreads.start(setup, pub.threads, {
      log: (message) => log(message, "public"),
      onListenerEvent: (event) => {
        countListenerEvent("public", event);
        log(`public ${listenerEventText(event)}`, `public_${event.kind}`);
      },
      onTokenDead: (err) => stop.request(EXIT_TOKEN_DEAD, `token is dead: ${err.message}`),
      onFailure: (err) => stop.request(EXIT_LISTENER_FAILED, err.message),
    });
    const crls = pub.crl ? `, CRLs of ${pub.crl.caDir} in ${pub.crl.dir}` : "";
    log(`public listener on ${pub.socket} (certificates, OCSP${crls}; ${pub.threads} threads)`);
    return started;
  } catch (err) {
    if (err instanceof PublicThreadsError) throw new StartupError(err.message);
    throw err;
  }
}

/**
 * How a thread's isolate opens the module the main isolate logged in to (its own sessions), with
 * the copy lock of `token` (this isolate's): one lock for every Token of the process.
 */
function threadTokenOptions(config: ServeConfig, token: Token): ThreadTokenOptions {
  const { modulePath, tokenLabel, maxSessions, inlineSignLimitUs } = config.token;
  return { modulePath, tokenLabel, maxSessions, inlineSignLimitUs, copyLock: token.copyLock };
}

/** What each public thread is given: its own copy of the listener and token settings. */
function publicSetup(
  config: ServeConfig,
  pub: PublicConfig,
  token: Token,
): Omit<PublicThreadSetup, "shared" | "revocationMemory"> {
  return {
    socket: pub.socket,
    queueDepth: config.listener.queueDepth,
    // lib/ocsp bounds what it parses (MAX_REQUEST_BYTES): a larger body up to --max-body is
    // answered malformedRequest; past --max-body it is 413, never read.
    maxBodyBytes: config.listener.maxBodyBytes,
    workers: config.listener.workers,
    token: threadTokenOptions(config, token),
    caCertificates: pub.caCertificates,
    responderCertificate: pub.responderCertificate,
    revocationDb: pub.revocationDb,
    revocationMaxEntries: pub.maxEntries,
    ocspLabel: pub.ocspLabel,
    validitySeconds: pub.validitySeconds,
    nice: pub.nice,
    crl: pub.crl,
  };
}

/** How long a stop waits for signatures still running in the module before finalising it. */
const TOKEN_DRAIN_MS = 5_000;

/**
 * Closes what start-up opened, last first. The token is finalised only when no operation is running
 * in it (a session serves one operation at a time); the audit log's last lines
 * still need it, so the log closes first.
 */
async function release(opened: Opened): Promise<void> {
  const idle = await opened.token?.whenIdle(TOKEN_DRAIN_MS) ?? true;
  await opened.audit?.close().catch((err) => log(`audit close: ${(err as Error).message}`));
  opened.budget?.close();
  if (!opened.token) return;
  if (idle && !opened.moduleInUse) opened.token.close();
  else log("a module operation is still running; the module is left to the process exit");
}

/**
 * SIGHUP: every key copy is dropped (in each request thread too), then the policy is reloaded.
 * Keys are re-resolved on the token at their next use: one deleted there stops signing now. The
 * reload is `reload` (coalesced): SIGHUPs during a reload share one more, which reads the file as
 * it is after the last of them — a storm of signals never queues a reload per signal.
 */
async function hangUp(opened: Opened, reload: () => Promise<void>): Promise<void> {
  if (opened.token) {
    opened.token.refreshKeys();
    await opened.threads?.refreshKeys();
    log("keys: working copies dropped; each key is looked up on the token again at its next use");
  }
  await reload();
}

async function reloadPolicy(policy: PolicyFile, opened: Opened): Promise<void> {
  log(`policy reload: reading ${policy.path}`);
  const result = await policy.reload();
  countPolicyReload(result.ok);
  const audit = opened.audit;
  if (result.ok) {
    // Installed in every request thread before it is said to be in force.
    await opened.threads?.installPolicy(result.policy);
    for (const warning of result.policy.warnings) log(`policy: ${warning}`, "policy");
    log(`policy reloaded: ${result.policy.size} grants`);
  } else {
    log(`policy reload failed, the previous policy stays in force: ${result.error}`);
  }
  if (!audit) return; // reloaded during start-up: the login_ok line is still to come
  await audit.append(
    "policy_reload",
    "svcd",
    result.ok ? { ok: true } : { ok: false, error: result.error },
  )
    .catch((err) => log(`audit: policy_reload line not written: ${(err as Error).message}`));
}
