/**
 * Test helpers for anything served by a Listener: a raw HTTP/1.1 exchange over a UNIX socket (bytes
 * in, every byte until the server closes out) and a response splitter. Used by tests only.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { exchange, parseRawResponse } from "./raw_http.ts";
 * declare const path: string;
 * const res = parseRawResponse(await exchange(path, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
 * assert.equal(res.status, 200);
 * ```
 */
import { concat, latin1, latin1Bytes } from "../../lib/bytes/mod.ts";

/** A response as read off the wire. */
export interface RawResponse {
  status: number;
  /** Header list in arrival order, names lower-cased. */
  headers: Array<[string, string]>;
  body: Uint8Array;
  /** Every byte received, for byte-for-byte comparisons. */
  raw: Uint8Array;
}

/** Bytes of a latin1 string (one byte per char). @example bytes("GET / HTTP/1.1\r\nHost: svcd\r\n\r\n") */
export function bytes(s: string): Uint8Array {
  return latin1Bytes(s);
}

/**
 * Connect, send `request` (string = latin1), half-close only if asked, and read until the server
 * closes. Returns every byte received (empty when the server closed without a byte).
 * @example const raw = await exchange(path, "GET / HTTP/1.1\r\nHost: svcd\r\n\r\n");
 */
export async function exchange(
  path: string,
  request: string | Uint8Array,
  opts: { halfClose?: boolean } = {},
): Promise<Uint8Array> {
  const conn = await Deno.connect({ transport: "unix", path });
  try {
    const data = typeof request === "string" ? bytes(request) : request;
    try {
      await writeAll(conn, data);
    } catch {
      // The server may answer and close before taking the whole request (413, 400): read anyway.
    }
    if (opts.halfClose) await conn.closeWrite().catch(() => {});
    return await readToEnd(conn);
  } finally {
    try {
      conn.close();
    } catch {
      // already closed
    }
  }
}

/**
 * Write all of `data` to a connection.
 * @example await writeAll(conn, bytes("GET / HTTP/1.1\r\nHost: svcd\r\n"));
 */
export async function writeAll(conn: Deno.Conn, data: Uint8Array): Promise<void> {
  for (let at = 0; at < data.length;) at += await conn.write(data.subarray(at));
}

/**
 * Read `n` bytes, or fewer if the stream ends first (e.g. an interim `100 Continue`).
 * @example const first = await readAtMost(conn, 25);
 */
export async function readAtMost(conn: Deno.Conn, n: number): Promise<Uint8Array> {
  const buf = new Uint8Array(n);
  let got = 0;
  while (got < n) {
    const r = await conn.read(buf.subarray(got));
    if (r === null) break;
    got += r;
  }
  return buf.subarray(0, got);
}

/**
 * Read until end of stream (a reset after data counts as the end).
 * @example const all = await readToEnd(conn);
 */
export async function readToEnd(conn: Deno.Conn): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    let n: number | null;
    try {
      n = await conn.read(buf);
    } catch (e) {
      if (e instanceof Deno.errors.ConnectionReset && total > 0) break;
      throw e;
    }
    if (n === null) break;
    parts.push(buf.slice(0, n));
    total += n;
  }
  return concat(parts);
}

/**
 * Split a raw HTTP/1.1 response; throws when it is not one.
 * @example const { status, headers, body } = parseRawResponse(raw);
 */
export function parseRawResponse(raw: Uint8Array): RawResponse {
  let end = -1;
  for (let i = 0; i + 3 < raw.length; i++) {
    if (raw[i] === 13 && raw[i + 1] === 10 && raw[i + 2] === 13 && raw[i + 3] === 10) {
      end = i;
      break;
    }
  }
  if (end < 0) {
    throw new Error(`not an HTTP response: ${JSON.stringify(latin1(raw.subarray(0, 200)))}`);
  }
  const lines = latin1(raw.subarray(0, end)).split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(lines[0]);
  if (!m) throw new Error(`bad status line ${JSON.stringify(lines[0])}`);
  const headers = lines.slice(1).map((l): [string, string] => {
    const colon = l.indexOf(":");
    return [l.slice(0, colon).toLowerCase(), l.slice(colon + 1).trim()];
  });
  return { status: Number(m[1]), headers, body: raw.slice(end + 4), raw };
}

/**
 * The one value of a header (lower-case name), or undefined; throws if it appears twice.
 * @example header(res, "content-type")
 */
export function header(res: RawResponse, name: string): string | undefined {
  const found = res.headers.filter(([n]) => n === name);
  if (found.length > 1) throw new Error(`header ${name} appears ${found.length} times`);
  return found[0]?.[1];
}

/**
 * Poll `cond` until it holds; throws after `guardMs` (a failure guard, not a timing assertion).
 * @example await until(() => listener.stats().waiting === 0);
 */
export async function until(
  cond: () => boolean,
  guardMs = 30_000,
  what = "condition",
): Promise<void> {
  const start = performance.now();
  while (!cond()) {
    if (performance.now() - start > guardMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * curl `url` over the socket at `path` as uid/gid 65534 with no groups. The socket and its folder
 * are opened to every uid first, so that only the listener's uid check can refuse the client.
 */
export async function curlAsNobody(path: string, url: string): Promise<Deno.CommandOutput> {
  Deno.chmodSync(path.slice(0, path.lastIndexOf("/")), 0o755);
  Deno.chmodSync(path, 0o666);
  const asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
  return await new Deno.Command("setpriv", {
    args: [...asNobody, "curl", "-sS", "-o", "-", "--unix-socket", path, url],
    stdout: "piped",
    stderr: "piped",
  }).output();
}
