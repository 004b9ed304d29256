/**
 * The daemon's configuration: nested typed structures, one per library, each in the shape that
 * library's `open` already takes. Built here from the command line read through the option table
 * (serve_options.ts) and the rules across options (config_checks.ts), so `svcd serve --help`,
 * `--check-config` and the parser cannot disagree.
 *
 * @example
 * ```ts
 * const config = parseServeArgs(["--socket", "/run/svcd/auth.sock", "--proxy-uid", "33"]);
 * config.listener.path; // "/run/svcd/auth.sock"
 * config.token.tokenLabel; // "svcd"
 * ```
 */
import type { ListenerOptions } from "../../http/mod.ts";
import type { AuditOptions } from "../../audit/mod.ts";
import type { TokenOptions } from "../../token/mod.ts";
import type { BudgetTuning } from "../../throttle/mod.ts";
import { type OptionValues, parseOptions } from "../../cli/command_line.ts";
import type { CrlConfig } from "../threads/protocol.ts";
import {
  ConfigError,
  readServeOptions,
  SERVE_COMMAND,
  type ServeOptions,
} from "./serve_options.ts";
import {
  budgetTuning,
  ocspLabel,
  publicUrl,
  refuseMetricsUidAlone,
  refusePublicOnlyOptions,
  requestThreads,
  revocationDb,
} from "./config_checks.ts";

export { ConfigError };

/** The authenticated listener: what `Listener.open` takes besides its handler and log. */
export type ListenerConfig =
  & Required<Pick<ListenerOptions, "path" | "queueDepth" | "maxBodyBytes" | "workers">>
  & { proxyUid: number };

/** The token: what `Token.open` takes, and where the PIN credential is (`Token.readPinCredential`). */
export type TokenConfig =
  & Required<
    Pick<
      TokenOptions,
      "modulePath" | "tokenLabel" | "maxSessions" | "inlineSignLimitUs" | "signThread"
    >
  >
  & { credentialsDir: string | undefined; allowWeakCredential: boolean };

/** The audit log: what `AuditLog.open` takes besides its keys and hooks. */
export type AuditConfig =
  & Required<Pick<AuditOptions, "dir" | "checkpointEvery" | "checkpointIntervalMs">>
  & { syslogSocket: string | undefined };

/** The metrics listener (lib/metrics): its socket and the one uid allowed to connect. */
export interface MetricsConfig {
  socket: string;
  peerUid: number;
}

/** The refusal budget: what `RefusalBudget.open` takes, tuning resolved and checked. */
export type ThrottleConfig = BudgetTuning & { stateDir: string };

/** The policy file (`PolicyFile.load`). */
export interface PolicyConfig {
  path: string;
  /** Most grants the file may hold; a larger file is refused (at a reload, the policy in force stays). */
  maxGrants: number;
}

/**
 * The public listener: its socket and what GET /certificates and POST /ocsp serve from.
 * It shares queue depth, body and worker settings with nothing: see `publicListenerLimits`.
 */
export interface PublicConfig {
  socket: string;
  /** openssl `ca` index.txt, stat-ed on every query. */
  revocationDb: string;
  /** The token key that signs OCSP responses (the CA's, or a delegated responder's). */
  ocspLabel: string;
  /** PEM chain served by /certificates; its first certificate is the CA OCSP answers for. */
  caCertificates: string;
  /** Delegated responder certificate (id-kp-OCSPSigning) for `ocspLabel`; absent = the CA signs. */
  responderCertificate: string | undefined;
  /** nextUpdate − thisUpdate of OCSP answers, seconds. */
  validitySeconds: number;
  /** Most certificates the revocation database may hold (memory for them is reserved once). */
  maxEntries: number;
  /** Worker isolates (threads) serving the public socket, each accepting from it. */
  threads: number;
  /** Nice value of those threads: above the authenticated side's, so they yield to it. */
  nice: number;
  /** The CA's CRLs, kept fresh and served (--ca-dir); undefined without it. */
  crl: CrlConfig | undefined;
}

/** Everything `svcd serve` needs, with defaults applied and every value checked. */
export interface ServeConfig {
  listener: ListenerConfig;
  token: TokenConfig;
  audit: AuditConfig;
  throttle: ThrottleConfig;
  policy: PolicyConfig;
  /**
   * Worker isolates (threads) serving the authenticated socket, each with its own event loop and
   * sessions; the main isolate keeps the refusal budget, the concurrency cap and the audit log.
   * 0: the main isolate serves the socket itself (one thread for all JavaScript).
   */
  threads: number;
  /** Undefined unless --public-socket was given. */
  public: PublicConfig | undefined;
  /** Undefined unless --metrics-socket was given. */
  metrics: MetricsConfig | undefined;
  /**
   * Where clients reach the public listener through the proxy (--public-url), named in the Link of
   * the authenticated socket's 404 for /certificates and /ocsp. Undefined: derived per request.
   */
  publicUrl: string | undefined;
  /**
   * The CA certificate chain (--ca-cert): GET /token builds a certified key's chain from it, and
   * the public listener serves it.
   */
  caCertificates: string;
}

