/**
 * The daemon's configuration: nested typed structures, one per library, each in the shape that
 * library's `open` already takes. Built and validated here and nowhere else, from one table of
 * option specifications, so `svcd serve --help`, `--check-config` and the parser cannot disagree.
 *
 * @example
 * ```ts
 * const config = parseServeArgs(["--socket", "/run/svcd/auth.sock", "--proxy-uid", "33"]);
 * config.listener.path; // "/run/svcd/auth.sock"
 * config.token.tokenLabel; // "svcd"
 * ```
 */
import { parseArgs } from "node:util";
import { join, resolve } from "node:path";
import type { ListenerOptions } from "../../http/mod.ts";
import type { AuditOptions } from "../../audit/mod.ts";
import {
  DEFAULT_MODULE,
  DEFAULT_TOKEN_LABEL,
  SLOW_TO_MOVE,
  type TokenOptions,
  WINDOW,
} from "../../token/mod.ts";
import {
  budgetDefaults,
  type BudgetTuning,
  resolveBudgetTuning,
  TuningError,
} from "../../throttle/mod.ts";
import type { CliOption, CommandGroup, OptionGroup } from "../../cli/options.ts";
import { groupHelp } from "../../cli/options.ts";
import { MAX_INDEX_ENTRIES } from "../../ocsp/mod.ts";
import { MAX_POLICY_GRANTS } from "../../policy/mod.ts";
import type { CrlConfig } from "../threads/protocol.ts";

/** The authenticated listener: what `Listener.open` takes besides its handler and log. */
export type ListenerConfig =
  & Required<Pick<ListenerOptions, "path" | "queueDepth" | "maxBodyBytes" | "workers">>
  & { proxyUid: number };

/** The token: what `Token.open` takes, and where the PIN credential is (`Token.readPinCredential`). */
export type TokenConfig =
  & Required<Pick<TokenOptions, "modulePath" | "tokenLabel" | "maxSessions" | "inlineSignLimitUs">>
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
}

/**
 * A command-line mistake: the message says which option and what to do; `option` names it
 * (without the dashes) when one option is to blame.
 *
 * @example
 * ```ts
 * try {
 *   parseServeArgs(["--workers", "0"]);
 * } catch (err) {
 *   if (err instanceof ConfigError) console.error(err.option, err.message); // "workers" …
 * }
 * ```
 */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(readonly option: string | undefined, message: string) {
    super(message);
  }
}

/**
 * Request threads by default: none. On a small machine crossing isolates costs more CPU than the
 * second core gives back (bench/compare.ts measures it; figures in bench/BREAKDOWN.md).
 */
export const DEFAULT_THREADS = 0;

/**
 * Signatures quicker than this (µs) are made on the thread that serves the request, not handed to
 * the thread pool: the hop costs more than a software token's ECDSA or Ed25519 signature and less
 * than an RSA or a remote HSM's (see lib/token/sign_placement.ts). The limit leaves room for the
 * slow tail of a quick mechanism under load, so that tail does not move it to the pool.
 */
export const DEFAULT_INLINE_SIGN_LIMIT_US = 300;

/** The headings of `svcd serve --help`, in their order (OptionSpec.group). */
export const SERVE_GROUPS = [
  { id: "sockets", title: "sockets" },
  { id: "token", title: "token" },
  { id: "policy", title: "policy and audit" },
  { id: "limits", title: "limits" },
  { id: "public", title: "public listener (certificates, OCSP and CRLs)" },
  { id: "threads", title: "threads" },
  { id: "metrics", title: "metrics" },
  { id: "checkpoints", title: "checkpoints" },
] as const satisfies readonly OptionGroup[];

/** One option of `svcd serve`: name, type, default, bounds, help, and where `--help` lists it. */
export interface OptionSpec {
  flag: string;
  /** "switch": an option without a value (true when given). */
  kind: "path" | "text" | "count" | "switch";
  /** The heading `--help` lists it under. */
  group: (typeof SERVE_GROUPS)[number]["id"];
  /** Placeholder of the value in `--help` and the man page (PATH, N, SECONDS…); none for a switch. */
  value?: string;
  help: string;
  fallback?: string | number;
  /** The default as `--help` says it, when it is not `fallback` (e.g. another option's value). */
  shownDefault?: string;
  required?: boolean;
  min?: number;
  max?: number;
  /** False for an option this version parses but refuses: `--help` does not offer it. */
  advertised?: boolean;
}

