/**
 * The fuzzer's own reading of request bytes, written from RFC 9112 and the README, independent of
 * lib/http (which uses llhttp): it says whether the bytes are one complete request the daemon may
 * serve, a request it must refuse, or bytes that are not yet a whole request. It is deliberately
 * liberal where the RFC lets a server choose (chunk extensions, a Transfer-Encoding name in another
 * case, control bytes other than NUL in a value): there it accepts, so it only says "refuse" where a
 * refusal is certain — a 2xx for such bytes is always a finding.
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * const v = readReference(bytes, { maxHeaderBytes: 16384, maxBodyBytes: 1 << 20 });
 * if (v.kind === "message") v.body; // exactly the bytes a signature may cover
 * ```
 */
import { latin1 } from "../../lib/bytes/mod.ts";

/** What the bytes are. `ambiguous` marks a message whose refusal is also correct. */
export type Verdict =
  | { kind: "refuse"; why: string }
  | { kind: "incomplete"; why: string }
  | {
    kind: "message";
    method: string;
    target: string;
    version: "1.0" | "1.1";
    /** Names lower-cased, values with surrounding whitespace removed, one char per byte. */
    headers: Array<[string, string]>;
    body: Uint8Array;
    ambiguous?: string;
  };

/** The daemon's documented limits the reference applies. */
export interface ReferenceLimits {
  maxHeaderBytes: number;
  maxBodyBytes: number;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([^ ]+) ([^ ]+) HTTP\/1\.([01])$/;
const CR = 13;
const LF = 10;

/**
 * Reads `bytes` as one HTTP/1.x request.
 *
 * @example
 * ```ts
 * declare const limits: ReferenceLimits;
 * readReference(new TextEncoder().encode("GET /health HTTP/1.1\r\nHost: a\r\n\r\n"), limits).kind; // "message"
 * ```
 */
export function readReference(bytes: Uint8Array, limits: ReferenceLimits): Verdict {
  // RFC 9112 §2.2: a server SHOULD ignore empty lines before the request-line.
  let lead = 0;
  while (bytes[lead] === CR && bytes[lead + 1] === LF) lead += 2;
  const verdict = readMessage(bytes.subarray(lead), limits);
  if (lead > 0 && verdict.kind === "message") {
    verdict.ambiguous ??= "empty lines before the request";
  }
  return verdict;
}

function readMessage(bytes: Uint8Array, limits: ReferenceLimits): Verdict {
  const headEnd = findHeadEnd(bytes);
  const headBytes = headEnd < 0 ? bytes : bytes.subarray(0, headEnd);
  const bare = bareLineEnd(headBytes);
  if (bare) return { kind: "refuse", why: bare };
  if (headEnd < 0) {
    if (bytes.length > limits.maxHeaderBytes + 4) return { kind: "refuse", why: "head too long" };
    return { kind: "incomplete", why: "head not finished" };
  }
  let ambiguous: string | undefined;
  // The README's limit is on "request line + headers"; where exactly the CRLFs count is the
  // daemon's choice within a few bytes.
  if (headEnd > limits.maxHeaderBytes + 4) return { kind: "refuse", why: "head too long" };
  if (headEnd > limits.maxHeaderBytes - 4) ambiguous = "head size at the limit";
  const lines = latin1(headBytes).split("\r\n");
  const m = REQUEST_LINE.exec(lines[0]);
  if (!m || !TOKEN.test(m[1]) || !/^\/[\x21-\x7e]*$/.test(m[2])) {
    return { kind: "refuse", why: "request line" };
  }
  const version = m[3] === "1" ? "1.1" : "1.0";
  const headers: Array<[string, string]> = [];
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    if (line[0] === " " || line[0] === "\t") return { kind: "refuse", why: "obs-fold" };
    if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) {
      return { kind: "refuse", why: "header name" };
    }
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (value.includes("\0")) return { kind: "refuse", why: "NUL in a value" };
    // deno-lint-ignore no-control-regex -- control bytes are exactly what this looks for
    if (/[\x01-\x08\x0a-\x1f\x7f]/.test(value)) ambiguous ??= "control byte in a value";
    headers.push([line.slice(0, colon).toLowerCase(), value]);
  }
  const all = (name: string) => headers.filter(([n]) => n === name).map(([, v]) => v);
  const hosts = all("host").length;
  if (hosts > 1 || (version === "1.1" && hosts !== 1)) return { kind: "refuse", why: "Host" };
  const expect = all("expect");
  // RFC 9110 §10.1.1: an expectation other than 100-continue MAY be answered 417, not must.
  if (expect.some((e) => e.toLowerCase() !== "100-continue") || expect.length > 1) {
    ambiguous ??= "Expect";
  }
  if (all("upgrade").length > 0) ambiguous ??= "Upgrade";
  const message = (body: Uint8Array): Verdict => ({
    kind: "message",
    method: m[1],
    target: m[2],
    version,
    headers,
    body,
    ambiguous,
  });
  const te = all("transfer-encoding");
  const cl = all("content-length");
  const rest = bytes.subarray(headEnd + 4);
  if (te.length > 0) {
    if (te.length > 1 || cl.length > 0 || version !== "1.1") {
      return { kind: "refuse", why: "Transfer-Encoding" };
    }
    if (te[0].toLowerCase() !== "chunked") return { kind: "refuse", why: "transfer coding" };
    if (te[0] !== "chunked") ambiguous ??= "Transfer-Encoding spelled in another case";
    const chunked = readChunked(rest, limits.maxBodyBytes);
    return chunked.kind === "body" ? message(chunked.body) : chunked;
  }
  let length = 0;
  if (cl.length > 0) {
    if (cl.some((v) => !/^[0-9]+$/.test(v))) return { kind: "refuse", why: "Content-Length" };
    if (new Set(cl.map((v) => BigInt(v))).size > 1) return { kind: "refuse", why: "two lengths" };
    if (cl.length > 1) ambiguous ??= "Content-Length repeated with one value";
    const n = BigInt(cl[0]);
    if (n > BigInt(limits.maxBodyBytes)) return { kind: "refuse", why: "body too large" };
    length = Number(n);
  }
  if (rest.length < length) return { kind: "incomplete", why: "body not finished" };
  if (rest.length > length) {
    // Empty lines after a message may be read as the (ignored) preamble of a next one (RFC 9112 §2.2).
    if (!onlyLineEnds(rest.subarray(length))) {
      return { kind: "refuse", why: "bytes after the message" };
    }
    ambiguous ??= "empty lines after the message";
  }
  return message(rest.slice(0, length));
}

