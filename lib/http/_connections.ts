/**
 * The connections a listener holds, from accept to close, and their bytes: reading and parsing
 * each one's request (with the `100 Continue` check before its body), writing its answer,
 * lingering after an answer sent before the request was read, and the deadline of each of these
 * states. Which connections to hold, and when a handler runs, is the listener's (./listener.ts):
 * it is this file's {@link ConnectionHost}.
 *
 * @example
 * ```ts
 * declare const opts: ConnectionOptions, host: ConnectionHost, fd: number;
 * const connections = new Connections(opts, host);
 * connections.hold(fd, { pid: 1, uid: 33, gid: 33 }); // reads at once what the peer has sent
 * connections.expire(performance.now()); // at each turn of the reactor
 * ```
 */
import {
  EPOLL,
  ERRNO,
  errno,
  libc,
  type PeerCred,
  readFd,
  sendFd,
  SHUT_WR,
} from "../../ffi/libc.ts";
import { type ParsedRequest, pathOf, RequestReader } from "./parse.ts";
import { problem } from "./problem.ts";
import { CONTINUE_BYTES, serializeResponse, serializeResponseInto } from "./response.ts";
import type { ContinueCheck, HttpResponse, ListenerEvent } from "./types.ts";

/** Where a connection is; the listener sets `queued` and `active` (the handler side). */
export type ConnState =
  | "waiting"
  | "reading"
  | "queued"
  | "active"
  | "writing"
  | "lingering"
  | "closed";

/** One accepted connection. */
export interface Conn {
  fd: number;
  /** Tells a stale epoll event of a closed fd from one of the connection that reuses it. */
  serial: number;
  peer: PeerCred;
  state: ConnState;
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

/** What the connections need of the listener that holds them. */
export interface ConnectionHost {
  /**
   * Watches `fd` for `events` (one-shot): adds it to epoll, or changes its watch when `again`;
   * false when epoll refuses.
   */
  watch(fd: number, serial: number, events: number, again: boolean): boolean;
  /** The request is read in full: it waits for a handler slot. */
  requestRead(conn: Conn, request: ParsedRequest): void;
  /** The connections held before a handler changed in number (one came, or was answered). */
  heldChanged(): void;
  /** A connection was closed. */
  closed(): void;
  /** The answer in place of one that cannot be serialised: a 500, counted and logged. */
  failed(id: string, error: unknown): HttpResponse;
}

/** Limits, clock and hooks of the connections: the listener's options. */
export interface ConnectionOptions {
  maxBodyBytes: number;
  maxHeaderBytes: number;
  firstByteMs: number;
  bodyMs: number;
  continueCheck?: ContinueCheck;
  log?: (event: ListenerEvent) => void;
  now: () => number;
}

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
const READER_POOL = 64;
const WATCH_READ = EPOLL.IN | EPOLL.RDHUP | EPOLL.ONESHOT;

/**
 * Every connection of one listener, by file descriptor, under the deadline of its state.
 *
 * @example
 * ```ts
 * declare const connections: Connections, conn: Conn;
 * connections.respond(conn, { status: 204 }); // writes it, then closes (or lingers)
 * ```
 */
export class Connections {
  readonly #opts: ConnectionOptions;
  readonly #host: ConnectionHost;
  readonly #byFd = new Map<number, Conn>();
  /** Connections that have sent nothing yet: the first-byte deadline. */
  readonly #waiting: DeadlineQueue<Conn>;
  /** Requests partly read: the request deadline. */
  readonly #reading: DeadlineQueue<Conn>;
  /** Responses the peer is slow to take: the same deadline. */
  readonly #writing: DeadlineQueue<Conn>;
  /** Answered before their request was read: input discarded until the peer closes. */
  readonly #lingering = new DeadlineQueue<Conn>(LINGER_MS);
  #serial = 0;
  #readers: RequestReader[] = [];
  #readBuf = new Uint8Array(READ_CHUNK);
  /** Where responses are serialised; one that cannot be sent at once is copied out of it. */
  #outBuf = new Uint8Array(OUT_CHUNK);
  /** Counters of the listener's stats. */
  readonly counts = { deadlineDrops: 0, parseErrors: 0 };