/**
 * The options of `svcd serve`, as data.
 *
 * @example
 * ```ts
 * SERVE_OPTIONS.find((o) => o.flag === "workers")?.fallback; // 16
 * ```
 */
export const SERVE_OPTIONS: readonly OptionSpec[] = [
  {
    flag: "socket",
    group: "sockets",
    value: "PATH",
    kind: "path",
    fallback: "/run/svcd/auth.sock",
    help: "authenticated UNIX socket",
  },
  {
    flag: "proxy-uid",
    group: "sockets",
    value: "UID",
    kind: "count",
    required: true,
    min: 0,
    max: 0xfffffffe,
    help: "uid of the TLS proxy; every peer's SO_PEERCRED uid must equal it",
  },
  {
    flag: "policy",
    group: "policy",
    value: "FILE",
    kind: "path",
    fallback: "/etc/svcd/policy",
    help: "policy file: subject<TAB>key label per line; re-read on SIGHUP",
  },
  {
    flag: "policy-max-grants",
    group: "policy",
    value: "N",
    kind: "count",
    fallback: MAX_POLICY_GRANTS,
    min: 1,
    max: 8_000_000,
    help: "most grants in --policy (about 60 bytes of memory each, shared by the request " +
      "threads); a larger file is refused at start, and a reload keeps the policy in force",
  },
  {
    flag: "module",
    group: "token",
    value: "PATH",
    kind: "path",
    fallback: DEFAULT_MODULE,
    help: "PKCS#11 module",
  },
  {
    flag: "token",
    group: "token",
    value: "LABEL",
    kind: "text",
    fallback: DEFAULT_TOKEN_LABEL,
    help: "token label",
  },
  {
    flag: "allow-weak-credential",
    group: "token",
    kind: "switch",
    help: "start although svc-pin is not on ramfs (tmpfs or disk: systemd-creds calls it weak)",
  },
  {
    flag: "workers",
    group: "limits",
    value: "N",
    kind: "count",
    fallback: 16,
    min: 1,
    max: 1024,
    help: "requests using the token at once; one identity may hold workers-1",
  },
  {
    flag: "threads",
    group: "threads",
    value: "N",
    kind: "count",
    fallback: DEFAULT_THREADS,
    min: 0,
    max: 64,
    help: "threads serving the authenticated socket (0: the main thread alone); " +
      "at most --workers",
  },
  {
    flag: "inline-sign-limit-us",
    group: "threads",
    value: "MICROSECONDS",
    kind: "count",
    fallback: DEFAULT_INLINE_SIGN_LIMIT_US,
    min: 0,
    max: 1_000_000,
    help: `a key signs on the thread serving its request until ${SLOW_TO_MOVE} of its last ` +
      `${WINDOW} signatures held it longer than this (microseconds of its CPU, or of waiting when the ` +
      "module slept); then on the thread pool until SIGHUP " +
      "(0: always the pool)",
  },
  {
    flag: "queue-depth",
    group: "limits",
    value: "N",
    kind: "count",
    fallback: 256,
    min: 1,
    max: 65536,
    help: "silent connections held per listener; past it 503",
  },
  {
    flag: "max-body",
    group: "limits",
    value: "BYTES",
    kind: "count",
    fallback: 1 << 20,
    min: 1,
    max: 1 << 30,
    help: "largest request body in bytes; past it 413",
  },
  {
    flag: "max-sessions",
    group: "token",
    value: "N",
    kind: "count",
    fallback: 127,
    min: 1,
    max: 4096,
    help: "session pool cap",
  },
  {
    flag: "audit-dir",
    group: "policy",
    value: "DIR",
    kind: "path",
    fallback: "/var/log/svcd",
    help: "folder of audit.log.NNNNNN files",
  },
  {
    flag: "state-dir",
    group: "policy",
    value: "DIR",
    kind: "path",
    fallback: "/var/lib/svcd",
    help: "folder of persistent state (refusal counts)",
  },
  {
    flag: "checkpoint-every",
    group: "checkpoints",
    value: "LINES",
    kind: "count",
    fallback: 1000,
    min: 1,
    max: 1e9,
    help: "audit lines between signed checkpoints",
  },
  {
    flag: "checkpoint-interval",
    group: "checkpoints",
    value: "SECONDS",
    kind: "count",
    fallback: 60,
    min: 1,
    max: 86400,
    help: "seconds between signed checkpoints while new audit lines arrive",
  },
  {
    flag: "syslog-socket",
    group: "checkpoints",
    value: "PATH",
    kind: "text",
    fallback: "/dev/log",
    help:
      "syslog socket each checkpoint line is copied to (identifier svcd-audit); 'none': no copy",
  },
  {
    flag: "metrics-socket",
    group: "metrics",
    value: "PATH",
    kind: "path",
    help: "UNIX socket serving GET /metrics (Prometheus text format); enables the metrics listener",
  },
  {
    flag: "metrics-uid",
    group: "metrics",
    value: "UID",
    kind: "count",
    min: 0,
    max: 0xfffffffe,
    shownDefault: "the --proxy-uid",
    help: "uid allowed to connect to --metrics-socket",
  },
  {
    flag: "refusal-threshold",
    group: "limits",
    value: "N",
    kind: "count",
    min: 1,
    max: 1e6,
    fallback: budgetDefaults().threshold,
    help: "refusals before an identity is delayed",
  },
  {
    flag: "refusal-refill",
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().refillSeconds,
    help: "seconds for one refusal to be forgotten",
  },
  {
    flag: "refusal-base-delay",
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().baseDelaySeconds,
    help: "delay at the first crossing, seconds; doubles per crossing",
  },
  {
    flag: "refusal-max-delay",
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().maxDelaySeconds,
    help: "ceiling of the delay, seconds",
  },
  {
    flag: "public-socket",
    group: "public",
    value: "PATH",
    kind: "path",
    help: "public UNIX socket (GET /certificates, POST /ocsp, GET /crl/NAME with --ca-dir); " +
      "enables the public listener",
  },
  {
    flag: "revocation-db",
    group: "public",
    value: "FILE",
    kind: "path",
    help: "revocation database for /ocsp (openssl ca index.txt); needed with --public-socket " +
      "unless --ca-dir gives it",
  },
  {
    flag: "ocsp-label",
    group: "public",
    value: "LABEL",
    kind: "text",
    help: "token key that signs OCSP answers; needed with --public-socket",
  },
  {
    flag: "ca-cert",
    group: "public",
    value: "FILE",
    kind: "path",
    fallback: "/var/lib/svcd/ca/ca.pem",
    help:
      "CA certificate chain (PEM) served by /certificates; the first is the CA OCSP answers for",
  },
  {
    flag: "ocsp-cert",
    group: "public",
    value: "FILE",
    kind: "path",
    shownDefault: "none: the CA key signs",
    help: "delegated OCSP responder certificate of --ocsp-label",
  },
  {
    flag: "public-url",
    group: "public",
    value: "URL",
    kind: "text",
    shownDefault: "http://HOST, the request's Host",
    help: "base URL of the public side behind the proxy, for the Link of 404s",
  },
  {
    flag: "public-threads",
    group: "threads",
    value: "N",
    kind: "count",
    fallback: 2,
    min: 1,
    max: 64,
    help: "threads serving the public socket (each its own isolate, event loop and sessions)",
  },
  {
    flag: "public-nice",
    group: "threads",
    value: "NICE",
    kind: "count",
    fallback: 19,
    min: 0,
    max: 19,
    help: "nice value of the public threads: they yield the cores to signing when both want them",
  },
  {
    flag: "ocsp-validity",
    group: "public",
    value: "SECONDS",
    kind: "count",
    fallback: 3600,
    min: 60,
    max: 7 * 86400,
    help: "seconds from thisUpdate to nextUpdate in OCSP answers",
  },
  {
    flag: "ca-dir",
    group: "public",
    value: "DIR",
    kind: "path",
    help: "CA folder of 'svcd ca': its CRLs (full and partitions) are signed by the CA key, kept " +
      "fresh from --revocation-db (default DIR/index.txt) and served at GET /crl/NAME",
  },
  {
    flag: "crl-dir",
    group: "public",
    value: "DIR",
    kind: "path",
    fallback: "/var/lib/svcd/crl",
    help: "folder the CRLs are written to atomically and served from (full.crl, full.pem for " +
      "nginx's ssl_crl, K.crl); mirror it at the CA's CRL URL",
  },
  {
    flag: "crl-validity",
    group: "public",
    value: "SECONDS",
    kind: "count",
    fallback: 7 * 86400,
    min: 4,
    max: 30 * 86400,
    help: "seconds from thisUpdate to nextUpdate in CRLs; each is re-signed when half have passed",
  },
  {
    flag: "ocsp-max-entries",
    group: "public",
    value: "N",
    kind: "count",
    fallback: MAX_INDEX_ENTRIES,
    min: 1,
    max: 100_000_000,
    help: "most certificates in --revocation-db (about 34 bytes of memory each, shared by the " +
      "public threads); a larger database is refused at start",
  },
];

