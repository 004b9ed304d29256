/**
 * The shapes shared by the listener and the handlers it calls.
 *
 * @example
 * ```ts
 * const handler: Handler = async (req) => ({ status: 200, body: req.body });
 * ```
 */

/** A request as the handler sees it: fully read, checked, with the peer's credentials. */
export interface HttpRequest {
  method: string;
  /** The request target as sent, e.g. `/sign?x=1`. */
  target: string;
  /** The target without its query string, e.g. `/sign`. */
  path: string;
  /** Raw header list in arrival order, names in their original case, values one char per byte. */
  headers: Array<[name: string, value: string]>;
  body: Uint8Array;
  /** SO_PEERCRED of the connection. */
  peer: { pid: number; uid: number; gid: number };
  /** Request id, 16 hex chars, unique within the process. */
  id: string;
}

/** What a handler answers; the listener adds Content-Length, Connection: close and Date. */
export interface HttpResponse {
  status: number;
  headers?: Array<[string, string]>;
  body?: Uint8Array | string;
}

/** A request before its body: what a pre-body check may look at. */
export type RequestHead = Omit<HttpRequest, "body" | "id">;

/**
 * Decides a request that asked for `100 Continue` from its head alone: a response is sent at once
 * (its body is never read, the connection closes); undefined lets the body come.
 */
export type ContinueCheck = (head: RequestHead) => HttpResponse | undefined;

/** Serves one request. A rejection becomes a 500 problem; the listener keeps serving. */
export type Handler = (req: HttpRequest) => Promise<HttpResponse>;

/** Something the listener noticed that an operator may want to see. */
export type ListenerEvent =
  | { kind: "refused_uid"; pid: number; uid: number; gid: number }
  | { kind: "refused_peer"; reason: string }
  | { kind: "queue_full"; held: number }
  | { kind: "deadline"; phase: "first_byte" | "request" | "write"; ms: number }
  | { kind: "parse_error"; status: number; detail: string }
  | { kind: "handler_error"; id: string; error: string }
  | { kind: "accept_error"; errno: number };
