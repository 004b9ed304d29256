/**
 * The daemon's life: start-up checks in the order that fails cheapest and never wastes a login,
 * one login, the audit file of this module opening, the listener, signals, and the stop.
 *
 * @example
 * ```ts
 * const code = await runDaemon(parseServeArgs(Deno.args));
 * ```
 */
import { Listener, nofileLimit } from "../http/mod.ts";
import { PolicyFile } from "../policy/mod.ts";
import { ConcurrencyCap, RefusalBudget, STATE_FILE_NAME } from "../throttle/mod.ts";
import { isTokenDead, Token } from "../token/mod.ts";
import { auditKeysFromToken, AuditLog, DAEMON_KEY_LABELS } from "../audit/mod.ts";
import type { ServeConfig, TokenConfig } from "./config.ts";
import { DaemonLog, listenerEventText } from "./log.ts";
import { authenticatedAdmission, authenticatedHandler, type ServiceDeps } from "./service.ts";
import { ServiceNotifier } from "./notify.ts";

/** A start-up failure: the message says what was wrong and what to do; exit code 1. */
export class StartupError extends Error {
  override name = "StartupError";
}

/** Exit code when the token died under the daemon: the service manager restarts it. */
export const EXIT_TOKEN_DEAD = 75;

/** File descriptors the process needs besides the listeners' queues and workers. */
const FD_SLACK = 64;

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

/** Writes the counts of suppressed lines still pending (before the process exits). */
export function flushLog(): void {
  daemonLog.flush();
}

/**
 * Checks the numbers that must fit under RLIMIT_NOFILE (spec §8: the queue depth is checked at
 * start against the process limit on open files).
 *
 * @example
 * ```ts
 * checkFileLimit(config, { soft: 4096, hard: 4096 }); // throws StartupError when too small
 * ```
 */
export function checkFileLimit(config: ServeConfig, limit: { soft: number; hard: number }): void {
  const listeners = config.public?.socket ? 2 : 1;
  const { queueDepth, workers } = config.listener;
  const { maxSessions } = config.token;
  const needed = listeners * (queueDepth + workers) + maxSessions + FD_SLACK;
  if (needed <= limit.soft) return;
  throw new StartupError(
    `open-file limit ${limit.soft} is too small: --queue-depth ${queueDepth} × ${listeners} ` +
      `listener(s) + --workers ${workers} + --max-sessions ${maxSessions} + ${FD_SLACK} ` +
      `needs ${needed}; lower --queue-depth or raise LimitNOFILE= in the unit (hard limit ${limit.hard})`,
  );
}

/** Start-up checks shared by `serve` and `--check-config`; returns the loaded policy. */
export async function checkConfig(config: ServeConfig): Promise<PolicyFile> {
  checkFileLimit(config, nofileLimit());
  if (config.public) {
    throw new StartupError(
      "--public-socket, --revocation-db and --ocsp-label are not supported by this version yet; remove them",
    );
  }
  checkSocketPath(config.listener.path);
  const policy = await loadPolicy(config.policy.path);
  for (const warning of policy.current.warnings) log(`policy: ${warning}`, "policy");
  await ensureDir(config.audit.dir, "--audit-dir");
  await ensureDir(config.throttle.stateDir, "--state-dir");
  return policy;
}

/** A file in the socket's place that is not a socket is never replaced: say so before start-up. */
function checkSocketPath(path: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.lstatSync(path);
  } catch {
    return; // absent: the listener creates it
  }
  if (!info.isSocket) {
    throw new StartupError(
      `--socket ${path} exists and is not a socket; move it away or choose another path`,
    );
  }
}

