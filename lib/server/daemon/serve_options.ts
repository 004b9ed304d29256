/**
 * The options of `svcd serve` and `svcd --check-config`, as one table keyed by flag: what the
 * parser takes, what `--help`, svcd-serve(8) and docs/operations.md list, and what
 * {@link ServeOptions} reads with a type per option. A new option is an entry here and the line of
 * lib/server/daemon/config.ts that puts its value where the daemon reads it.
 *
 * @example
 * ```ts
 * SERVE_OPTIONS.workers.fallback; // 16
 * const options = readServeOptions({ "proxy-uid": "33" });
 * const workers: number = options.get("workers"); // 16
 * ```
 */
import type { CommandGroup, OptionGroup } from "../../cli/options.ts";
import type { OptionValues } from "../../cli/command_line.ts";
import { cliOptions, OptionReader, optionTable } from "../../cli/option_table.ts";
import { SHARED_OPTIONS } from "../../cli/shared_options.ts";
import { budgetDefaults } from "../../throttle/mod.ts";
import { SLOW_TO_MOVE, WINDOW } from "../../token/mod.ts";
import { MAX_INDEX_ENTRIES } from "../../ocsp/mod.ts";
import { MAX_POLICY_GRANTS } from "../../policy/mod.ts";

/**
 * A command-line mistake: the message says which option and what to do; `option` names it
 * (without the dashes) when one option is to blame.
 *
 * @example
 * ```ts
 * import { parseServeArgs } from "./config.ts";
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
 * Signatures quicker than this (µs) are made on the thread that serves the request (or the sign
 * thread, which takes them from the main thread), not handed to the thread pool: the hop costs more
 * than a software token's ECDSA or Ed25519 signature and less
 * than an RSA or a remote HSM's (see lib/token/sign_placement.ts). The limit leaves room for the
 * slow tail of a quick mechanism under load, so that tail does not move it to the pool.
 */
export const DEFAULT_INLINE_SIGN_LIMIT_US = 300;

/** The headings of `svcd serve --help`, in their order. */
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

/** A heading of `svcd serve --help`. */
type ServeGroup = (typeof SERVE_GROUPS)[number]["id"];

/**
 * The options of `svcd serve`, by flag, in the order `--help` lists them under their headings.
 *
 * @example
 * ```ts
 * SERVE_OPTIONS["proxy-uid"].required; // true
 * ```
 */
