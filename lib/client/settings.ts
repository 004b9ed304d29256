/**
 * Where `svcd client` reaches svcd and with which certificates: flags first, else the environment
 * in Vault's convention (SVCD_ADDR, SVCD_CACERT, SVCD_CLIENT_CERT, SVCD_CLIENT_KEY). An address is
 * `https://host[:port]` (the operator's nginx, with a client certificate), or with
 * `--insecure-http` only, `unix:/path` (svcd's socket on this host, for tests). Plain HTTP over TCP
 * is never taken: it would send messages and signatures unprotected across a network.
 *
 * @example
 * ```ts
 * import { resolveSettings } from "./settings.ts";
 * const s = resolveSettings({ addr: "https://sign.example.org" }, {
 *   SVCD_CACERT: "ca.pem", SVCD_CLIENT_CERT: "me.pem", SVCD_CLIENT_KEY: "me.key",
 * });
 * s.endpoint; // { kind: "https", base: "https://sign.example.org" }
 * ```
 */
import { ClientError } from "./errors.ts";

/** The variables read from the environment, each standing for the flag beside it. */
export const ENVIRONMENT = {
  SVCD_ADDR: "--addr",
  SVCD_CACERT: "--ca-cert",
  SVCD_CLIENT_CERT: "--client-cert",
  SVCD_CLIENT_KEY: "--client-key",
} as const;

/** svcd's default --max-body: the limit assumed of a server that does not state its own. */
export const DEFAULT_MAX_BODY = 1 << 20;
/** How many times a 429 or 503 is retried after its Retry-After. */
export const DEFAULT_RETRIES = 3;

/** How requests travel: TLS through the proxy, or plain HTTP on a UNIX socket (tests only). */
export type Endpoint =
  | { kind: "https"; base: string; caCert: string; clientCert: string; clientKey: string }
  | { kind: "unix"; base: string; path: string };

/** Everything a command needs to reach svcd. */
export interface Settings {
  endpoint: Endpoint;
  retries: number;
  /** `--max-body` as given; undefined: the server's own limit decides ({@link bodyLimit}). */
  maxBody?: number;
}

/** The largest body sent to svcd, and who set it (named when a file is refused for it). */
export interface BodyLimit {
  bytes: number;
  /**
   * `server`: GET /token's max_body; `flag`: --max-body, below the server's limit or with a server
   * that states none; `default`: svcd's default, for a server that states none.
   */
  from: "server" | "flag" | "default";
  /** The server's stated limit, when --max-body is below it. */
  served?: number;
}

/**
 * The limit a body is checked against before it is sent. --max-body only lowers the server's
 * stated limit (to a proxy's smaller one): a larger body would be refused after its upload.
 */
export function bodyLimit(given: number | undefined, served: number | undefined): BodyLimit {
  if (served !== undefined && (given === undefined || given >= served)) {
    return { bytes: served, from: "server" };
  }
  if (given !== undefined) return { bytes: given, from: "flag", served };
  return { bytes: DEFAULT_MAX_BODY, from: "default" };
}

/** How a refusal names the limit: the number and where it came from. */
export function describeLimit(limit: BodyLimit): string {
  switch (limit.from) {
    case "server":
      return `the server takes at most ${limit.bytes} bytes (GET /token max_body)`;
    case "flag":
      return `--max-body allows at most ${limit.bytes} bytes`;
    case "default":
      return `the server takes at most ${limit.bytes} bytes (svcd's default --max-body; this ` +
        "server states no max_body in GET /token)";
  }
}

/** The connection flags as given, each checked against its option (absent: not given). */
export interface SettingFlags {
  addr?: string;
  "ca-cert"?: string;
  "client-cert"?: string;
  "client-key"?: string;
  "insecure-http"?: boolean;
  retries?: number;
  "max-body"?: number;
}

/** Flags over the environment; a ClientError (usage) says which setting is missing or wrong. */
export function resolveSettings(
  flags: SettingFlags,
  env: Record<string, string | undefined>,
): Settings {
  const addr = flags.addr ?? env.SVCD_ADDR;
  if (!addr) {
    throw usage("no address: give --addr https://HOST[:PORT] or set SVCD_ADDR");
  }
  const retries = flags.retries ?? DEFAULT_RETRIES;
  return { endpoint: resolveEndpoint(addr, flags, env), retries, maxBody: flags["max-body"] };
}

function resolveEndpoint(
  addr: string,
  flags: SettingFlags,
  env: Record<string, string | undefined>,
): Endpoint {
  if (/^http:/i.test(addr)) {
    throw usage(
      `'${addr}' is plain HTTP over TCP: reach svcd through its proxy, --addr https://HOST[:PORT] ` +
        "with a client certificate (--insecure-http takes only unix:/PATH, svcd's socket on " +
        "this host, for tests)",
    );
  }
  if (addr.startsWith("unix:")) {
    if (!flags["insecure-http"]) {
      throw usage(
        `'${addr}' is not HTTPS: svcd is reached through its proxy over https:// with a client ` +
          "certificate; --insecure-http allows plain HTTP (tests against a local socket only)",
      );
    }
    const path = addr.replace(/^unix:(\/\/)?/, "");
    if (!path.startsWith("/")) {
      throw usage(`'${addr}': a UNIX socket address is unix:/absolute/path`);
    }
    return { kind: "unix", base: "http://svcd", path };
  }
  let url: URL;
  try {
    url = new URL(addr);
  } catch {
    throw usage(`'${addr}' is not an address: give https://HOST[:PORT] (--addr or SVCD_ADDR)`);
  }
  if (url.protocol !== "https:") {
    throw usage(`'${addr}': the address must start with https:// (--addr or SVCD_ADDR)`);
  }
  const file = (flag: keyof typeof FILE_SETTINGS) => {
    const variable = FILE_SETTINGS[flag];
    const value = flags[flag] ?? env[variable];
    if (!value) {
      throw usage(`HTTPS needs --${flag} FILE (or ${variable}): ${FILE_HELP[flag]}`);
    }
    return value;
  };
  return {
    kind: "https",
    base: trimSlash(url.origin),
    caCert: file("ca-cert"),
    clientCert: file("client-cert"),
    clientKey: file("client-key"),
  };
}

const FILE_SETTINGS = {
  "ca-cert": "SVCD_CACERT",
  "client-cert": "SVCD_CLIENT_CERT",
  "client-key": "SVCD_CLIENT_KEY",
} as const;

const FILE_HELP = {
  "ca-cert": "the PEM CA certificate that issued the proxy's server certificate",
  "client-cert": "your PEM client certificate, issued by the operator's CA",
  "client-key": "the PEM private key of your client certificate",
} as const;

function trimSlash(s: string): string {
  return s.replace(/\/+$/, "");
}

function usage(message: string): ClientError {
  return new ClientError(message, { usage: true });
}