/**
 * Parses `svcd serve` arguments into a {@link ServeConfig}; throws {@link ConfigError}.
 *
 * @example
 * ```ts
 * parseServeArgs(["--proxy-uid", "33"]).listener.workers; // 16
 * ```
 */
export function parseServeArgs(
  args: string[],
  env: { get(name: string): string | undefined } = Deno.env,
): ServeConfig {
  let values: OptionValues;
  try {
    ({ values } = parseOptions(SERVE_COMMAND.options, args, false));
  } catch (err) {
    throw syntaxError((err as Error).message);
  }
  return serveConfig(values, env);
}

/**
 * A command line `svcd serve` cannot parse (an unknown option, a value missing or not wanted):
 * node:util names the option only inside its message ("Option '--workers' argument is …").
 */
export function syntaxError(message: string): ConfigError {
  const option = /'--([a-z-]+)/.exec(message)?.[1];
  return new ConfigError(option, `${message}; see 'svcd serve --help'`);
}

/**
 * The {@link ServeConfig} of parsed `svcd serve` options, each value checked against its option
 * and across options; throws {@link ConfigError}.
 */
export function serveConfig(
  values: OptionValues,
  env: { get(name: string): string | undefined } = Deno.env,
): ServeConfig {
  const options = readServeOptions(values);
  const workers = options.get("workers");
  const threads = requestThreads(options, workers);
  return {
    listener: {
      path: options.get("socket"),
      proxyUid: options.get("proxy-uid"),
      queueDepth: options.get("queue-depth"),
      maxBodyBytes: options.get("max-body"),
      workers,
    },
    threads,
    token: {
      modulePath: options.get("module"),
      tokenLabel: options.get("token"),
      maxSessions: options.get("max-sessions"),
      inlineSignLimitUs: options.get("inline-sign-limit-us"),
      // The main thread serving alone gives its quick signatures a thread of their own, on a core
      // it does not use; request threads each sign on their own thread and are the parallelism;
      // with an inline limit of 0 every signature goes to the pool and none is quick.
      signThread: threads === 0 && navigator.hardwareConcurrency > 1 &&
        options.get("inline-sign-limit-us") > 0,
      credentialsDir: env.get("CREDENTIALS_DIRECTORY"),
      allowWeakCredential: options.get("allow-weak-credential"),
    },
    audit: {
      dir: options.get("audit-dir"),
      checkpointEvery: options.get("checkpoint-every"),
      checkpointIntervalMs: options.get("checkpoint-interval") * 1000,
      syslogSocket: options.get("syslog-socket") === "none"
        ? undefined
        : options.get("syslog-socket"),
    },
    throttle: { stateDir: options.get("state-dir"), ...budgetTuning(options) },
    policy: { path: options.get("policy"), maxGrants: options.get("policy-max-grants") },
    public: publicConfig(options),
    publicUrl: publicUrl(options),
    metrics: metricsConfig(options),
    caCertificates: options.get("ca-cert"),
  };
}

/**
 * Who serves the authenticated socket, as the daemon's log and `--check-config` say it.
 *
 * @example
 * ```ts
 * servedBy(parseServeArgs(["--proxy-uid", "33", "--threads", "2"])); // "2 threads, 16 workers"
 * ```
 */
export function servedBy(config: Pick<ServeConfig, "threads" | "listener">): string {
  const threads = config.threads === 0 ? "the main thread" : `${config.threads} threads`;
  return `${threads}, ${config.listener.workers} workers`;
}

/**
 * The public listener's part: undefined without --public-socket (and then none of its options may
 * be given); with it, the revocation database and the OCSP key are required (POST /ocsp signs with
 * that key).
 */
function publicConfig(options: ServeOptions): PublicConfig | undefined {
  const socket = options.get("public-socket");
  if (socket === undefined) {
    refusePublicOnlyOptions(options);
    return undefined;
  }
  const caDir = options.get("ca-dir");
  return {
    socket,
    crl: caDir === undefined ? undefined : {
      caDir,
      dir: options.get("crl-dir"),
      validitySeconds: options.get("crl-validity"),
    },
    revocationDb: revocationDb(options),
    ocspLabel: ocspLabel(options),
    caCertificates: options.get("ca-cert"),
    responderCertificate: options.get("ocsp-cert"),
    validitySeconds: options.get("ocsp-validity"),
    maxEntries: options.get("ocsp-max-entries"),
    threads: options.get("public-threads"),
    nice: options.get("public-nice"),
  };
}

/** --metrics-socket: the metrics listener, reachable by --metrics-uid (default the proxy's). */
function metricsConfig(options: ServeOptions): MetricsConfig | undefined {
  const socket = options.get("metrics-socket");
  if (socket === undefined) {
    refuseMetricsUidAlone(options);
    return undefined;
  }
  return { socket, peerUid: options.get("metrics-uid") ?? options.get("proxy-uid") };
}