/** Options that only mean something with --public-socket. */
const PUBLIC_ONLY_FLAGS = ["revocation-db", "ocsp-label", "ocsp-cert", "ca-dir"] as const;

/** The option that sets each refusal-budget field (maxEntries has none). */
const BUDGET_FLAGS: Readonly<Record<keyof BudgetTuning, string | undefined>> = {
  threshold: "refusal-threshold",
  refillSeconds: "refusal-refill",
  baseDelaySeconds: "refusal-base-delay",
  maxDelaySeconds: "refusal-max-delay",
  maxEntries: undefined,
};

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
  const options = Object.fromEntries(
    SERVE_OPTIONS.map((o) => [o.flag, { type: o.kind === "switch" ? "boolean" : "string" }]),
  ) as Record<string, { type: "boolean" | "string" }>;
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }) as {
      values: Record<string, string | boolean | undefined>;
    });
  } catch (err) {
    // node:util names the option only inside its message ("Option '--workers' argument is …").
    const message = (err as Error).message;
    const option = /'--([a-z-]+)/.exec(message)?.[1];
    throw new ConfigError(option, `${message}; see 'svcd serve --help'`);
  }
  const given = new OptionValues(values);
  const workers = given.count("workers");
  return {
    listener: {
      path: given.text("socket"),
      proxyUid: given.count("proxy-uid"),
      queueDepth: given.count("queue-depth"),
      maxBodyBytes: given.count("max-body"),
      workers,
    },
    threads: requestThreads(given, values.threads !== undefined, workers),
    token: {
      modulePath: given.text("module"),
      tokenLabel: given.text("token"),
      maxSessions: given.count("max-sessions"),
      inlineSignLimitUs: given.count("inline-sign-limit-us"),
      credentialsDir: env.get("CREDENTIALS_DIRECTORY"),
      allowWeakCredential: given.switch("allow-weak-credential"),
    },
    audit: {
      dir: given.text("audit-dir"),
      checkpointEvery: given.count("checkpoint-every"),
      checkpointIntervalMs: given.count("checkpoint-interval") * 1000,
      syslogSocket: given.text("syslog-socket") === "none"
        ? undefined
        : given.text("syslog-socket"),
    },
    throttle: { stateDir: given.text("state-dir"), ...budgetTuning(given) },
    policy: { path: given.text("policy"), maxGrants: given.count("policy-max-grants") },
    public: publicConfig(given),
    publicUrl: publicUrl(given),
    metrics: metricsConfig(given),
  };
}

