/**
 * A minimal HTTP/1.1 client over a UNIX socket for tests: sends the exact bytes given (so tests can
 * send duplicate or malformed headers) and reads the answer to EOF (the daemon always closes).
 *
 * @example
 * ```ts
 * const res = await request(sock, { method: "POST", path: "/sign", headers: [["X-SVC-Key", "k"]], body });
 * ```
 */

/** A parsed answer. `headers` keeps arrival order; `header()` looks a name up case-insensitively. */
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

/** Writes raw bytes, half-closes nothing, and reads until the server closes. */
export async function rawExchange(socket: string, bytes: Uint8Array): Promise<Uint8Array> {
  const conn = await Deno.connect({ transport: "unix", path: socket });
  try {
    await writeAll(conn, bytes);
    return await readAll(conn);
  } finally {
    try {
      conn.close();
    } catch { /* already closed */ }
  }
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    try {
      off += await conn.write(bytes.subarray(off));
    } catch {
      return; // the server answered early and closed; its answer is still readable
    }
  }
}

/** Reads everything until EOF (or a reset, which ends the answer the same way). */
export async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const buf = new Uint8Array(65536);
  while (true) {
    let n: number | null;
    try {
      n = await conn.read(buf);
    } catch {
      break;
    }
    if (n === null) break;
    chunks.push(buf.slice(0, n));
  }
  const out = new Uint8Array(chunks.reduce((a, c) => a + c.length, 0));
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/** Parses a complete HTTP/1.1 answer with a Content-Length body (or no answer: status 0). */
export function parseResponse(raw: Uint8Array): ClientResponse {
  const text = new TextDecoder("latin1").decode(raw);
  const end = text.indexOf("\r\n\r\n");
  const headText = end < 0 ? text : text.slice(0, end);
  const [statusLine, ...headerLines] = headText.split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? 0);
  const headers = headerLines.filter((l) => l.includes(":")).map((l) => {
    const i = l.indexOf(":");
    return [l.slice(0, i), l.slice(i + 1).trim()] as [string, string];
  });
  const body = end < 0 ? new Uint8Array() : raw.slice(end + 4);
  return {
    status,
    headers,
    body,
    header: (name) => headers.find(([n]) => n.toLowerCase() === name.toLowerCase())?.[1],
    text: () => new TextDecoder().decode(body),
    json: () => JSON.parse(new TextDecoder().decode(body)),
  };
}
