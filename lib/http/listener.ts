/**
 * The listener: an epoll reactor over one UNIX socket. It accepts, checks SO_PEERCRED against the
 * proxy uid, holds connections that have sent nothing (up to the queue depth, for at most the
 * first-byte deadline), reads and parses requests itself, runs at most `workers` handlers at once
 * (the rest wait FIFO), and writes each response with `Connection: close`.
 *
 * Polling: a synchronous `epoll_wait(…, 0)` first, which is far cheaper than a round trip through
 * the FFI thread pool; only when nothing is ready a `nonblocking` FFI `epoll_wait` with the time to
 * the next deadline. An eventfd wakes that wait on close so the process can exit.
 *
 * This file is the reactor: the epoll set, accepting, the handlers, the shutdown. Its parts have
 * files of their own: who may hold a connection (_acceptor.ts), each connection's bytes and
 * deadlines from accept to close (_connections.ts), and the parsed requests waiting for a handler
 * slot (_work_queue.ts).
 *
 * @example
 * ```ts
 * declare const path: string;
 * const l = Listener.open({ path, proxyUid: 33, workers: 4, handler: async () => ({ status: 204 }) });
 * const done = l.serve();
 * // … on SIGTERM
 * await l.close(5000);
 * await done;
 * ```
 */
import { setImmediate } from "node:timers";
import {
  EPOLL,
  EPOLL_CTL,
  EPOLL_DATA_OFFSET,
  EPOLL_EVENT_SIZE,
  ERRNO,
  errno,
  libc,
  O_CLOEXEC,
  O_NONBLOCK,
  peerCred,
  readFd,
  sendFd,
  writeFd,
} from "../../ffi/libc.ts";
import { type AcceptVerdict, acceptVerdict, QUEUE_FULL_BYTES } from "./_acceptor.ts";
import { type Conn, type ConnectionHost, Connections } from "./_connections.ts";
import { WorkQueue } from "./_work_queue.ts";
import { DEFAULT_MAX_HEADER_BYTES, type ParsedRequest, pathOf } from "./parse.ts";
import { problem } from "./problem.ts";
import {
  closeUnixListener,
  heldByOthers,
  LISTEN_BACKLOG,
  openUnixListener,
  publishHeld,
  removeUnixListenerPath,
  type SharedSocket,
  type UnixListenerSocket,
} from "./socket.ts";
import type { ContinueCheck, Handler, HttpRequest, HttpResponse, ListenerEvent } from "./types.ts";

/** Options of one listener. */
export interface ListenerOptions {
  path: string;
  /** Peer uid every connection must have; null = no check (the public socket). */
  proxyUid: number | null;
  /** Connections held before a handler takes them (silent, reading, or parsed and waiting). 256. */
  queueDepth?: number;
  /** Largest request body; larger → 413. 1 MiB. */
  maxBodyBytes?: number;
  /** Largest request line + header block; larger → 400. 16 KiB. */
  maxHeaderBytes?: number;
  /** A connection silent this long after accept is closed. 1000 ms. */
  firstByteMs?: number;
  /** A request still arriving this long after its first byte gets 408 and is closed. 10000 ms. */
  bodyMs?: number;
  /** Handler invocations of this listener at once; further parsed requests wait FIFO. */
  workers: number;
  handler: Handler;
  /**
   * Checks a request that asked for `100 Continue` before its body: a response is the final answer
   * (sent at once, the body not read); undefined sends `100 Continue`. Without it, every such
   * request gets `100 Continue`.
   */
  continueCheck?: ContinueCheck;
  log?: (event: ListenerEvent) => void;
  /**
   * The clock every deadline is counted on: milliseconds, monotonic. Default `performance.now`; a
   * test moves its own, so that "not before its deadline" needs no waiting and no measuring.
   */
  now?: () => number;
  /**
   * Serve a socket opened elsewhere and shared with listeners in other isolates (each accepts from
   * it; the queue depth bounds their sum); `path` is then ignored and close() leaves the socket to
   * its opener. Example: `{ ...opts, shared: shareSocket(socket, 2)[0] }`.
   */
  shared?: SharedSocket;
}

