/**
 * A minimal HTTP/1.1 client over a UNIX socket for tests: sends the exact bytes given (so tests can
 * send duplicate or malformed headers) and reads the answer to EOF (the daemon always closes).
 *
 * @example
 * ```ts
 * declare const sock: string, body: Uint8Array;
 * const res = await request(sock, { method: "POST", path: "/sign", headers: [["X-SVC-Key", "k"]], body });
 * ```
 */

import { exchange, parseRawResponse, readToEnd } from "./raw_http.ts";

/** A parsed answer. `headers` keeps arrival order, names lower-cased; `header()` looks one up. */
export interface ClientResponse {
  status: number;
  headers: Array<[string, string]>;
  body: Uint8Array;
  header(name: string): string | undefined;
  text(): string;
  json(): unknown;
}

/** Request description; `headers` are sent in order, exactly as given. */
export interface ClientRequest {
  method?: string;
  path?: string;
  headers?: Array<[string, string]>;
  body?: Uint8Array | string;
}

const te = new TextEncoder();

/** Sends one request and returns the parsed answer. Content-Length is added when a body is given. */
export async function request(socket: string, req: ClientRequest): Promise<ClientResponse> {
  return parseResponse(await rawExchange(socket, encodeRequest(req)));
}

/**
 * The bytes of a request as `request()` sends them.
 *
 * @example
 * ```ts
 * declare const conn: Deno.Conn;
 * await conn.write(encodeRequest({ method: "POST", path: "/sign", body: "m" }));
 * ```
 */
export function encodeRequest(req: ClientRequest): Uint8Array {
  const body = typeof req.body === "string" ? te.encode(req.body) : req.body ?? new Uint8Array();
  const lines = [`${req.method ?? "GET"} ${req.path ?? "/"} HTTP/1.1`, "Host: svcd"];
  for (const [name, value] of req.headers ?? []) lines.push(`${name}: ${value}`);
  if (req.method && req.method !== "GET") lines.push(`Content-Length: ${body.length}`);
  const head = te.encode(lines.join("\r\n") + "\r\n\r\n");
  const bytes = new Uint8Array(head.length + body.length);
  bytes.set(head);
  bytes.set(body, head.length);
  return bytes;
}

/**
 * Writes raw bytes and reads until the server closes (./raw_http.ts's exchange); a reset
 * before any byte is an empty answer.
 *
 * @example
 * ```ts
 * declare const sock: string;
 * const raw = await rawExchange(sock, new TextEncoder().encode("GET / HTTP/1.1\r\nHost: svcd\r\n\r\n"));
 * ```
 */
export async function rawExchange(socket: string, bytes: Uint8Array): Promise<Uint8Array> {
  try {
    return await exchange(socket, bytes);
  } catch (err) {
    // Closed without a byte while our request was unread: the kernel resets. No answer at all.
    if (err instanceof Deno.errors.ConnectionReset) return new Uint8Array();
    throw err;
  }
}

/**
 * Reads everything until EOF (a reset after data ends the answer the same way).
 */
export const readAll: (conn: Deno.Conn) => Promise<Uint8Array> = readToEnd;

/**
 * Parses a complete HTTP/1.1 answer; no bytes at all (the daemon closed without answering) is
 * status 0.
 *
 * @example
 * ```ts
 * declare const conn: Deno.Conn;
 * parseResponse(await readAll(conn)).status;
 * ```
 */
export function parseResponse(raw: Uint8Array): ClientResponse {
  const { status, headers, body } = raw.length === 0
    ? { status: 0, headers: [] as Array<[string, string]>, body: new Uint8Array() }
    : parseRawResponse(raw);
  return {
    status,
    headers,
    body,
    header: (name) => headers.find(([n]) => n === name.toLowerCase())?.[1],
    text: () => new TextDecoder().decode(body),
    json: () => JSON.parse(new TextDecoder().decode(body)),
  };
}

/** One key as GET /token lists it (the members the certificate tests read). */
export interface ListedKey {
  label: string;
  key_type: string;
  /** SubjectPublicKeyInfo, base64 DER. */
  public_key: string;
  certificate?: string;
  chain?: string[];
}

/**
 * The keys GET /token lists for `subject`, by label; asserts a 200.
 * Example: `(await tokenKeys(d.socket, "CN=alice")).get("k")?.certificate`.
 */
export async function tokenKeys(socket: string, subject: string): Promise<Map<string, ListedKey>> {
  const r = await request(socket, {
    method: "GET",
    path: "/token",
    headers: [["X-SVC-Client-Subject", subject]],
  });
  if (r.status !== 200) throw new Error(`GET /token answered ${r.status}: ${r.text()}`);
  const keys = (r.json() as { keys: ListedKey[] }).keys;
  return new Map(keys.map((k) => [k.label, k]));
}
