/**
 * The listener: an epoll reactor over one UNIX socket. It accepts, checks SO_PEERCRED against the
 * proxy uid, holds connections that have sent nothing (up to the queue depth, for at most the
 * first-byte deadline), reads and parses requests itself, runs at most `workers` handlers at once
 * (the rest wait FIFO), and writes each response with `Connection: close`.
 *
 * Polling: a synchronous `epoll_wait(…, 0)` first, which is far cheaper than a round trip through
 * the FFI thread pool; only when nothing is ready a `nonblocking` FFI `epoll_wait` with the time to
 * the next deadline. An eventfd
 * wakes that wait on close so the process can exit. Its parts have files of their own: who may hold
 * a connection (acceptor.ts), the connections under each deadline (deadlines.ts), and the parsed
 * requests waiting for a handler slot (work_queue.ts).
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
  type PeerCred,
  peerCred,
  readFd,
  sendFd,
  SHUT_WR,
  writeFd,
} from "../../ffi/libc.ts";
import { type AcceptVerdict, acceptVerdict, QUEUE_FULL_BYTES } from "./acceptor.ts";
import { DeadlineQueue } from "./deadlines.ts";
import { DEFAULT_MAX_HEADER_BYTES, type ParsedRequest, RequestReader } from "./parse.ts";
import { problem } from "./problem.ts";
import { CONTINUE_BYTES, serializeResponse, serializeResponseInto } from "./response.ts";
import {
  closeUnixListener,
  LISTEN_BACKLOG,
  openUnixListener,
  removeUnixListenerPath,
  type UnixListenerSocket,
} from "./socket.ts";
import { heldByOthers, publishHeld, type SharedSocket } from "./shared_socket.ts";
import type { ContinueCheck, Handler, HttpRequest, HttpResponse, ListenerEvent } from "./types.ts";
import { WorkQueue } from "./work_queue.ts";

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
   * its opener. Example: `{ ...opts, shared: joinSharedSocket(setup, 1) }`.
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

type State = "waiting" | "reading" | "queued" | "active" | "writing" | "lingering" | "closed";

interface Conn {
  fd: number;
  serial: number;
  peer: PeerCred;
  state: State;
  since: number;
  reader: RequestReader | null;
  out: Uint8Array | null;
  outAt: number;
  /** The request was not read to its end: drain before close so the peer reads our answer. */
  unread: boolean;
  /** Added to epoll yet (a connection whose request is already there never needs to be). */
  watched: boolean;
  /** Bytes read and discarded since the answer was sent (lingering). */
  discarded: number;
}

const MAX_EVENTS = 256;
const READ_CHUNK = 64 * 1024;
const OUT_CHUNK = 16 * 1024;
const DRAIN_LIMIT = 256 * 1024;
/**
 * A connection answered before its request was read keeps reading (and discarding) after the
 * answer until the peer closes, for at most this long and this many bytes: a proxy still sending
 * a body past --max-body must not get a reset (it would answer 502 instead of relaying ours).
 */