/**
 * --threads: each thread runs at least one of the --workers handlers (they are split over the
 * threads so that their total stays --workers), so there cannot be more threads than workers: a
 * larger --threads is refused, the default is lowered to --workers.
 */
function requestThreads(given: OptionValues, explicit: boolean, workers: number): number {
  const threads = given.count("threads");
  if (!explicit) return Math.min(threads, workers);
  if (threads > workers) {
    throw new ConfigError(
      "threads",
      `--threads ${threads} is more than --workers ${workers}: each thread needs a worker; ` +
        `give --threads ${workers} or fewer`,
    );
  }
  return threads;
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

/** --public-url: an absolute http(s) URL with no query or fragment, kept without a trailing '/'. */
function publicUrl(given: OptionValues): string | undefined {
  const raw = given.maybeText("public-url");
  if (raw === undefined) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch { /* refused below */ }
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || /[\s<>"]/.test(raw)) {
    throw new ConfigError(
      "public-url",
      `--public-url ${JSON.stringify(raw)} is not an http(s) URL; give e.g. http://pki.example.org`,
    );
  }
  return raw.replace(/\/+$/, "");
}

/**
 * The public listener's part: undefined without --public-socket (and then none of its options may
 * be given); with it, the revocation database and the OCSP key are required (POST /ocsp signs with that key).
 */
function publicConfig(given: OptionValues): PublicConfig | undefined {
  const socket = given.maybeText("public-socket");
  if (socket === undefined) {
    const stray = PUBLIC_ONLY_FLAGS.find((flag) => given.maybeText(flag) !== undefined);
    if (stray) {
      throw new ConfigError(stray, `--${stray} needs --public-socket; add it or remove --${stray}`);
    }
    return undefined;
  }
  const caDir = given.maybeText("ca-dir");
  const required = (flag: "revocation-db" | "ocsp-label") => {
    const value = given.maybeText(flag);
    if (flag === "revocation-db" && caDir !== undefined) {
      // The CRLs are made from the database the OCSP answers read: one file, so they agree.
      const index = join(caDir, "index.txt");
      if (value !== undefined && resolve(value) !== resolve(index)) {
        throw new ConfigError(
          flag,
          `--revocation-db ${value} is not --ca-dir's index.txt (${index}); the CRLs and the ` +
            "OCSP answers come from one database: give that file, or leave --revocation-db out",
        );
      }
      return index;
    }
    if (value === undefined || value === "") {
      throw new ConfigError(flag, `--public-socket needs --${flag} (POST /ocsp answers from it)`);
    }
    return value;
  };
  return {
    socket,
    crl: caDir === undefined ? undefined : {
      caDir,
      dir: given.text("crl-dir"),
      validitySeconds: given.count("crl-validity"),
    },
    revocationDb: required("revocation-db"),
    ocspLabel: required("ocsp-label"),
    caCertificates: given.text("ca-cert"),
    responderCertificate: given.maybeText("ocsp-cert"),
    validitySeconds: given.count("ocsp-validity"),
    maxEntries: given.count("ocsp-max-entries"),
    threads: given.count("public-threads"),
    nice: given.count("public-nice"),
  };
}

/** --metrics-socket: the metrics listener, reachable by --metrics-uid (default the proxy's). */
function metricsConfig(given: OptionValues): MetricsConfig | undefined {
  const socket = given.maybeText("metrics-socket");
  const uid = given.maybeCount("metrics-uid");
  if (socket === undefined) {
    if (uid !== undefined) {
      throw new ConfigError(
        "metrics-uid",
        "--metrics-uid needs --metrics-socket; add it or remove --metrics-uid",
      );
    }
    return undefined;
  }
  return { socket, peerUid: uid ?? given.count("proxy-uid") };
}

/** The budget's tuning from its options, checked as a whole; a bad value is named by its option. */
function budgetTuning(given: OptionValues): BudgetTuning {
  try {
    return resolveBudgetTuning({
      threshold: given.maybeCount("refusal-threshold"),
      refillSeconds: given.maybeCount("refusal-refill"),
      baseDelaySeconds: given.maybeCount("refusal-base-delay"),
      maxDelaySeconds: given.maybeCount("refusal-max-delay"),
    });
  } catch (err) {
    if (!(err instanceof TuningError)) throw err;
    const flag = BUDGET_FLAGS[err.field];
    if (flag === undefined) throw err;
    throw new ConfigError(flag, `--${flag} ${err.requirement}`);
  }
}

/** The raw option strings, read through their specifications (defaults, bounds, messages). */
class OptionValues {
  constructor(private readonly raw: Record<string, string | boolean | undefined>) {}

  text(flag: string): string {
    const value = this.read(flag);
    if (typeof value !== "string") throw new Error(`option table: --${flag} is not text`);
    return value;
  }

  maybeText(flag: string): string | undefined {
    const value = this.read(flag);
    return typeof value === "string" ? value : undefined;
  }

  count(flag: string): number {
    const value = this.read(flag);
    if (typeof value !== "number") throw new Error(`option table: --${flag} has no default`);
    return value;
  }

  switch(flag: string): boolean {
    const spec = SERVE_OPTIONS.find((o) => o.flag === flag);
    if (spec?.kind !== "switch") throw new Error(`option table: --${flag} is not a switch`);
    return this.raw[flag] === true;
  }

  maybeCount(flag: string): number | undefined {
    const value = this.read(flag);
    return typeof value === "number" ? value : undefined;
  }

  private read(flag: string): string | number | undefined {
    const spec = SERVE_OPTIONS.find((o) => o.flag === flag);
    if (!spec) throw new Error(`option table: no --${flag}`);
    const raw = this.raw[flag];
    return readOption(spec, typeof raw === "string" ? raw : undefined);
  }
}

function readOption(spec: OptionSpec, raw: string | undefined): string | number | undefined {
  if (raw === undefined) {
    if (spec.required) throw new ConfigError(spec.flag, `--${spec.flag} is required: ${spec.help}`);
    return spec.fallback;
  }
  if (raw === "") throw new ConfigError(spec.flag, `--${spec.flag} is empty: give ${spec.help}`);
  if (spec.kind !== "count") return raw;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  const min = spec.min ?? 0, max = spec.max ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(
      spec.flag,
      `--${spec.flag} must be a whole number from ${min} to ${max} (got '${raw}')`,
    );
  }
  return n;
}

