/**
 * Reads one HTTP/1.x request from the bytes of a connection, strictly: the llhttp-based `HTTPParser`
 * Deno ships as `node:_http_common` does the framing (it refuses duplicate Content-Length, CL+TE,
 * obs-fold, bare LF and control bytes), and this module adds the rules it is lenient about (request
 * line shape, HTTP/0.9 and 1.2+, Transfer-Encoding other than `chunked`, trailers, upgrades) and the
 * size limits. `node:_http_common` is not a documented API: parse_test.ts pins its behaviour.
 *
 * Chunked bodies are accepted and reassembled (HTTP/1.1 only; `Transfer-Encoding: chunked` exactly).
 * An HTTP/1.1 request must carry exactly one `Host` (any value; none in HTTP/1.0 is accepted), two are
 * refused in any version (RFC 9112 §3.2).
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1 << 20 });
 * const step = reader.feed(bytes); // { kind: "more" } | { kind: "done", … } | { kind: "refuse", … }
 * ```
 */
import { HTTPParser as NodeHTTPParser, methods as nodeMethods } from "node:_http_common";
import { concat, latin1 } from "../bytes/mod.ts";

/** The largest request line plus header block accepted, in bytes (the request line included). */
export const DEFAULT_MAX_HEADER_BYTES = 16 * 1024;

/** A request as far as the wire is concerned. */
export interface ParsedRequest {
  method: string;
  target: string;
  /** Raw header list in arrival order, names in their original case, values one char per byte. */
  headers: Array<[string, string]>;
  body: Uint8Array;
}

/** What one `feed` produced. */
export type ReadStep =
  | { kind: "more" }
  | { kind: "done"; request: ParsedRequest }
  | { kind: "refuse"; status: 400 | 413 | 417; title: string; detail: string };

/** Limits of one reader. */
export interface ReaderLimits {
  maxHeaderBytes: number;
  maxBodyBytes: number;
}

/**
 * The request target without its query string: what routes match.
 *
 * @example
 * ```ts
 * pathOf("/sign?x=1"); // "/sign"
 * ```
 */
export function pathOf(target: string): string {
  const q = target.indexOf("?");
  return q < 0 ? target : target.slice(0, q);
}

// deno-lint-ignore no-explicit-any
const HTTPParser = NodeHTTPParser as any;
const K_MESSAGE_BEGIN: number = HTTPParser.kOnMessageBegin;
const K_HEADERS: number = HTTPParser.kOnHeaders;
const K_HEADERS_COMPLETE: number = HTTPParser.kOnHeadersComplete;
const K_BODY: number = HTTPParser.kOnBody;
const K_MESSAGE_COMPLETE: number = HTTPParser.kOnMessageComplete;
const REQUEST: number = HTTPParser.REQUEST;
const METHODS: readonly string[] = nodeMethods as readonly string[];

/** RFC 9112 request-line: token SP origin-form-ish target SP HTTP/1.0 or HTTP/1.1, nothing else. */
const REQUEST_LINE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ \/[\x21-\x7e]* HTTP\/1\.[01]$/;
const CR = 13;

/**
 * One request's parse state; `reset()` makes it reusable for the next connection.
 *
 * @example
 * ```ts
 * declare const limits: ConstructorParameters<typeof RequestReader>[0], chunk: Uint8Array;
 * const reader = new RequestReader(limits);
 * const step = reader.feed(chunk); // step.kind === "done": step.request is the whole request
 * ```
 */
export class RequestReader {
  #limits: ReaderLimits;
  // deno-lint-ignore no-explicit-any
  #parser: any = new HTTPParser();
  #headerBytes = 0;
  #begun = false;
  #lineChecked = false;
  #firstLine = "";
  #headersDone = false;
  #complete = false;
  #failure: ReadStep | null = null;
  #flat: string[] = [];
  #url = "";
  #method = "";
  #versionMinor = 1;
  #contentLength = -1;
  #bodyParts: Uint8Array[] = [];
  #bodyBytes = 0;
  #expectContinue = false;

  constructor(limits: ReaderLimits) {
    this.#limits = limits;
    this.#install();
    this.reset();
  }

  /** Forget everything fed so far. */
  reset(): void {
    // The parser's own header cap stays above ours so that ours (exact, documented) decides.
    this.#parser.initialize(REQUEST, {}, this.#limits.maxHeaderBytes * 2);
    this.#headerBytes = 0;
    this.#begun = false;
    this.#lineChecked = false;
    this.#firstLine = "";
    this.#headersDone = false;
    this.#complete = false;
    this.#failure = null;
    this.#flat = [];
    this.#url = "";
    this.#method = "";
    this.#versionMinor = 1;
    this.#contentLength = -1;
    this.#bodyParts = [];
    this.#bodyBytes = 0;
    this.#expectContinue = false;
  }