/** Counters and gauges of a listener. */
export interface ListenerStats {
  /** Connections accepted that have sent nothing yet. */
  waiting: number;
  /** Connections whose request is partly read. */
  reading: number;
  /** Handlers running. */
  active: number;
  /** Parsed requests waiting for a handler slot. */
  queued: number;
  /** Responses from handlers written (including 500s for handler exceptions). */
  served: number;
  refusedUid: number;
  queueFull: number;
  deadlineDrops: number;
  parseErrors: number;
  handlerErrors: number;
}

const MAX_EVENTS = 256;
const ACCEPT_BATCH = 64;
const IDLE_WAIT_CAP_MS = 500;
const ACCEPT_PAUSE_MS = 100;

/**
 * One listening socket and its reactor.
 *
 * @example
 * ```ts
 * declare const handler: ListenerOptions["handler"];
 * const listener = Listener.open({ path: "/run/svcd/auth.sock", proxyUid: 33, workers: 16, handler });
 * const serving = listener.serve();
 * await listener.close(5000);
 * await serving;
 * ```
 */
export class Listener {
  #opts:
    & Required<Omit<ListenerOptions, "log" | "continueCheck" | "shared" | "now">>
    & Pick<ListenerOptions, "log" | "continueCheck" | "shared">;
  #sock: UnixListenerSocket;
  #ep: number;
  #wake: number;
  #now: () => number;
  #connections: Connections;
  #work: WorkQueue<[Conn, ParsedRequest]>;
  #ids = { prefix: randomHex8(), next: 0 };
  #events = new Uint8Array(MAX_EVENTS * EPOLL_EVENT_SIZE);
  #eventView: DataView;
  #ctlBuf = new Uint8Array(EPOLL_EVENT_SIZE);
  #ctlView: DataView;
  #acceptPausedUntil = 0;
  /** Connections taken so far by the round of {@link #acceptSome} running now (0 outside one). */
  #acceptedThisRound = 0;
  #closing = false;
  #stopped = false;
  #serving: Promise<void> | null = null;
  #closed: Promise<void> | null = null;
  #drained: (() => void) | null = null;
  #counts = { served: 0, refusedUid: 0, queueFull: 0, handlerErrors: 0 };