/** An option of the table as the help and the man page show it. */
function cliOption(o: OptionSpec): CliOption {
  const shown = o.shownDefault ?? (o.fallback === undefined ? undefined : String(o.fallback));
  return {
    flag: o.flag,
    value: o.kind === "switch" ? undefined : o.value ?? o.kind.toUpperCase(),
    help: o.help,
    default: shown,
    required: o.required,
    group: o.group,
  };
}

/**
 * `svcd serve` and `svcd --check-config` as a command group: what `--help` and svcd-serve(8) show,
 * from the advertised {@link SERVE_OPTIONS}.
 */
export const SERVE_COMMAND: CommandGroup = {
  name: "serve",
  summary: "the signing daemon and its start-up checks",
  usage: ["svcd serve [options]", "svcd --check-config [options]"],
  description: "serve runs the daemon: it logs in to the token with the user PIN from " +
    "$CREDENTIALS_DIRECTORY/svc-pin (systemd LoadCredentialEncrypted) and serves the " +
    "authenticated socket, and with --public-socket the public one. --check-config runs the " +
    "start-up checks that need no login and no socket, prints one line per finding with what to " +
    "do, and exits 1 if one is fatal.",
  commands: [],
  options: SERVE_OPTIONS.filter((o) => o.advertised !== false).map(cliOption),
  groups: SERVE_GROUPS,
  notes: "SIGHUP re-reads the policy file; SIGTERM stops accepting, serves the connections made " +
    "before it and exits 0.",
};

/**
 * The help text of `svcd serve`, generated from the advertised {@link SERVE_OPTIONS}.
 *
 * @example
 * ```ts
 * console.log(serveHelp());
 * ```
 */
export function serveHelp(): string {
  return groupHelp(SERVE_COMMAND);
}
