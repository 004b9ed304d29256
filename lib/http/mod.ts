/**
 * The connection layer: a UNIX-socket HTTP/1.1 listener with peer-credential checks, an acceptor
 * that holds silent connections, strict parsing, deadlines, and RFC 9457 problem responses.
 *
 * @example
 * ```ts
 * const l = Listener.open({
 *   path: "/run/svcd/auth.sock", proxyUid: 33, workers: 4,
 *   handler: async (req) => req.path === "/health" ? { status: 200, body: "{}" } : problem(404, "Not found"),
 * });
 * await l.serve();
 * ```
 */
export { Listener, type ListenerOptions, type ListenerStats } from "./listener.ts";
export {
  closeUnixListener,
  LISTEN_BACKLOG,
  nofileLimit,
  openUnixListener,
  removeUnixListenerPath,
  type SharedSocket,
  shareSocket,
  type UnixListenerSocket,
} from "./socket.ts";
export { problem, PROBLEM_TYPE, PROBLEM_URN, typedProblem } from "./problem.ts";
export { headerValues, singleHeader, utf8FromLatin1 } from "./headers.ts";
export { allowOf, routeFor } from "./routes.ts";
export { DEFAULT_MAX_HEADER_BYTES } from "./parse.ts";
export type {
  ContinueCheck,
  Handler,
  HttpRequest,
  HttpResponse,
  ListenerEvent,
  RequestHead,
} from "./types.ts";