export const SERVE_OPTIONS = optionTable(SERVE_GROUPS, {
  socket: {
    group: "sockets",
    value: "PATH",
    kind: "path",
    fallback: "/run/svcd/auth.sock",
    help: "authenticated UNIX socket",
  },
  "proxy-uid": {
    group: "sockets",
    value: "UID",
    kind: "count",
    required: true,
    min: 0,
    max: 0xfffffffe,
    help: "uid of the TLS proxy; every peer's SO_PEERCRED uid must equal it",
  },
  policy: {
    group: "policy",
    value: "FILE",
    kind: "path",
    fallback: "/etc/svcd/policy",
    help: "policy file: subject<TAB>key label per line; re-read on SIGHUP",
  },
  "policy-max-grants": {
    group: "policy",
    value: "N",
    kind: "count",
    fallback: MAX_POLICY_GRANTS,
    min: 1,
    max: 8_000_000,
    help: "most grants in --policy (about 60 bytes of memory each, shared by the request " +
      "threads); a larger file is refused at start, and a reload keeps the policy in force",
  },
  module: { ...SHARED_OPTIONS.module, group: "token" },
  token: { ...SHARED_OPTIONS.token, group: "token" },
  "allow-weak-credential": {
    group: "token",
    kind: "switch",
    help: "start although svc-pin is not on ramfs (tmpfs or disk: systemd-creds calls it weak)",
  },
  workers: {
    group: "limits",
    value: "N",
    kind: "count",
    fallback: 16,
    min: 1,
    max: 1024,
    help: "requests using the token at once; one identity may hold workers-1",
  },
  threads: {
    group: "threads",
    value: "N",
    kind: "count",
    fallback: DEFAULT_THREADS,
    min: 0,
    max: 64,
    help: "threads serving the authenticated socket (0: the main thread alone, its quick " +
      "signatures on a sign thread when the machine has a second core); at most --workers",
  },
  "inline-sign-limit-us": {
    group: "threads",
    value: "MICROSECONDS",
    kind: "count",
    fallback: DEFAULT_INLINE_SIGN_LIMIT_US,
    min: 0,
    max: 1_000_000,
    help: "a key signs on the thread serving its request (on the sign thread with " +
      `--threads 0) until ${SLOW_TO_MOVE} of its last ` +
      `${WINDOW} signatures held it longer than this (microseconds of its CPU, or of waiting when the ` +
      "module slept); then on the thread pool until SIGHUP " +
      "(0: always the pool)",
  },
  "queue-depth": {
    group: "limits",
    value: "N",
    kind: "count",
    fallback: 256,
    min: 1,
    max: 65536,
    help: "silent connections held per listener; past it 503",
  },
  "max-body": {
    group: "limits",
    value: "BYTES",
    kind: "count",
    fallback: 1 << 20,
    min: 1,
    max: 1 << 30,
    help: "largest request body in bytes; past it 413",
  },
  "max-sessions": {
    group: "token",
    value: "N",
    kind: "count",
    fallback: 127,
    min: 1,
    max: 4096,
    help: "session pool cap",
  },
  "audit-dir": { ...SHARED_OPTIONS["audit-dir"], group: "policy" },
  "state-dir": {
    group: "policy",
    value: "DIR",
    kind: "path",
    fallback: "/var/lib/svcd",
    help: "folder of persistent state (refusal counts)",
  },
  "checkpoint-every": {
    group: "checkpoints",
    value: "LINES",
    kind: "count",
    fallback: 1000,
    min: 1,
    max: 1e9,
    help: "audit lines between signed checkpoints",
  },
  "checkpoint-interval": {
    group: "checkpoints",
    value: "SECONDS",
    kind: "count",
    fallback: 60,
    min: 1,
    max: 86400,
    help: "seconds between signed checkpoints while new audit lines arrive",
  },
  "syslog-socket": {
    group: "checkpoints",
    value: "PATH",
    kind: "text",
    fallback: "/dev/log",
    help:
      "syslog socket each checkpoint line is copied to (identifier svcd-audit); 'none': no copy",
  },
  "metrics-socket": {
    group: "metrics",
    value: "PATH",
    kind: "path",
    help: "UNIX socket serving GET /metrics (Prometheus text format); enables the metrics listener",
  },
  "metrics-uid": {
    group: "metrics",
    value: "UID",
    kind: "count",
    min: 0,
    max: 0xfffffffe,
    shownDefault: "the --proxy-uid",
    help: "uid allowed to connect to --metrics-socket",
  },
  "refusal-threshold": {
    group: "limits",
    value: "N",
    kind: "count",
    min: 1,
    max: 1e6,
    fallback: budgetDefaults().threshold,
    help: "refusals before an identity is delayed",
  },
  "refusal-refill": {
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().refillSeconds,
    help: "seconds for one refusal to be forgotten",
  },
  "refusal-base-delay": {
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().baseDelaySeconds,
    help: "delay at the first crossing, seconds; doubles per crossing",
  },
  "refusal-max-delay": {
    group: "limits",
    value: "SECONDS",
    kind: "count",
    min: 1,
    max: 86400,
    fallback: budgetDefaults().maxDelaySeconds,
    help: "ceiling of the delay, seconds",
  },
  "public-socket": {
    group: "public",
    value: "PATH",
    kind: "path",
    help: "public UNIX socket (GET /certificates, POST /ocsp, GET /crl/NAME with --ca-dir); " +
      "enables the public listener",
  },
  "revocation-db": {
    group: "public",
    value: "FILE",
    kind: "path",
    help: "revocation database for /ocsp (openssl ca index.txt); needed with --public-socket " +
      "unless --ca-dir gives it",
  },
  "ocsp-label": {
    group: "public",
    value: "LABEL",
    kind: "text",
    help: "token key that signs OCSP answers; needed with --public-socket",
  },
  "ca-cert": {
    group: "public",
    value: "FILE",
    kind: "path",
    fallback: "/var/lib/svcd/ca/ca.pem",
    help: "CA certificate chain (PEM) served by /certificates, and the chains GET /token states " +
      "for certified keys; the first is the CA OCSP answers for",
  },
  "ocsp-cert": {
    group: "public",
    value: "FILE",
    kind: "path",
    shownDefault: "none: the CA key signs",
    help: "delegated OCSP responder certificate of --ocsp-label",
  },
  "public-url": {
    group: "public",
    value: "URL",
    kind: "text",
    shownDefault: "http://HOST, the request's Host",
    help: "base URL of the public side behind the proxy, for the Link of 404s",
  },
  "public-threads": {
    group: "threads",
    value: "N",
    kind: "count",
    fallback: 2,
    min: 1,
    max: 64,
    help: "threads serving the public socket (each its own isolate, event loop and sessions)",
  },
  "public-nice": {
    group: "threads",
    value: "NICE",
    kind: "count",
    fallback: 19,
    min: 0,
    max: 19,
    help: "nice value of the public threads: they yield the cores to signing when both want them",
  },
  "ocsp-validity": {
    group: "public",
    value: "SECONDS",
    kind: "count",
    fallback: 3600,
    min: 60,
    max: 7 * 86400,
    help: "seconds from thisUpdate to nextUpdate in OCSP answers",
  },
  "ca-dir": {
    group: "public",
    value: "DIR",
    kind: "path",
    help: "CA folder of 'svcd ca': its CRLs (full and partitions) are signed by the CA key, kept " +
      "fresh from --revocation-db (default DIR/index.txt) and served at GET /crl/NAME",
  },
  "crl-dir": {
    group: "public",
    value: "DIR",
    kind: "path",
    fallback: "/var/lib/svcd/crl",
    help: "folder the CRLs are written to atomically and served from (full.crl, full.pem for " +
      "nginx's ssl_crl, K.crl); mirror it at the CA's CRL URL",
  },
  "crl-validity": {
    group: "public",
    value: "SECONDS",
    kind: "count",
    fallback: 7 * 86400,
    min: 4,
    max: 30 * 86400,
    help: "seconds from thisUpdate to nextUpdate in CRLs; each is re-signed when half have passed",
  },
  "ocsp-max-entries": {
    group: "public",
    value: "N",
    kind: "count",
    fallback: MAX_INDEX_ENTRIES,
    min: 1,
    max: 100_000_000,
    help: "most certificates in --revocation-db (about 34 bytes of memory each, shared by the " +
      "public threads); a larger database is refused at start",
  },
});

/** The parsed values of `svcd serve`, each read with its option's type. */
export type ServeOptions = OptionReader<typeof SERVE_OPTIONS>;

/**
 * `values` read through {@link SERVE_OPTIONS}; a value that breaks its option's declaration
 * throws {@link ConfigError} naming the option.
 */
export function readServeOptions(values: OptionValues): ServeOptions {
  return new OptionReader(SERVE_OPTIONS, values, (flag, message) => new ConfigError(flag, message));
}

/**
 * `svcd serve` and `svcd --check-config` as a command group: what `--help` and svcd-serve(8) show,
 * and what the command line is parsed against.
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
  options: cliOptions(SERVE_OPTIONS),
  groups: SERVE_GROUPS,
  notes: "SIGHUP re-reads the policy file; SIGTERM stops accepting, serves the connections made " +
    "before it and exits 0.",
};