async function loadPolicy(path: string): Promise<PolicyFile> {
  try {
    return await PolicyFile.load(path, { reservedLabels: DAEMON_KEY_LABELS });
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
}

async function ensureDir(path: string, option: string): Promise<void> {
  try {
    await Deno.mkdir(path, { recursive: true, mode: 0o750 });
  } catch (err) {
    throw new StartupError(`${option} ${path} cannot be created: ${(err as Error).message}`);
  }
}

/** Reads the PIN, opens the module and logs in once; the PIN buffer is zeroized by login. */
async function openToken(config: TokenConfig): Promise<Token> {
  const pin = Token.readPinCredential(config.credentialsDir);
  let token: Token;
  try {
    token = Token.open(config);
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
  return token;
}

type Budget = Pick<RefusalBudget, "check" | "recordRefusal" | "limitedCount" | "close">;
type Audit =
  & Pick<AuditLog, "append" | "healthy" | "lastError" | "close">
  & Partial<Pick<AuditLog, "stats">>;

/**
 * Replacements for parts of the daemon, for benchmarks that measure what a part costs (bench/serve.ts).
 * The daemon itself always runs with the real ones.
 */
export interface DaemonParts {
  openBudget?: (config: ServeConfig) => Budget;
  openAudit?: (
    config: ServeConfig,
    token: Token,
    onTokenDead: (err: unknown) => void,
  ) => Promise<Audit>;
}

function openBudget(config: ServeConfig): Budget {
  return RefusalBudget.open(config.throttle);
}

/**
 * Opens an existing refusal state file once, the way `serve` would, so that --check-config finds
 * a corrupt one; a file a running daemon holds is reported, not failed.
 */
export function checkStateFile(config: ServeConfig): void {
  const { stateDir } = config.throttle;
  try {
    Deno.statSync(`${stateDir}/${STATE_FILE_NAME}`);
  } catch {
    return; // `serve` creates it
  }
  try {
    RefusalBudget.open(config.throttle).close();
  } catch (err) {
    if (/locked|busy/i.test((err as Error).message)) {
      log(
        `check: ${stateDir}/${STATE_FILE_NAME} is in use (a running daemon?); not checked`,
      );
      return;
    }
    throw err;
  }
}

function openAudit(
  config: ServeConfig,
  token: Token,
  onTokenDead: (err: unknown) => void,
): Promise<Audit> {
  const keys = auditKeysFromToken(token);
  // A token that dies under an audit line (a reload, a checkpoint, a retry) stops the daemon as a
  // request would: otherwise it would stay up answering 503 with no restart.
  const watch = <T>(work: Promise<T>): Promise<T> =>
    work.catch((err) => {
      if (isTokenDead(err)) onTokenDead(err);
      throw err;
    });
  return AuditLog.open({
    ...config.audit,
    keys: {
      mac: (data) => watch(keys.mac(data)),
      signCheckpoint: (data) => watch(keys.signCheckpoint(data)),
    },
    login: { token: config.token.tokenLabel, module: config.token.modulePath },
    onHealthChange: (healthy, error) =>
      log(
        healthy
          ? "audit: the log is writable again; signing resumes"
          : `audit: the log cannot be written (${error}); signing stops until it can`,
      ),
  });
}

/**
 * Runs the daemon until SIGTERM/SIGINT (exit 0) or a dead token (exit {@link EXIT_TOKEN_DEAD}).
 *
 * @example
 * ```ts
 * Deno.exit(await runDaemon(config));
 * ```
 */
export async function runDaemon(config: ServeConfig, parts: DaemonParts = {}): Promise<number> {
  const policy = await checkConfig(config);
  const budget = (parts.openBudget ?? openBudget)(config);
  const token = await openToken(config.token);
  log(`logged in to token '${config.token.tokenLabel}' through ${config.token.modulePath}`);
  let onTokenDead = (_err: unknown) => {}; // until the listener exists, a failure throws instead
  const audit = await (parts.openAudit ?? openAudit)(config, token, (err) => onTokenDead(err));

  const notify = ServiceNotifier.fromEnv(log);
  let exitCode = 0;
  let listener: Listener | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (code: number, why: string) => {
    if (stopping) return stopping;
    exitCode = code;
    log(`stopping: ${why}`);
    notify.stopping(`stopping: ${why}`);
    stopping = (async () => {
      await listener?.close(code === EXIT_TOKEN_DEAD ? DEAD_TOKEN_GRACE_MS : STOP_GRACE_MS);
      await releaseToken(token, audit, budget);
    })();
    return stopping;
  };

  // Signals are ours before the socket exists: a reload or stop at any moment after start-up
  // is handled, never the default action that would kill the process without a shutdown line.
  const onHup = () => void reloadPolicy(policy, audit);
  const onTerm = () => void stop(0, "signal");
  Deno.addSignalListener("SIGHUP", onHup);
  Deno.addSignalListener("SIGTERM", onTerm);
  Deno.addSignalListener("SIGINT", onTerm);
  const service: ServiceDeps = {
    token,
    policy: () => policy.current,
    audit,
    budget,
    cap: ConcurrencyCap.forWorkers(config.listener.workers),
    publicSocket: config.public?.socket,
    isTokenDead,
    onTokenDead: (err) => onTokenDead(err),
    log: (message) => log(message, "request"),
    startedAt: Date.now(),
  };
  try {
    listener = Listener.open({
      ...config.listener,
      log: (event) => log(listenerEventText(event), event.kind),
      handler: authenticatedHandler(service),
      admit: authenticatedAdmission(service),
    });
    onTokenDead = (err) => void stop(EXIT_TOKEN_DEAD, `token is dead: ${(err as Error).message}`);
    await audit.append("listener_start", "svcd", {
      listener: "authenticated",
      socket: config.listener.path,
    });
    const { path, proxyUid, workers } = config.listener;
    log(`listening on ${path} (proxy uid ${proxyUid}, ${workers} workers)`);
    // Type=notify: `systemctl start` returns once the socket accepts, not when the process exists.
    notify.ready(`listening on ${path}`);
    await listener.serve();
    await stop(exitCode, "listener ended");
  } catch (err) {
    await stop(
      isTokenDead(err) ? EXIT_TOKEN_DEAD : 1,
      `start-up failed: ${(err as Error).message}`,
    );
    if (exitCode !== EXIT_TOKEN_DEAD) throw err;
  }
  // The signal listeners stay until the process exits: a second SIGTERM while the stop finishes
  // (an impatient operator, a service manager) must not fall back to the default action and kill
  // the process with exit 143 after its work is done.
  log(`stopped (exit ${exitCode})`);
  flushLog();
  return exitCode;
}

/** How long a stop waits for signatures still running in the module before finalising it. */
const TOKEN_DRAIN_MS = 5_000;

/**
 * The token is finalised only when no operation is running in it (spec §7 rule 6: a session is used
 * by one operation at a time); the audit log's last lines still need it, so it closes first.
 */
async function releaseToken(token: Token, audit: Audit, budget: Budget): Promise<void> {
  const idle = await token.whenIdle(TOKEN_DRAIN_MS);
  await audit.close().catch((err) => log(`audit close: ${(err as Error).message}`));
  budget.close();
  if (idle) token.close();
  else log("a module operation is still running; the module is left to the process exit");
}

async function reloadPolicy(policy: PolicyFile, audit: Audit): Promise<void> {
  const result = await policy.reload();
  if (result.ok) {
    for (const warning of result.policy.warnings) log(`policy: ${warning}`, "policy");
    log(`policy reloaded: ${result.policy.size} grants`);
  } else {
    log(`policy reload failed, the previous policy stays in force: ${result.error}`);
  }
  await audit.append(
    "policy_reload",
    "svcd",
    result.ok ? { ok: true } : { ok: false, error: result.error },
  )
    .catch((err) => log(`audit: policy_reload line not written: ${(err as Error).message}`));
}