  constructor(opts: ConnectionOptions, host: ConnectionHost) {
    this.#opts = opts;
    this.#host = host;
    this.#waiting = new DeadlineQueue(opts.firstByteMs);
    this.#reading = new DeadlineQueue(opts.bodyMs);
    this.#writing = new DeadlineQueue(opts.bodyMs);
  }

  /** Connections accepted that have sent nothing yet. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** Connections whose request is partly read. */
  get reading(): number {
    return this.#reading.size;
  }

  /** Connections whose bytes still move outside a handler: waiting, reading, writing, lingering. */
  get inFlight(): number {
    return this.#waiting.size + this.#reading.size + this.#writing.size + this.#lingering.size;
  }

  /** When the next deadline is due (the clock of `opts.now`), or undefined when none runs. */
  dueAt(): number | undefined {
    let next: number | undefined;
    for (const queue of [this.#waiting, this.#reading, this.#writing, this.#lingering]) {
      const due = queue.dueAt();
      if (due !== undefined && (next === undefined || due < next)) next = due;
    }
    return next;
  }

  /** Holds an accepted connection and reads what it has sent; only a silent one is watched. */
  hold(fd: number, peer: PeerCred): void {
    const conn: Conn = {
      fd,
      serial: (++this.#serial) >>> 0,
      peer,
      state: "waiting",
      since: this.#opts.now(),
      reader: null,
      out: null,
      outAt: 0,
      unread: false,
      watched: false,
      discarded: 0,
    };
    this.#byFd.set(fd, conn);
    this.#waiting.set(fd, conn);
    this.#host.heldChanged();
    // A proxy writes its request right after connect: try it now, and only watch it if it is silent.
    this.#readFrom(conn);
  }

  /** epoll says `fd` is ready: its bytes move on. A stale event of a closed fd is ignored. */
  ready(fd: number, serial: number): void {
    const conn = this.#byFd.get(fd);
    if (conn === undefined || conn.serial !== serial) return;
    if (conn.state === "writing") this.#flush(conn);
    else if (conn.state === "lingering") this.#discard(conn);
    else if (conn.state === "waiting" || conn.state === "reading") this.#readFrom(conn);
  }

  /** Acts on every deadline due at `now`: closes, or answers 408. */
  expire(now: number): void {
    let drops = this.#waiting.expire(now, (conn) => {
      this.#opts.log?.({ kind: "deadline", phase: "first_byte", ms: this.#opts.firstByteMs });
      this.close(conn);
    });
    drops += this.#reading.expire(now, (conn) => {
      this.#opts.log?.({ kind: "deadline", phase: "request", ms: this.#opts.bodyMs });
      conn.unread = true;
      this.respond(
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
      this.close(conn);
    });
    this.counts.deadlineDrops += drops;
    // The answer is out: a peer still sending at the linger deadline is simply closed.
    this.#lingering.expire(now, (conn) => this.close(conn));
  }

  // ---- reading -------------------------------------------------------------------------------