  /** True once a header block has been read: the reader is past the first-byte phase. */
  get headersDone(): boolean {
    return this.#headersDone;
  }

  /** True once the head asked for `100 Continue` and a body is still to come. */
  get wantsContinue(): boolean {
    return this.#expectContinue && this.#headersDone && !this.#complete;
  }

  /**
   * The request line and headers read so far (complete once `headersDone`).
   */
  get head(): Omit<ParsedRequest, "body"> {
    return { method: this.#method, target: this.#url, headers: pairs(this.#flat) };
  }

  /** Record that `100 Continue` went out, so it is sent once. */
  continueSent(): void {
    this.#expectContinue = false;
  }

  /**
   * Feed the next bytes of the connection (the reader copies what it keeps).
   */
  feed(bytes: Uint8Array): ReadStep {
    if (this.#failure) return this.#failure;
    if (this.#complete) return bytes.length === 0 ? { kind: "more" } : this.#fail(pipelined());
    let chunk = bytes;
    if (!this.#headersDone) {
      const room = this.#limits.maxHeaderBytes - this.#headerBytes;
      const lineFailure = this.#checkRequestLine(chunk);
      if (lineFailure) return this.#fail(lineFailure);
      if (chunk.length > room) {
        // Feed only what the header limit allows; the head must end inside it.
        const step = this.#execute(chunk.subarray(0, room));
        if (step) return step;
        if (!this.#headersDone) {
          return this.#fail(refuse(
            400,
            "Request header block too large",
            `the request line and headers must fit in ${this.#limits.maxHeaderBytes} bytes`,
          ));
        }
        chunk = chunk.subarray(room);
      } else {
        this.#headerBytes += chunk.length;
      }
    }
    return this.#execute(chunk) ?? this.#progress();
  }

  #execute(chunk: Uint8Array): ReadStep | null {
    if (chunk.length === 0) return null;
    const result = this.#parser.execute(chunk);
    if (this.#failure) return this.#failure;
    if (result instanceof Error) {
      // deno-lint-ignore no-explicit-any
      const code = (result as any).code ?? "HPE_UNKNOWN";
      // deno-lint-ignore no-explicit-any
      const reason = (result as any).reason ?? result.message;
      return this.#fail(refuse(400, "Malformed request", `${code}: ${reason}`));
    }
    return null;
  }

  #progress(): ReadStep {
    if (this.#failure) return this.#failure;
    if (!this.#complete) return { kind: "more" };
    return {
      kind: "done",
      request: {
        method: this.#method,
        target: this.#url,
        headers: pairs(this.#flat),
        body: concat(this.#bodyParts),
      },
    };
  }

  /** The request line, checked on the raw bytes before the parser's leniency can hide anything. */
  #checkRequestLine(chunk: Uint8Array): ReadStep | null {
    if (this.#lineChecked) return null;
    const end = chunk.indexOf(CR);
    const upto = end < 0 ? chunk.length : end;
    this.#firstLine += latin1(chunk.subarray(0, Math.min(upto, this.#limits.maxHeaderBytes)));
    if (end < 0) return null; // the parser refuses a first line that is not one; length is capped
    this.#lineChecked = true;
    // llhttp reads a PRI request line as the start of the HTTP/2 preface and waits for "SM": a
    // complete HTTP/1.1 request would then sit until the body deadline (found by tests/fuzz).
    if (this.#firstLine.startsWith("PRI ")) {
      return refuse(
        400,
        "HTTP/2 is not served",
        "PRI is the HTTP/2 preface; this socket speaks HTTP/1.1",
      );
    }
    if (REQUEST_LINE.test(this.#firstLine)) return null;
    const shown = JSON.stringify(this.#firstLine.slice(0, 80));
    return refuse(
      400,
      "Malformed request line",
      `expected 'METHOD /path HTTP/1.1' (or HTTP/1.0), got ${shown}`,
    );
  }

  /** The first refusal stands: callbacks that run after it (the rest of a chunk) cannot replace it. */
  #fail(step: ReadStep): ReadStep {
    this.#failure ??= step;
    return this.#failure;
  }

  #install(): void {
    const p = this.#parser;
    // llhttp goes on parsing after the first message (keep-alive), feeding the next message's
    // target, headers and body to the same callbacks: without this, two requests in one read were
    // merged into one and a signature covered bytes no client sent as one message. The parser
    // fires this on the first byte of every message, so a second one is a pipelined request.
    p[K_MESSAGE_BEGIN] = () => {
      if (!this.#begun) {
        this.#begun = true;
        return;
      }
      this.#fail(pipelined());
    };
    p[K_HEADERS] = (headers: string[], url: string) => {
      if (this.#failure) return;
      if (this.#headersDone) {
        this.#fail(
          refuse(400, "Trailers are not accepted", "send no trailer fields after a chunked body"),
        );
        return;
      }
      for (const item of headers) this.#flat.push(item);
      if (url) this.#url += url;
    };
    p[K_HEADERS_COMPLETE] = (
      major: number,
      minor: number,
      headers: string[] | undefined,
      method: number,
      url: string | undefined,
      _status: unknown,
      _message: unknown,
      upgrade: boolean,
    ) => {
      if (this.#failure) return 1;
      if (headers) { for (const item of headers) this.#flat.push(item); }
      if (url) this.#url += url;
      this.#headersDone = true;
      this.#method = METHODS[method] ?? "";
      this.#versionMinor = minor;
      const failure = this.#checkHead(major, minor, upgrade);
      if (failure) {
        this.#fail(failure);
        return 1; // skip the body; the connection is refused anyway
      }
      return 0;
    };
    p[K_BODY] = (chunk: Uint8Array) => {
      if (this.#failure) return;
      this.#bodyBytes += chunk.length;
      if (this.#bodyBytes > this.#limits.maxBodyBytes) {
        this.#fail(tooLarge(this.#limits.maxBodyBytes));
        return;
      }
      this.#bodyParts.push(chunk.slice());
    };
    p[K_MESSAGE_COMPLETE] = () => {
      this.#complete = true;
    };
  }

  #checkHead(major: number, minor: number, upgrade: boolean): ReadStep | null {
    if (major !== 1 || (minor !== 0 && minor !== 1)) {
      return refuse(400, "Unsupported HTTP version", `HTTP/${major}.${minor}; send HTTP/1.1`);
    }
    if (upgrade) {
      return refuse(400, "Upgrade is not supported", "this listener speaks HTTP/1.1 only");
    }
    let expect: string | null = null;
    let transferEncoding: string | null = null;
    let hosts = 0;
    for (let i = 0; i < this.#flat.length; i += 2) {
      const name = this.#flat[i].toLowerCase();
      if (name === "host") hosts++;
      else if (name === "content-length") this.#contentLength = Number(this.#flat[i + 1].trim());
      else if (name === "transfer-encoding") {
        if (transferEncoding !== null) return badTransferEncoding("more than one");
        transferEncoding = this.#flat[i + 1];
      } else if (name === "expect") expect = this.#flat[i + 1];
    }
    const hostFailure = checkHostCount(hosts, minor);
    if (hostFailure) return hostFailure;
    if (transferEncoding !== null) {
      if (minor === 0) return badTransferEncoding("HTTP/1.0 with");
      if (transferEncoding.trim().toLowerCase() !== "chunked") {
        return badTransferEncoding(JSON.stringify(transferEncoding));
      }
    }
    if (this.#contentLength > this.#limits.maxBodyBytes) return tooLarge(this.#limits.maxBodyBytes);
    if (expect !== null) {
      if (expect.trim().toLowerCase() !== "100-continue") {
        return refuse(417, "Expectation failed", "only 'Expect: 100-continue' is understood");
      }
      this.#expectContinue = minor === 1;
    }
    return null;
  }

  /** HTTP minor version of the head read (0 or 1). */
  get versionMinor(): number {
    return this.#versionMinor;
  }
}

function refuse(status: 400 | 413 | 417, title: string, detail: string): ReadStep {
  return { kind: "refuse", status, title, detail };
}

function pipelined(): ReadStep {
  return refuse(
    400,
    "One request per connection",
    "bytes followed the end of the request; send each request on its own connection",
  );
}

/**
 * RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host field, any request at most one. An
 * HTTP/1.0 request without one is served (HTTP/1.0 had no Host; nginx sends it in both anyway).
 */
function checkHostCount(hosts: number, minor: number): ReadStep | null {
  if (hosts > 1) {
    return refuse(400, "More than one Host", `the request has ${hosts} Host fields; send one`);
  }
  if (hosts === 0 && minor === 1) {
    return refuse(400, "Host is missing", "an HTTP/1.1 request must have a Host field");
  }
  return null;
}

function tooLarge(max: number): ReadStep {
  return refuse(413, "Request body too large", `the body must be at most ${max} bytes`);
}

function badTransferEncoding(what: string): ReadStep {
  return refuse(
    400,
    "Unsupported Transfer-Encoding",
    `${what} Transfer-Encoding; send Content-Length or 'Transfer-Encoding: chunked' alone`,
  );
}

function pairs(flat: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = new Array(flat.length >> 1);
  for (let i = 0; i < flat.length; i += 2) out[i >> 1] = [flat[i], flat[i + 1]];
  return out;
}