  private constructor(opts: ListenerOptions, sock: UnixListenerSocket, ep: number, wake: number) {
    this.#opts = {
      queueDepth: 256,
      maxBodyBytes: 1 << 20,
      maxHeaderBytes: DEFAULT_MAX_HEADER_BYTES,
      firstByteMs: 1000,
      bodyMs: 10_000,
      ...opts,
    };
    this.#now = opts.now ?? (() => performance.now());
    this.#connections = new Connections({ ...this.#opts, now: this.#now }, this.#host());
    this.#work = new WorkQueue(this.#opts.workers);
    this.#sock = sock;
    this.#ep = ep;
    this.#wake = wake;
    this.#eventView = new DataView(this.#events.buffer);
    this.#ctlView = new DataView(this.#ctlBuf.buffer);
  }

  /**
   * Create the socket (0660, stale socket file replaced, any other file refused) and the reactor.
   */
  static open(opts: ListenerOptions): Listener {
    checkOptions(opts);
    const c = libc();
    const sock = opts.shared?.socket ?? openUnixListener(opts.path, LISTEN_BACKLOG);
    const ep = c.epoll_create1(O_CLOEXEC);
    const wake = ep < 0 ? -1 : c.eventfd(0, O_NONBLOCK | O_CLOEXEC);
    if (ep < 0 || wake < 0) {
      const e = errno();
      if (ep >= 0) c.close(ep);
      if (!opts.shared) closeUnixListener(sock);
      throw new Error(`epoll/eventfd setup failed with errno ${e}`);
    }
    const l = new Listener(opts, sock, ep, wake);
    l.#ctl(EPOLL_CTL.ADD, sock.fd, l.#acceptEvents(), 0);
    l.#ctl(EPOLL_CTL.ADD, wake, EPOLL.IN, 0);
    return l;
  }

  /** Path of the socket file. */
  get path(): string {
    return this.#sock.path;
  }

  /**
   * Run the reactor until `close()`; resolves when it has stopped. Calling it twice returns the
   * same promise.
   */
  serve(): Promise<void> {
    this.#serving ??= this.#loop();
    return this.#serving;
  }

  /**
   * Remove the socket file, take the connections already queued in the kernel, stop accepting, let
   * silent connections (up to their first-byte deadline) and requests being read and handled
   * finish for up to `graceMs`, then close everything.
   */
  close(graceMs = 5000): Promise<void> {
    this.#closed ??= this.#shutdown(graceMs);
    return this.#closed;
  }

  /**
   * Whether the request being handled is not the only one in hand: another handler runs, a parsed
   * request waits for a slot, or this round of accepting took another connection before it. Cheap,
   * for a check on every request.
   */
  get othersInHand(): boolean {
    return this.#work.active > 1 || this.#work.queued > 0 || this.#acceptedThisRound > 1;
  }

  /** Gauges and counters. */
  stats(): ListenerStats {
    return {
      waiting: this.#connections.waiting,
      reading: this.#connections.reading,
      active: this.#work.active,
      queued: this.#work.queued,
      ...this.#counts,
      ...this.#connections.counts,
    };
  }

  /** What the connections are told and asked by their listener. */
  #host(): ConnectionHost {
    return {
      watch: (fd, serial, events, again) =>
        this.#ctl(again ? EPOLL_CTL.MOD : EPOLL_CTL.ADD, fd, events, serial),
      requestRead: (conn, request) => this.#enqueue(conn, request),
      heldChanged: () => this.#publishHeld(),
      closed: () => this.#connectionClosed(),
      failed: (id, e) => this.#handlerFailed(id, e),
    };
  }

  // ---- reactor -------------------------------------------------------------------------------

  async #loop(): Promise<void> {
    const c = libc();
    while (!this.#stopped) {
      let n = c.epoll_wait(this.#ep, this.#events, MAX_EVENTS, 0);
      if (n === 0) {
        n = await c.epoll_wait_async(this.#ep, this.#events, MAX_EVENTS, this.#idleTimeout());
        if (this.#stopped) break;
        this.#dispatch(n);
        this.#expire();
      } else {
        this.#dispatch(n);
        this.#expire();
        // Let handlers' continuations (timers, nonblocking FFI completions) run between batches.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
  }

  #idleTimeout(): number {
    const now = this.#now();
    let next = now + IDLE_WAIT_CAP_MS;
    const due = this.#connections.dueAt();
    if (due !== undefined) next = Math.min(next, due);
    if (this.#acceptPausedUntil > now) next = Math.min(next, this.#acceptPausedUntil);
    return Math.max(0, Math.ceil(next - now));
  }

  #dispatch(n: number): void {
    const v = this.#eventView;
    for (let i = 0; i < n; i++) {
      const at = i * EPOLL_EVENT_SIZE;
      const fd = v.getInt32(at + EPOLL_DATA_OFFSET, true);
      if (fd === this.#sock.fd) this.#acceptSome();
      else if (fd === this.#wake) readFd(this.#wake, new Uint8Array(8), 8);
      else this.#connections.ready(fd, v.getUint32(at + EPOLL_DATA_OFFSET + 4, true));
    }
  }

  #expire(): void {
    const now = this.#now();
    if (this.#acceptPausedUntil !== 0 && this.#acceptPausedUntil <= now && !this.#closing) {
      this.#acceptPausedUntil = 0;
      this.#setAccepting(true);
    }
    this.#connections.expire(now);
  }

  #ctl(op: number, fd: number, events: number, serial: number): boolean {
    const v = this.#ctlView;
    v.setUint32(0, events >>> 0, true);
    v.setInt32(EPOLL_DATA_OFFSET, fd, true);
    v.setUint32(EPOLL_DATA_OFFSET + 4, serial >>> 0, true);
    return libc().epoll_ctl(this.#ep, op, fd, this.#ctlBuf) === 0;
  }

  // ---- accepting -----------------------------------------------------------------------------

  /** Accepts up to a batch; returns how many connections it took (accepted or refused). */
  #acceptSome(): number {
    try {
      return this.#acceptRound();
    } finally {
      this.#acceptedThisRound = 0;
    }
  }

  #acceptRound(): number {
    const c = libc();
    let taken = 0;
    for (; taken < ACCEPT_BATCH && !this.#closing; taken++) {
      const fd = c.accept4(this.#sock.fd, null, null, O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) {
        const e = errno();
        if (e === ERRNO.EAGAIN || e === ERRNO.EINTR || e === ERRNO.ECONNABORTED) return taken;
        this.#opts.log?.({ kind: "accept_error", errno: e });
        if (e === ERRNO.EMFILE || e === ERRNO.ENFILE) this.#pauseAccept();
        return taken;
      }
      this.#acceptedThisRound++;
      this.#accept(fd);
    }
    return taken;
  }

  /** Out of file descriptors: stop polling the listening socket briefly instead of spinning. */
  #pauseAccept(): void {
    this.#acceptPausedUntil = this.#now() + ACCEPT_PAUSE_MS;
    this.#setAccepting(false);
  }

  /**
   * A shared socket is polled with EPOLLEXCLUSIVE, so that a connection wakes one of the listeners
   * waiting on it, not all of them (each woken one costs an event-loop turn for an EAGAIN).
   */
  #acceptEvents(): number {
    return this.#opts.shared ? EPOLL.IN | EPOLL.EXCLUSIVE : EPOLL.IN;
  }

  /** Polls the listening socket again, or stops; EPOLLEXCLUSIVE cannot be modified, only re-added. */
  #setAccepting(on: boolean): void {
    const fd = this.#sock.fd;
    if (!this.#opts.shared) {
      this.#ctl(EPOLL_CTL.MOD, fd, on ? EPOLL.IN : 0, 0);
      return;
    }
    if (on) this.#ctl(EPOLL_CTL.ADD, fd, this.#acceptEvents(), 0);
    else libc().epoll_ctl(this.#ep, EPOLL_CTL.DEL, fd, this.#ctlBuf);
  }

  /** Accepts one connection: holds it and reads its request, or refuses it (peer uid, queue). */
  #accept(fd: number): void {
    const held = this.#held() + (this.#opts.shared ? heldByOthers(this.#opts.shared) : 0);
    const verdict = acceptVerdict(peerCred(fd), this.#opts.proxyUid, held, this.#opts.queueDepth);
    if (verdict.kind !== "accept") return this.#refuse(fd, verdict, held);
    this.#connections.hold(fd, verdict.peer);
  }

  #refuse(fd: number, verdict: Exclude<AcceptVerdict, { kind: "accept" }>, held: number): void {
    if (verdict.kind === "no_peer") {
      this.#opts.log?.({
        kind: "refused_peer",
        reason: `SO_PEERCRED failed with errno ${errno()}`,
      });
    } else if (verdict.kind === "refused_uid") {
      this.#counts.refusedUid++;
      this.#opts.log?.({ kind: "refused_uid", ...verdict.peer });
    } else {
      this.#counts.queueFull++;
      this.#opts.log?.({ kind: "queue_full", held });
      sendFd(fd, QUEUE_FULL_BYTES, QUEUE_FULL_BYTES.length);
      this.#connections.drainInput(fd); // a proxy writes its request right after connect
    }
    libc().close(fd);
  }

  /** Connections not yet in a handler: what the queue depth bounds. */
  #held(): number {
    return this.#connections.waiting + this.#connections.reading + this.#work.queued;
  }

  /** Tells the listeners sharing the socket how many this one holds (at each change). */
  #publishHeld(): void {
    if (this.#opts.shared) publishHeld(this.#opts.shared, this.#held());
  }

  /** A descriptor came free: accepting resumes if it paused for want of one. */
  #connectionClosed(): void {
    this.#publishHeld();
    if (this.#acceptPausedUntil !== 0 && !this.#closing) {
      this.#acceptPausedUntil = 0;
      this.#setAccepting(true);
    }
    this.#checkDrained();
  }

  // ---- handling ------------------------------------------------------------------------------

  #enqueue(conn: Conn, request: ParsedRequest): void {
    conn.state = "queued";
    this.#work.push([conn, request]);
    this.#pump();
  }

  #pump(): void {
    for (let item = this.#work.next(); item !== undefined; item = this.#work.next()) {
      const [conn, request] = item;
      if (conn.state !== "queued") continue; // closed while waiting (shutdown)
      void this.#run(conn, request);
    }
  }

  async #run(conn: Conn, parsed: ParsedRequest): Promise<void> {
    conn.state = "active";
    this.#work.started();
    this.#publishHeld();
    const req: HttpRequest = {
      method: parsed.method,
      target: parsed.target,
      path: pathOf(parsed.target),
      headers: parsed.headers,
      body: parsed.body,
      peer: conn.peer,
      id: this.#nextId(),
    };
    let res: HttpResponse;
    try {
      res = await this.#opts.handler(req);
    } catch (e) {
      res = this.#handlerFailed(req.id, e);
    }
    this.#work.finished();
    this.#counts.served++;
    if (conn.state === "active") {
      this.#connections.respond(conn, res, req.id, req.method === "HEAD");
    }
    this.#pump();
    this.#checkDrained();
  }

  #handlerFailed(id: string, e: unknown): HttpResponse {
    this.#counts.handlerErrors++;
    this.#opts.log?.({
      kind: "handler_error",
      id,
      error: e instanceof Error ? e.message : String(e),
    });
    return problem(500, "Internal error", `request ${id} failed; the daemon log says why`);
  }

  #nextId(): string {
    const n = this.#ids.next++ >>> 0;
    if (this.#ids.next > 0xffffffff) this.#ids = { prefix: randomHex8(), next: 0 };
    return this.#ids.prefix + n.toString(16).padStart(8, "0");
  }

  // ---- shutdown ------------------------------------------------------------------------------

  async #shutdown(graceMs: number): Promise<void> {
    // The file goes first, so that no client can connect any more: one that connected between
    // the last accept and the close would be queued, then reset by the close, unanswered. (A
    // shared socket's group removes its file before it closes its listeners.)
    if (!this.#opts.shared) removeUnixListenerPath(this.#sock);
    // Clients the kernel has already queued connected before the stop: take them (a full queue
    // still answers 503) so that closing the socket resets none of them.
    while (this.#acceptPausedUntil === 0 && this.#acceptSome() === ACCEPT_BATCH);
    this.#closing = true;
    const c = libc();
    c.epoll_ctl(this.#ep, EPOLL_CTL.DEL, this.#sock.fd, this.#ctlBuf);
    if (!this.#opts.shared) closeUnixListener(this.#sock);
    // Silent connections keep their first-byte deadline: a proxy connects, then writes.
    if (this.#inFlight() > 0 && this.#serving !== null) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.#drained = null;
    }
    this.#stopped = true;
    writeFd(this.#wake, new Uint8Array(new BigUint64Array([1n]).buffer), 8);
    if (this.#serving) await this.#serving;
    this.#connections.closeAll();
    c.close(this.#ep);
    c.close(this.#wake);
  }

  #inFlight(): number {
    return this.#connections.inFlight + this.#work.active + this.#work.queued;
  }

  #checkDrained(): void {
    if (this.#drained !== null && this.#inFlight() === 0) this.#drained();
  }
}

function checkOptions(opts: ListenerOptions): void {
  const positive = (name: string, v: number | undefined) => {
    if (v !== undefined && (!Number.isInteger(v) || v < 1)) {
      throw new Error(`listener option ${name} must be a positive integer, got ${v}`);
    }
  };
  positive("workers", opts.workers);
  positive("queueDepth", opts.queueDepth);
  positive("maxBodyBytes", opts.maxBodyBytes);
  positive("maxHeaderBytes", opts.maxHeaderBytes);
  positive("firstByteMs", opts.firstByteMs);
  positive("bodyMs", opts.bodyMs);
  if (opts.proxyUid !== null && (!Number.isInteger(opts.proxyUid) || opts.proxyUid < 0)) {
    throw new Error(
      `listener option proxyUid must be a uid (integer ≥ 0) or null, got ${opts.proxyUid}`,
    );
  }
}

function randomHex8(): string {
  return crypto.getRandomValues(new Uint8Array(4)).toHex();
}