  #readFrom(conn: Conn): void {
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
          this.#host.requestRead(conn, step.request);
          return;
        }
        if (step.kind === "refuse") {
          this.counts.parseErrors++;
          this.#opts.log?.({ kind: "parse_error", status: step.status, detail: step.detail });
          conn.unread = true;
          this.respond(conn, problem(step.status, step.title, step.detail));
          return;
        }
        if (reader.wantsContinue && !this.#continueOrRefuse(conn, reader)) return;
        if (r < buf.length) break; // the socket is most likely empty: wait for more
        continue;
      }
      if (r === 0) return this.close(conn); // the peer left before finishing a request
      const e = errno();
      if (e === ERRNO.EAGAIN) break;
      if (e === ERRNO.EINTR) continue;
      return this.close(conn);
    }
    this.#watch(conn, WATCH_READ);
  }

  #watch(conn: Conn, events: number): void {
    // e.g. ENOMEM: a connection that cannot be watched is not kept.
    if (!this.#host.watch(conn.fd, conn.serial, events, conn.watched)) return this.close(conn);
    conn.watched = true;
  }

  #startReading(conn: Conn): void {
    this.#waiting.delete(conn.fd);
    conn.state = "reading";
    conn.since = this.#opts.now();
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
      this.respond(conn, refusal, undefined, head.method === "HEAD");
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

  // ---- writing -------------------------------------------------------------------------------

  /** Writes `res` (its head alone when `headOnly`), then closes the connection or lingers. */
  respond(conn: Conn, res: HttpResponse, id?: string, headOnly = false): void {
    let bytes: Uint8Array;
    try {
      bytes = serializeResponseInto(res, headOnly, this.#outBuf);
    } catch (e) {
      bytes = serializeResponse(this.#host.failed(id ?? "-", e));
    }
    this.#reading.delete(conn.fd);
    this.#releaseReader(conn);
    this.#host.heldChanged();
    conn.out = bytes;
    conn.outAt = 0;
    conn.state = "writing";
    conn.since = this.#opts.now();
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
    else this.close(conn);
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
    conn.since = this.#opts.now();
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
        if (conn.discarded >= LINGER_LIMIT) return this.close(conn);
        continue;
      }
      if (r < 0) {
        const e = errno();
        if (e === ERRNO.EINTR) continue;
        if (e === ERRNO.EAGAIN) return this.#watch(conn, WATCH_READ);
      }
      return this.close(conn); // the peer closed (or is gone)
    }
  }

  // ---- closing -------------------------------------------------------------------------------

  /**
   * Closing with unread input makes the kernel report ECONNRESET to the peer (a proxy then answers
   * 502 instead of ours): read what is already there, bounded, so the peer sees our answer and then
   * a clean end. Also for a connection refused at accept, never held.
   */
  drainInput(fd: number): void {
    for (let drained = 0; drained < DRAIN_LIMIT;) {
      const r = readFd(fd, this.#readBuf, this.#readBuf.length);
      if (r <= 0) break;
      drained += r;
    }
  }

  /** Closes the connection (once) and forgets it. */
  close(conn: Conn): void {
    if (conn.state === "closed") return;
    if (conn.unread) this.drainInput(conn.fd);
    libc().close(conn.fd);
    conn.state = "closed";
    conn.out = null;
    this.#byFd.delete(conn.fd);
    this.#waiting.delete(conn.fd);
    this.#reading.delete(conn.fd);
    this.#writing.delete(conn.fd);
    this.#lingering.delete(conn.fd);
    this.#releaseReader(conn);
    this.#host.closed();
  }

  /** Closes every connection still held (the end of a shutdown). */
  closeAll(): void {
    for (const conn of [...this.#byFd.values()]) this.close(conn);
  }
}

/**
 * Connections under one deadline: every entry of a queue has the same allowance (`ms`) from its
 * `since`, and entries are added in `since` order, so an insertion-ordered Map is already ordered
 * by deadline — the head is always the next to expire, and expiring stops at the first that is not
 * due.
 *
 * @example
 * ```ts
 * const silent = new DeadlineQueue<{ since: number }>(1000);
 * silent.set(7, { since: performance.now() });
 * silent.expire(performance.now(), (conn) => console.log("closing", conn));
 * ```
 */
export class DeadlineQueue<V extends { since: number }> {
  readonly #entries = new Map<number, V>();

  constructor(readonly ms: number) {}

  /** Entries held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Adds (at the end: its `since` must not be earlier than any entry's) or keeps an entry. */
  set(fd: number, entry: V): void {
    this.#entries.set(fd, entry);
  }

  /** Whether `fd` is held. */
  has(fd: number): boolean {
    return this.#entries.has(fd);
  }

  /** Removes `fd` if held. */
  delete(fd: number): void {
    this.#entries.delete(fd);
  }

  /** When the head is due (the clock of its entries' `since`), or undefined when empty. */
  dueAt(): number | undefined {
    for (const entry of this.#entries.values()) return entry.since + this.ms;
    return undefined;
  }

  /**
   * Calls `drop` for every entry due at `now`, oldest first; returns how many. `drop` must remove
   * the entry (or move it to another queue).
   */
  expire(now: number, drop: (entry: V) => void): number {
    const before = now - this.ms;
    let dropped = 0;
    for (const entry of this.#entries.values()) {
      if (entry.since > before) break;
      dropped++;
      drop(entry);
    }
    return dropped;
  }
}
