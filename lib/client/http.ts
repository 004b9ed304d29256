/**
 * One connection setting to svcd for a whole command: fetch over a Deno.HttpClient holding the CA
 * and the client certificate (TLS to the proxy), or over a UNIX socket with --insecure-http.
 * Retries 429 and 503 after their Retry-After, at most `retries` times; every failure a caller
 * does not handle becomes one ClientError line saying what happened and what to do.
 *
 * @example
 * ```ts
 * import { SvcdConnection } from "./http.ts";
 * import type { Settings } from "./settings.ts";
 * declare const settings: Settings;
 * const conn = await SvcdConnection.open(settings);
 * const answer = await conn.request("GET", "/token");
 * conn.close();
 * ```
 */
import { ClientError, NOT_CAPABLE_HINT } from "./errors.ts";
import type { Endpoint, Settings } from "./settings.ts";

/** An answer read to its end. */
export interface Answer {
  status: number;
  headers: Headers;
  body: Uint8Array;
}

/** The longest Retry-After the client waits out; a longer one ends the command with what to do. */
export const MAX_RETRY_WAIT_SECONDS = 60;

/** Waits `seconds` before a retry (tests pass one that records instead of waiting). */
export type RetryWait = (seconds: number) => Promise<void>;

const waitSeconds: RetryWait = (seconds) =>
  new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/** A fetch client bound to one svcd address. */
export class SvcdConnection {
  readonly #client: Deno.HttpClient | undefined;
  readonly #endpoint: Endpoint;
  readonly #retries: number;
  readonly #wait: RetryWait;

  private constructor(client: Deno.HttpClient | undefined, settings: Settings, wait: RetryWait) {
    this.#client = client;
    this.#endpoint = settings.endpoint;
    this.#retries = settings.retries;
    this.#wait = wait;
  }

  /** Reads the certificate files and makes the HTTP client; a ClientError says which file failed. */
  static async open(settings: Settings, wait: RetryWait = waitSeconds): Promise<SvcdConnection> {
    return new SvcdConnection(await httpClient(settings.endpoint), settings, wait);
  }

  /** The address as the user gave it, for messages. */
  get address(): string {
    const e = this.#endpoint;
    return e.kind === "unix" ? `unix:${e.path}` : e.base;
  }

  /**
   * Sends one request; retries 429/503 after Retry-After. Returns any other answer (the caller
   * decides what 200, 403, 422… mean for it); a transport or TLS failure is a ClientError.
   */
  async request(
    method: "GET" | "POST",
    path: string,
    headers: Array<[string, string]> = [],
    body?: Uint8Array,
  ): Promise<Answer> {
    for (let attempt = 0;; attempt++) {
      const answer = await this.#send(method, path, headers, body);
      if (answer.status !== 429 && answer.status !== 503) return answer;
      const after = retryAfterSeconds(answer.headers);
      if (attempt >= this.#retries || after > MAX_RETRY_WAIT_SECONDS) {
        throw new ClientError(busyMessage(answer.status, after, attempt));
      }
      await this.#wait(after);
    }
  }

  async #send(
    method: string,
    path: string,
    headers: Array<[string, string]>,
    body: Uint8Array | undefined,
  ): Promise<Answer> {
    try {
      if (this.#endpoint.kind === "unix") {
        return await unixExchange(this.#endpoint.path, method, path, headers, body);
      }
      const res = await fetch(`${this.#endpoint.base}${path}`, {
        method,
        headers,
        body: body as BufferSource | undefined,
        client: this.#client,
      });
      return { status: res.status, headers: res.headers, body: await res.bytes() };
    } catch (err) {
      throw new ClientError(transportMessage(this.address, this.#endpoint, err));
    }
  }

  /** Releases the HTTP client (its pooled connections). */
  close(): void {
    this.#client?.close();
  }
}

async function httpClient(endpoint: Endpoint): Promise<Deno.HttpClient | undefined> {
  // fetch over a UNIX socket speaks to it as to a proxy (absolute-form request targets), which
  // svcd does not take: that path has its own exchange below.
  if (endpoint.kind === "unix") return undefined;
  // One after the other: when several files are missing, the message names the first of them,
  // always the same one (Promise.all would name whichever read failed first).
  const caCert = await readPem(endpoint.caCert, "--ca-cert", "SVCD_CACERT");
  const cert = await readPem(endpoint.clientCert, "--client-cert", "SVCD_CLIENT_CERT");
  const key = await readPem(endpoint.clientKey, "--client-key", "SVCD_CLIENT_KEY");
  try {
    // HTTP/1.1 only: the proxy closes nothing between requests, so a command reuses its TLS
    // connection for every file.
    return Deno.createHttpClient({ caCerts: [caCert], cert, key, http2: false });
  } catch (err) {
    throw new ClientError(
      `the client certificate cannot be used (${firstLine(err)}): --client-cert and ` +
        "--client-key must be PEM files that belong together",
    );
  }
}

async function readPem(path: string, flag: string, variable: string): Promise<string> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new ClientError(`cannot read ${path} (${flag} or ${variable}): ${firstLine(err)}`);
  }
  if (!text.includes("-----BEGIN ")) {
    throw new ClientError(`${path} (${flag} or ${variable}) is not a PEM file: give the PEM form`);
  }
  return text;
}

