/**
 * The daemon's configuration: one typed structure, parsed from the command line through one table of
 * option specifications, so `svcd serve --help`, `--check-config` and the parser cannot disagree.
 *
 * @example
 * ```ts
 * const config = parseServeArgs(["--socket", "/run/svcd/auth.sock", "--proxy-uid", "33", "--policy", "p"]);
 * ```
 */
import { parseArgs } from "node:util";
import { DEFAULT_MODULE, DEFAULT_TOKEN_LABEL } from "../token/cli.ts";

/** Everything `svcd serve` needs, with defaults applied. */
export interface ServeConfig {
  socket: string;
  proxyUid: number;
  policy: string;
  module: string;
  token: string;
  credentialsDir: string | undefined;
  workers: number;
  queueDepth: number;
  maxBody: number;
  maxSessions: number;
  auditDir: string;
  stateDir: string;
  checkpointEvery: number;
  refusalThreshold: number | undefined;
  refusalRefillSeconds: number | undefined;
  refusalBaseDelaySeconds: number | undefined;
  refusalMaxDelaySeconds: number | undefined;
  publicSocket: string | undefined;
  revocationDb: string | undefined;
  ocspLabel: string | undefined;
}

/** A command-line mistake: the message says which option and what to do. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

type Kind = "path" | "text" | "count";
interface OptionSpec {
  flag: string;
  key: keyof ServeConfig;
  kind: Kind;
  help: string;
  fallback?: string | number;
  required?: boolean;
  min?: number;
  max?: number;
}

/** The options of `svcd serve`, as data: name, type, default, bounds and help. */
export const SERVE_OPTIONS: readonly OptionSpec[] = [
  {
    flag: "socket",
    key: "socket",
    kind: "path",
    fallback: "/run/svcd/auth.sock",
    help: "authenticated UNIX socket",
  },
  {
    flag: "proxy-uid",
    key: "proxyUid",
    kind: "count",
    required: true,
    min: 0,
    max: 0xfffffffe,
    help: "uid of the TLS proxy; every peer's SO_PEERCRED uid must equal it",
  },
  {
    flag: "policy",
    key: "policy",
    kind: "path",
    fallback: "/etc/svcd/policy",
    help: "policy file: subject<TAB>key label per line; re-read on SIGHUP",
  },
  { flag: "module", key: "module", kind: "path", fallback: DEFAULT_MODULE, help: "PKCS#11 module" },
  { flag: "token", key: "token", kind: "text", fallback: DEFAULT_TOKEN_LABEL, help: "token label" },
  {
    flag: "workers",
    key: "workers",
    kind: "count",
    fallback: 16,
    min: 1,
    max: 1024,
    help: "requests using the token at once; one identity may hold workers-1",
  },
  {
    flag: "queue-depth",
    key: "queueDepth",
    kind: "count",
    fallback: 256,
    min: 1,
    max: 65536,
    help: "silent connections held per listener; past it 503",
  },
  {
    flag: "max-body",
    key: "maxBody",
    kind: "count",
    fallback: 1 << 20,
    min: 1,
    max: 1 << 30,
    help: "largest request body in bytes; past it 413",
  },
  {
    flag: "max-sessions",
    key: "maxSessions",
    kind: "count",
    fallback: 127,
    min: 1,
    max: 4096,
    help: "session pool cap",
  },
  {
    flag: "audit-dir",
    key: "auditDir",
    kind: "path",
    fallback: "/var/log/svcd",
    help: "folder of audit.log.NNNNNN files",
  },
  {
    flag: "state-dir",
    key: "stateDir",
    kind: "path",
    fallback: "/var/lib/svcd",
    help: "folder of persistent state (refusal counts)",
  },
  {
    flag: "checkpoint-every",
    key: "checkpointEvery",
    kind: "count",
    fallback: 1000,
    min: 1,
    max: 1e9,
    help: "audit lines between signed checkpoints",
  },
  {
    flag: "refusal-threshold",
    key: "refusalThreshold",
    kind: "count",
    min: 1,
    max: 1e6,
    help: "refusals before an identity is delayed (default: lib/throttle)",
  },
  {
    flag: "refusal-refill",
    key: "refusalRefillSeconds",
    kind: "count",
    min: 1,
    max: 86400,
    help: "seconds for one refusal to be forgotten",
  },
  {
    flag: "refusal-base-delay",
    key: "refusalBaseDelaySeconds",
    kind: "count",
    min: 1,
    max: 86400,
    help: "delay at the first crossing, seconds; doubles per crossing",
  },
  {
    flag: "refusal-max-delay",
    key: "refusalMaxDelaySeconds",
    kind: "count",
    min: 1,
    max: 86400,
    help: "ceiling of the delay, seconds",
  },
  {
    flag: "public-socket",
    key: "publicSocket",
    kind: "path",
    help: "public UNIX socket (certificates, OCSP)",
  },
  {
    flag: "revocation-db",
    key: "revocationDb",
    kind: "path",
    help: "revocation database for /ocsp",
  },
  { flag: "ocsp-label", key: "ocspLabel", kind: "text", help: "label of the OCSP signing key" },
];

/**
 * Parses `svcd serve` arguments into a {@link ServeConfig}; throws {@link ConfigError}.
 *
 * @example
 * ```ts
 * parseServeArgs(["--proxy-uid", "33"]).workers; // 16
 * ```
 */
export function parseServeArgs(
  args: string[],
  env: { get(name: string): string | undefined } = Deno.env,
): ServeConfig {
  const options = Object.fromEntries(
    SERVE_OPTIONS.map((o) => [o.flag, { type: "string" as const }]),
  );
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({ args, options, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}; see 'svcd serve --help'`);
  }
  const config: Record<string, unknown> = { credentialsDir: env.get("CREDENTIALS_DIRECTORY") };
  for (const spec of SERVE_OPTIONS) {
    config[spec.key] = readOption(spec, values[spec.flag] as string | undefined);
  }
  return config as unknown as ServeConfig;
}

function readOption(spec: OptionSpec, raw: string | undefined): string | number | undefined {
  if (raw === undefined) {
    if (spec.required) throw new ConfigError(`--${spec.flag} is required: ${spec.help}`);
    return spec.fallback;
  }
  if (raw === "") throw new ConfigError(`--${spec.flag} is empty: give ${spec.help}`);
  if (spec.kind !== "count") return raw;
  const n = /^[0-9]{1,10}$/.test(raw) ? Number(raw) : NaN;
  const min = spec.min ?? 0, max = spec.max ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(
      `--${spec.flag} must be a whole number from ${min} to ${max} (got '${raw}')`,
    );
  }
  return n;
}

/** The help text of `svcd serve`, generated from {@link SERVE_OPTIONS}. */
export function serveHelp(): string {
  const lines = SERVE_OPTIONS.map((o) => {
    const dflt = o.required
      ? " (required)"
      : o.fallback !== undefined
      ? ` (default ${o.fallback})`
      : "";
    return `  --${o.flag.padEnd(20)} ${o.help}${dflt}`;
  });
  return `usage: svcd serve [options]\n       svcd --check-config [options]\n\noptions:\n${
    lines.join("\n")
  }\n\nThe user PIN is read from $CREDENTIALS_DIRECTORY/svc-pin (systemd LoadCredentialEncrypted).`;
}