function onlyLineEnds(b: Uint8Array): boolean {
  return b.every((x) => x === CR || x === LF);
}

function findHeadEnd(b: Uint8Array): number {
  for (let i = 0; i + 3 < b.length; i++) {
    if (b[i] === CR && b[i + 1] === LF && b[i + 2] === CR && b[i + 3] === LF) return i;
  }
  return -1;
}

/** A LF without its CR, or a CR without its LF, in the head (not at its very end). */
function bareLineEnd(head: Uint8Array): string | undefined {
  for (let i = 0; i < head.length; i++) {
    if (head[i] === LF && (i === 0 || head[i - 1] !== CR)) return "bare LF";
    if (head[i] === CR && i + 1 < head.length && head[i + 1] !== LF) return "bare CR";
  }
  return undefined;
}

type Chunked =
  | { kind: "body"; body: Uint8Array }
  | { kind: "refuse"; why: string }
  | { kind: "incomplete"; why: string };

/** RFC 9112 §7.1 chunked coding; a trailer field is refused (README), so is any byte after it. */
function readChunked(b: Uint8Array, maxBody: number): Chunked {
  const parts: Uint8Array[] = [];
  let total = 0;
  let at = 0;
  for (;;) {
    const eol = indexOfCrlf(b, at);
    if (eol < 0) {
      return bareIn(b, at) ?? { kind: "incomplete", why: "chunk size line" };
    }
    const line = latin1(b.subarray(at, eol));
    const m = /^([0-9A-Fa-f]+)([ \t]*;.*)?$/.exec(line);
    // deno-lint-ignore no-control-regex -- control bytes are exactly what this looks for
    if (!m || /[\x00-\x08\x0a-\x1f\x7f]/.test(line)) return { kind: "refuse", why: "chunk size" };
    const size = BigInt(`0x${m[1]}`);
    if (size + BigInt(total) > BigInt(maxBody)) return { kind: "refuse", why: "body too large" };
    at = eol + 2;
    if (size === 0n) break;
    const n = Number(size);
    if (b.length < at + n + 2) return { kind: "incomplete", why: "chunk data" };
    parts.push(b.subarray(at, at + n));
    total += n;
    at += n;
    if (b[at] !== CR || b[at + 1] !== LF) return { kind: "refuse", why: "chunk end" };
    at += 2;
  }
  if (b.length < at + 2) {
    if (b.length > at && b[at] !== CR) return { kind: "refuse", why: "trailer" };
    return { kind: "incomplete", why: "last CRLF" };
  }
  if (b[at] !== CR || b[at + 1] !== LF) return { kind: "refuse", why: "trailer" };
  if (b.length > at + 2 && !onlyLineEnds(b.subarray(at + 2))) {
    return { kind: "refuse", why: "bytes after the message" };
  }
  const body = new Uint8Array(total);
  let o = 0;
  for (const p of parts) body.set(p, (o += p.length) - p.length);
  return { kind: "body", body };
}

function indexOfCrlf(b: Uint8Array, from: number): number {
  for (let i = from; i + 1 < b.length; i++) if (b[i] === CR && b[i + 1] === LF) return i;
  return -1;
}

function bareIn(b: Uint8Array, from: number): Chunked | undefined {
  for (let i = from; i < b.length; i++) {
    if (b[i] === LF) return { kind: "refuse", why: "bare LF in chunk size" };
  }
  return undefined;
}
