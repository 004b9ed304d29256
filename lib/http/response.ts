/**
 * Serialises a handler's response to bytes: status line, the handler's headers (checked), then
 * Date, Content-Length and Connection: close, which only the listener writes.
 *
 * @example
 * ```ts
 * const bytes = serializeResponse({ status: 200, body: "ok" });
 * ```
 */
import type { HttpResponse } from "./types.ts";

const REASONS: Record<number, string> = {
  100: "Continue",
  200: "OK",
  201: "Created",
  204: "No Content",
  400: "Bad Request",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  408: "Request Timeout",
  411: "Length Required",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  417: "Expectation Failed",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
};

/**
 * The standard reason phrase of a status, or undefined for one the listener does not use.
 *
 * @example
 * ```ts
 * reasonPhrase(422); // → "Unprocessable Content"
 * ```
 */
export function reasonPhrase(status: number): string | undefined {
  return REASONS[status];
}

/** Header names the listener owns; a handler's copies are an error. */
const RESERVED = new Set(["content-length", "connection", "transfer-encoding", "date"]);
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible latin1, space and tab; no CR, LF, NUL or other controls (no response splitting). */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

const encoder = new TextEncoder();
let dateSecond = -1;
let dateValue = "";

function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateValue = new Date(now).toUTCString();
  }
  return dateValue;
}

/**
 * The bytes of a response; throws (naming the fault) on a status out of range, a header the
 * listener owns, or a header name or value that could split the response. `headOnly` (the answer to
 * HEAD) keeps Content-Length but leaves the body out.
 */
export function serializeResponse(res: HttpResponse, headOnly = false): Uint8Array {
  return serializeResponseInto(res, headOnly);
}

/**
 * As {@link serializeResponse}, written into `scratch` when it fits: the result is then a view of
 * `scratch`, good until the next use of it (the listener sends it at once). A typed array over 64
 * bytes costs Deno an off-heap allocation and a later sweep; a reused one costs neither.
 */
export function serializeResponseInto(
  res: HttpResponse,
  headOnly: boolean,
  scratch?: Uint8Array,
): Uint8Array {
  const status = res.status;
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    throw new Error(`response status ${status} is not an integer in 200..599`);
  }
  const body = typeof res.body === "string" ? encoder.encode(res.body) : (res.body ?? EMPTY);
  let head = `HTTP/1.1 ${status} ${REASONS[status] ?? "Status"}\r\n`;
  for (const [name, value] of res.headers ?? []) {
    checkName(name);
    if (!FIELD_VALUE.test(value)) {
      throw new Error(`response header ${name} has a control character in its value`);
    }
    head += `${name}: ${value}\r\n`;
  }
  head += `Date: ${httpDate()}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
  const size = head.length + (headOnly ? 0 : body.length);
  const out = scratch && scratch.length >= size ? scratch.subarray(0, size) : new Uint8Array(size);
  if (NOT_ASCII.test(head)) {
    for (let i = 0; i < head.length; i++) out[i] = head.charCodeAt(i); // latin1 values: a byte each
  } else {
    encoder.encodeInto(head, out);
  }
  if (!headOnly) out.set(body, head.length);
  return out;
}

/** Header names already found to be tokens the handler may set: a few constants, checked once. */
const checkedNames = new Set<string>();
const CHECKED_NAMES_MAX = 256;
const NOT_ASCII = /[\u0080-\uffff]/;

function checkName(name: string): void {
  if (checkedNames.has(name)) return;
  if (!TOKEN.test(name)) {
    throw new Error(`response header name ${JSON.stringify(name)} is not a token`);
  }
  if (RESERVED.has(name.toLowerCase())) {
    throw new Error(`response header ${name} is written by the listener; do not set it`);
  }
  if (checkedNames.size < CHECKED_NAMES_MAX) checkedNames.add(name);
}

const EMPTY = new Uint8Array(0);

/** The interim response sent when a client asked `Expect: 100-continue`. */
export const CONTINUE_BYTES: Uint8Array = encoder.encode("HTTP/1.1 100 Continue\r\n\r\n");