/**
 * One HTTP/1.1 exchange on a UNIX socket, read until the server closes (svcd closes every
 * connection); --insecure-http only.
 */
async function unixExchange(
  socket: string,
  method: string,
  path: string,
  headers: Array<[string, string]>,
  body: Uint8Array | undefined,
): Promise<Answer> {
  const lines = [`${method} ${path} HTTP/1.1`, "Host: svcd", "Connection: close"];
  for (const [name, value] of headers) lines.push(`${name}: ${value}`);
  if (body) lines.push(`Content-Length: ${body.length}`);
  const head = new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n");
  using conn = await Deno.connect({ transport: "unix", path: socket });
  await writeAll(conn, head);
  if (body) await writeAll(conn, body);
  const raw = new Uint8Array(await new Response(conn.readable).arrayBuffer());
  return parseAnswer(raw);
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

function parseAnswer(raw: Uint8Array): Answer {
  let end = -1;
  for (let i = 0; i + 3 < raw.length; i++) {
    if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new Error("the server closed the connection without a complete answer");
  const [statusLine, ...fields] = new TextDecoder().decode(raw.subarray(0, end)).split("\r\n");
  const status = Number(statusLine.split(" ")[1]);
  const headers = new Headers();
  for (const f of fields) {
    const colon = f.indexOf(":");
    if (colon > 0) headers.append(f.slice(0, colon).trim(), f.slice(colon + 1).trim());
  }
  if (headers.get("transfer-encoding")) throw new Error("a chunked answer on a UNIX socket");
  const length = headers.get("content-length");
  const rest = raw.subarray(end + 4);
  return { status, headers, body: length === null ? rest : rest.subarray(0, Number(length)) };
}

/** Retry-After in seconds (a delay; an HTTP date is turned into one); 1 when absent or unreadable. */
export function retryAfterSeconds(headers: Headers): number {
  const value = headers.get("retry-after")?.trim();
  if (!value) return 1;
  if (/^\d+$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? 1 : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

function busyMessage(status: number, after: number, retried: number): string {
  const tries = retried === 0 ? "" : ` after ${retried} ${retried === 1 ? "retry" : "retries"}`;
  if (status === 429) {
    return `svcd is throttling this client (429, Retry-After ${after} s)${tries}: wait that ` +
      "long and run again, at a lower rate (too many refused or concurrent requests from your " +
      "certificate); --retries sets how often to wait and retry";
  }
  return `svcd is busy (503, Retry-After ${after} s)${tries}: run again later; --retries sets ` +
    "how often to wait and retry (the operator may raise its --queue-depth)";
}

function transportMessage(address: string, endpoint: Endpoint, err: unknown): string {
  const detail = errorChain(err);
  if (err instanceof Deno.errors.NotCapable) {
    // The daemon's own permission set (its compiled executable) has no network access.
    return `this svcd may not reach ${address} (${detail}): ${NOT_CAPABLE_HINT}`;
  }
  if (
    /certificate|UnknownIssuer|NotValidForName|BadSignature|Expired|CaUsedAsEndEntity/i.test(detail)
  ) {
    const ca = endpoint.kind === "https" ? ` against ${endpoint.caCert}` : "";
    return `TLS failed: the server certificate of ${address} does not verify${ca} ` +
      `(${detail}): give --ca-cert (SVCD_CACERT) the CA that issued it, and the host name it ` +
      "was issued for in --addr";
  }
  if (/refused/i.test(detail)) {
    return `cannot connect to ${address} (connection refused): check --addr (SVCD_ADDR) and ` +
      "that the proxy is running";
  }
  if (/dns|lookup|resolve/i.test(detail)) {
    return `cannot resolve the host of ${address} (${detail}): check --addr (SVCD_ADDR)`;
  }
  if (/No such file|NotFound|ENOENT/i.test(detail) && endpoint.kind === "unix") {
    return `no socket at ${endpoint.path}: check --addr (SVCD_ADDR) and that svcd is running`;
  }
  if (/handshake|alert|tls|reset|closed|eof/i.test(detail) && endpoint.kind === "https") {
    return `the TLS connection to ${address} failed (${detail}): the proxy may have refused ` +
      "your client certificate; check --client-cert and --client-key (SVCD_CLIENT_CERT, " +
      "SVCD_CLIENT_KEY), and that the certificate is current and not revoked";
  }
  return `the request to ${address} failed (${detail}): check --addr (SVCD_ADDR) and the network`;
}

/** The messages of an error and its causes, on one line. */
function errorChain(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e !== undefined && parts.length < 5;) {
    if (e instanceof Error) {
      parts.push(firstLine(e));
      e = e.cause;
    } else {
      parts.push(String(e));
      break;
    }
  }
  return parts.join(": ");
}

function firstLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split("\n")[0];
}