const LINGER_MS = 2000;
const LINGER_LIMIT = 16 * 1024 * 1024;
const ACCEPT_BATCH = 64;
const IDLE_WAIT_CAP_MS = 500;
const ACCEPT_PAUSE_MS = 100;
const READER_POOL = 64;

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
  #now: () => number;
  #sock: UnixListenerSocket;
  #ep: number;
  #wake: number;
  #conns = new Map<number, Conn>();
  /** Connections that have sent nothing yet: the first-byte deadline. */
  #waiting: DeadlineQueue<Conn>;
  /** Requests partly read: the request deadline. */
  #reading: DeadlineQueue<Conn>;
  /** Responses the peer is slow to take: the same deadline. */
  #writing: DeadlineQueue<Conn>;
  /** Answered before their request was read: input discarded until the peer closes. */
  #lingering = new DeadlineQueue<Conn>(LINGER_MS);
  #work: WorkQueue<[Conn, ParsedRequest]>;
  #serial = 0;
  #ids = { prefix: randomHex8(), next: 0 };
  #readers: RequestReader[] = [];
  #readBuf = new Uint8Array(READ_CHUNK);
  /** Where responses are serialised; one that cannot be sent at once is copied out of it. */
  #outBuf = new Uint8Array(OUT_CHUNK);
  #events = new Uint8Array(MAX_EVENTS * EPOLL_EVENT_SIZE);
  #eventView: DataView;
  #ctlBuf = new Uint8Array(EPOLL_EVENT_SIZE);
  #ctlView: DataView;
  #acceptPausedUntil = 0;
  #closing = false;
  #stopped = false;
  #serving: Promise<void> | null = null;
  #closed: Promise<void> | null = null;
  #drained: (() => void) | null = null;
  #counts = {
    served: 0,
    refusedUid: 0,
    queueFull: 0,
    deadlineDrops: 0,
    parseErrors: 0,
    handlerErrors: 0,
  };

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
    this.#waiting = new DeadlineQueue(this.#opts.firstByteMs);
    this.#reading = new DeadlineQueue(this.#opts.bodyMs);
    this.#writing = new DeadlineQueue(this.#opts.bodyMs);
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

  /** Gauges and counters. */
  stats(): ListenerStats {
    return {
      waiting: this.#waiting.size,
      reading: this.#reading.size,
      active: this.#work.active,
      queued: this.#work.queued,
      ...this.#counts,
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
    for (const queue of [this.#waiting, this.#reading, this.#writing, this.#lingering]) {
      const due = queue.dueAt();
      if (due !== undefined) next = Math.min(next, due);
    }
    if (this.#acceptPausedUntil > now) next = Math.min(next, this.#acceptPausedUntil);
    return Math.max(0, Math.ceil(next - now));
  }

  #dispatch(n: number): void {
    const v = this.#eventView;
    for (let i = 0; i < n; i++) {
      const at = i * EPOLL_EVENT_SIZE;
      const events = v.getUint32(at, true);
      const fd = v.getInt32(at + EPOLL_DATA_OFFSET, true);
      const serial = v.getUint32(at + EPOLL_DATA_OFFSET + 4, true);
      if (fd === this.#sock.fd) this.#acceptSome();
      else if (fd === this.#wake) readFd(this.#wake, new Uint8Array(8), 8);
      else {
        const conn = this.#conns.get(fd);
        if (conn === undefined || conn.serial !== serial) continue; // stale event of a closed fd
        if (conn.state === "writing") this.#flush(conn);
        else if (conn.state === "lingering") this.#discard(conn);
        else if (conn.state === "waiting" || conn.state === "reading") this.#readFrom(conn, events);
      }
    }
  }

  #expire(): void {
    const now = this.#now();
    if (this.#acceptPausedUntil !== 0 && this.#acceptPausedUntil <= now && !this.#closing) {
      this.#acceptPausedUntil = 0;
      this.#setAccepting(true);
    }
    let drops = this.#waiting.expire(now, (conn) => {
      this.#opts.log?.({ kind: "deadline", phase: "first_byte", ms: this.#opts.firstByteMs });
      this.#closeConn(conn);
    });
    drops += this.#reading.expire(now, (conn) => {
      this.#opts.log?.({ kind: "deadline", phase: "request", ms: this.#opts.bodyMs });
      conn.unread = true;
      this.#respond(
        conn,
        problem(
          408,
          "Request timeout",
          `the request was not complete ${this.#opts.bodyMs} ms after its first byte`,
        ),
      );
    });
    drops += this.#writing.expire(now, (conn) => {
      this.#opts.log?.({ kind: "deadline", phase: "write", ms: this.#opts.bodyMs });
      this.#closeConn(conn);
    });
    this.#counts.deadlineDrops += drops;
    // The answer is out: a peer still sending at the linger deadline is simply closed.
    this.#lingering.expire(now, (conn) => this.#closeConn(conn));
  }

  // ---- accepting -----------------------------------------------------------------------------

  /** Accepts up to a batch; returns how many connections it took (accepted or refused). */
  #acceptSome(): number {
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
    if (!this.#opts.shared) return this.#ctl(EPOLL_CTL.MOD, fd, on ? EPOLL.IN : 0, 0);
    if (on) this.#ctl(EPOLL_CTL.ADD, fd, this.#acceptEvents(), 0);
    else libc().epoll_ctl(this.#ep, EPOLL_CTL.DEL, fd, this.#ctlBuf);
  }

  /** Accepts one connection: holds it and reads its request, or refuses it (peer uid, queue). */
  #accept(fd: number): void {
    const held = this.#held() + (this.#opts.shared ? heldByOthers(this.#opts.shared) : 0);
    const verdict = acceptVerdict(peerCred(fd), this.#opts.proxyUid, held, this.#opts.queueDepth);
    if (verdict.kind !== "accept") return this.#refuse(fd, verdict, held);
    const peer = verdict.peer;
    const conn: Conn = {
      fd,
      serial: (++this.#serial) >>> 0,
      peer,
      state: "waiting",
      since: this.#now(),
      reader: null,
      out: null,
      outAt: 0,
      unread: false,
      watched: false,
      discarded: 0,
    };
    this.#conns.set(fd, conn);
    this.#waiting.set(fd, conn);
    this.#publishHeld();
    // A proxy writes its request right after connect: try it now, and only watch it if it is silent.
    this.#readFrom(conn, 0);
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
      this.#drainInput(fd); // a proxy writes its request right after connect
    }
    libc().close(fd);
  }

  /** Connections not yet in a handler: what the queue depth bounds. */
  #held(): number {
    return this.#waiting.size + this.#reading.size + this.#work.queued;
  }

  /** Tells the listeners sharing the socket how many this one holds (at each change). */
  #publishHeld(): void {
    if (this.#opts.shared) publishHeld(this.#opts.shared, this.#held());
  }

  // ---- reading -------------------------------------------------------------------------------

  #readFrom(conn: Conn, _events: number): void {
    const buf = this.#readBuf;
    for (;;) {
      const r = readFd(conn.fd, buf, buf.length);
      if (r > 0) {
        if (conn.state === "waiting") this.#startReading(conn);
        const reader = conn.reader!;
        const step = reader.feed(buf.subarray(0, r));
        if (step.kind === "done") {
          this.#reading.delete(conn.fd);
          this.#releaseReader(conn);
          this.#enqueue(conn, step.request);
          return;
        }
        if (step.kind === "refuse") {
          this.#counts.parseErrors++;
          this.#opts.log?.({ kind: "parse_error", status: step.status, detail: step.detail });
          conn.unread = true;
          this.#respond(conn, problem(step.status, step.title, step.detail));
          return;
        }
        if (reader.wantsContinue && !this.#continueOrRefuse(conn, reader)) return;
        if (r < buf.length) break; // the socket is most likely empty: wait for more
        continue;
      }
      if (r === 0) return this.#closeConn(conn); // the peer left before finishing a request
      const e = errno();
      if (e === ERRNO.EAGAIN) break;
      if (e === ERRNO.EINTR) continue;
      return this.#closeConn(conn);
    }
    this.#watch(conn, EPOLL.IN | EPOLL.RDHUP | EPOLL.ONESHOT);
  }

  #watch(conn: Conn, events: number): void {
    this.#ctl(conn.watched ? EPOLL_CTL.MOD : EPOLL_CTL.ADD, conn.fd, events, conn.serial);
    conn.watched = true;
  }

  #startReading(conn: Conn): void {
    this.#waiting.delete(conn.fd);
    conn.state = "reading";
    conn.since = this.#now();
    conn.reader = this.#readers.pop() ?? new RequestReader(this.#opts);
    this.#reading.set(conn.fd, conn);
  }

  /**
   * `100 Continue` only for a request the handler side would take (route, identity, grant, budget):
   * any other gets its final answer now, before the client sends a body. False when refused.
   */
  #continueOrRefuse(conn: Conn, reader: RequestReader): boolean {
    const head = reader.head;
    const refusal = this.#opts.continueCheck?.({
      ...head,
      path: pathOf(head.target),
      peer: conn.peer,
    });
    if (refusal) {
      conn.unread = true;
      this.#respond(conn, refusal, undefined, head.method === "HEAD");
      return false;
    }
    sendFd(conn.fd, CONTINUE_BYTES, CONTINUE_BYTES.length);
    reader.continueSent();
    return true;
  }

  #releaseReader(conn: Conn): void {
    const reader = conn.reader;
    conn.reader = null;
    if (reader && this.#readers.length < READER_POOL) {
      reader.reset();
      this.#readers.push(reader);
    }
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
    if (conn.state === "active") this.#respond(conn, res, req.id, req.method === "HEAD");
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

  // ---- writing -------------------------------------------------------------------------------

  #respond(conn: Conn, res: HttpResponse, id?: string, headOnly = false): void {
    let bytes: Uint8Array;
    try {
      bytes = serializeResponseInto(res, headOnly, this.#outBuf);
    } catch (e) {
      bytes = serializeResponse(this.#handlerFailed(id ?? "-", e));
    }
    this.#reading.delete(conn.fd);
    this.#releaseReader(conn);
    this.#publishHeld();
    conn.out = bytes;
    conn.outAt = 0;
    conn.state = "writing";
    conn.since = this.#now();
    this.#flush(conn);
  }

  #flush(conn: Conn): void {
    const out = conn.out!;
    while (conn.outAt < out.length) {
      const rest = conn.outAt === 0 ? out : out.subarray(conn.outAt);
      const w = sendFd(conn.fd, rest, rest.length);
      if (w > 0) {
        conn.outAt += w;
        continue;
      }
      const e = errno();
      if (e === ERRNO.EINTR) continue;
      if (e === ERRNO.EAGAIN) {
        // The shared output buffer is reused by the next response: keep the rest in one's own.
        if (out.buffer === this.#outBuf.buffer) {
          conn.out = out.slice(conn.outAt);
          conn.outAt = 0;
        }
        if (!this.#writing.has(conn.fd)) this.#writing.set(conn.fd, conn);
        this.#watch(conn, EPOLL.OUT | EPOLL.ONESHOT);
        return;
      }
      break; // the peer is gone
    }
    if (conn.outAt === out.length && conn.unread) this.#linger(conn);
    else this.#closeConn(conn);
  }

  /**
   * The answer is written but the request was not read (413 from the head, 400, 408, a refused
   * 100-continue): closing now with input unread would reset the connection. Half-close instead,
   * so that the peer reads the answer and then its end, and discard what it still sends until it
   * closes, LINGER_LIMIT bytes or LINGER_MS. Holds no handler slot and counts against no queue.
   */
  #linger(conn: Conn): void {
    libc().shutdown(conn.fd, SHUT_WR);
    this.#writing.delete(conn.fd);
    conn.state = "lingering";
    conn.unread = false;
    conn.out = null;
    conn.since = this.#now();
    this.#lingering.set(conn.fd, conn);
    this.#discard(conn);
  }

  /** Reads and drops a lingering connection's input; closes it at its end or past the bound. */
  #discard(conn: Conn): void {
    const buf = this.#readBuf;
    for (;;) {
      const r = readFd(conn.fd, buf, buf.length);
      if (r > 0) {
        conn.discarded += r;
        if (conn.discarded >= LINGER_LIMIT) return this.#closeConn(conn);
        continue;
      }
      if (r < 0) {
        const e = errno();
        if (e === ERRNO.EINTR) continue;
        if (e === ERRNO.EAGAIN) return this.#watch(conn, EPOLL.IN | EPOLL.RDHUP | EPOLL.ONESHOT);
      }
      return this.#closeConn(conn); // the peer closed (or is gone)
    }
  }

  /**
   * Closing with unread input makes the kernel report ECONNRESET to the peer (a proxy then answers
   * 502 instead of ours): read what is already there, bounded, so the peer sees our answer and then
   * a clean end.
   */
  #drainInput(fd: number): void {
    for (let drained = 0; drained < DRAIN_LIMIT;) {
      const r = readFd(fd, this.#readBuf, this.#readBuf.length);
      if (r <= 0) break;
      drained += r;
    }
  }

  #closeConn(conn: Conn): void {
    if (conn.state === "closed") return;
    const c = libc();
    if (conn.unread) this.#drainInput(conn.fd);
    c.close(conn.fd);
    conn.state = "closed";
    conn.out = null;
    this.#conns.delete(conn.fd);
    this.#waiting.delete(conn.fd);
    this.#reading.delete(conn.fd);
    this.#writing.delete(conn.fd);
    this.#lingering.delete(conn.fd);
    this.#releaseReader(conn);
    this.#publishHeld();
    if (this.#acceptPausedUntil !== 0 && !this.#closing) {
      this.#acceptPausedUntil = 0;
      this.#setAccepting(true);
    }
    this.#checkDrained();
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
    for (const conn of [...this.#conns.values()]) this.#closeConn(conn);
    c.close(this.#ep);
    c.close(this.#wake);
  }

  #inFlight(): number {
    return this.#waiting.size + this.#reading.size + this.#writing.size + this.#lingering.size +
      this.#work.active + this.#work.queued;
  }

  #checkDrained(): void {
    if (this.#drained !== null && this.#inFlight() === 0) this.#drained();
  }

  #ctl(op: number, fd: number, events: number, serial: number): void {
    const v = this.#ctlView;
    v.setUint32(0, events >>> 0, true);
    v.setInt32(EPOLL_DATA_OFFSET, fd, true);
    v.setUint32(EPOLL_DATA_OFFSET + 4, serial >>> 0, true);
    if (libc().epoll_ctl(this.#ep, op, fd, this.#ctlBuf) !== 0) {
      const conn = this.#conns.get(fd);
      if (conn) this.#closeConn(conn); // e.g. ENOMEM: cannot watch it, so do not keep it
    }
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

function pathOf(target: string): string {
  const q = target.indexOf("?");
  return q < 0 ? target : target.slice(0, q);
}

function randomHex8(): string {
  return crypto.getRandomValues(new Uint8Array(4)).toHex();
}
