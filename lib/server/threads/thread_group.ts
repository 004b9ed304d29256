/**
 * What both kinds of thread share, public threads (./public_threads.ts) and request threads
 * (./request_threads.ts): the Workers of one listener, serving one socket that the main isolate
 * opens ({@link ThreadGroup}); one thread's start-up handshake and stop ({@link ListenerThread},
 * {@link ThreadEnd}); the stop inside a thread ({@link stopThread}); and where a thread's module is
 * ({@link threadModule}).
 */
import type { ListenerEvent } from "../../http/mod.ts";
import {
  closeUnixListener,
  LISTEN_BACKLOG,
  openUnixListener,
  removeUnixListenerPath,
  type SharedSocket,
  shareSocket,
  type UnixListenerSocket,
} from "../../http/mod.ts";
import type { Listener } from "../../http/mod.ts";
import type { Token } from "../../token/mod.ts";
import type { LifeReport } from "./protocol.ts";

/** How long a close waits for a Worker beyond twice the grace (connections, then sessions). */
const CLOSE_SLACK_MS = 2_000;

/** Runs `fn` after `ms` milliseconds; returns what cancels it. */
export type Later = (fn: () => void, ms: number) => () => void;

/** `Later` on the event loop's timers. */
function afterDelay(fn: () => void, ms: number): () => void {
  const timer = setTimeout(fn, ms);
  return () => clearTimeout(timer);
}

/** One Worker of a group, as the group sees it. */
export interface GroupMember {
  /** Resolves true when the Worker closed its sessions, false when it died or did not answer. */
  close(graceMs: number): Promise<boolean>;
}

/**
 * The threads of one listener, serving one socket: all of them start or none does (a failed start
 * stops the others and removes the socket); a stop removes the socket file first, so that no client
 * connects while the threads take what the kernel already queued, then closes every thread, then
 * the socket.
 */
export class ThreadGroup<T extends GroupMember> {
  readonly members: readonly T[];
  #socket: UnixListenerSocket;
  #closed: Promise<boolean> | undefined;

  private constructor(socket: UnixListenerSocket, members: T[]) {
    this.#socket = socket;
    this.members = members;
  }

  /**
   * Opens the socket at `path` and starts `count` members on it (`startOne` with each one's
   * share); resolves once all of them started. A socket that cannot be opened rejects with
   * `SocketError` and its message; a member that could not start rejects with its own error,
   * after the others were closed and the socket removed.
   */
  static async start<T extends GroupMember>(
    path: string,
    count: number,
    startOne: (shared: SharedSocket, index: number) => Promise<T>,
    SocketError: new (message: string) => Error,
  ): Promise<ThreadGroup<T>> {
    let socket: UnixListenerSocket;
    try {
      socket = openUnixListener(path, LISTEN_BACKLOG);
    } catch (err) {
      throw new SocketError((err as Error).message);
    }
    const outcomes = await Promise.allSettled(shareSocket(socket, count).map(startOne));
    const running = outcomes.flatMap((o) => o.status === "fulfilled" ? [o.value] : []);
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed) {
      await Promise.all(running.map((member) => member.close(0)));
      closeUnixListener(socket);
      throw failed.reason;
    }
    return new ThreadGroup(socket, running);
  }

  /**
   * Removes the socket file, lets every member serve what was connected before (up to
   * `graceMs`) and close, then closes the socket. Resolves true when every member closed its
   * sessions. Calling it again returns the same promise.
   */
  close(graceMs: number): Promise<boolean> {
    this.#closed ??= (async () => {
      removeUnixListenerPath(this.#socket);
      const clean = await Promise.all(this.members.map((member) => member.close(graceMs)));
      closeUnixListener(this.#socket);
      return clean.every(Boolean);
    })();
    return this.#closed;
  }
}

/**
 * How one Worker ended: it said "closed" (clean), or it died, or it did not answer a close in
 * time (not clean: a module call of its own may still run).
 */
export class ThreadEnd {
  #worker: Worker;
  #clean: boolean | undefined;
  #whenEnded: ((clean: boolean) => void) | undefined;
  #onEnded: ((clean: boolean) => void) | undefined;
  #closed: Promise<boolean> | undefined;
  #later: Later;

  /**
   * `whenEnded` runs once, at the end however it came (the owner lets go of what the Worker held).
   * `later` times the wait for a close's answer (a test gives its own, to fire it by hand).
   */
  constructor(worker: Worker, whenEnded?: (clean: boolean) => void, later: Later = afterDelay) {
    this.#worker = worker;
    this.#whenEnded = whenEnded;
    this.#later = later;
  }

  /** Undefined while the Worker runs; then whether it ended clean. */
  get state(): boolean | undefined {
    return this.#clean;
  }

  /** Records the end (the first one counts; later ones are ignored) and finishes a close waiting for it. */
  ended(clean: boolean): void {
    if (this.#clean !== undefined) return;
    this.#clean = clean;
    this.#whenEnded?.(clean);
    this.#onEnded?.(clean);
  }

  /**
   * Handles the Worker's uncaught errors: before it started, `beforeStart` (the start fails);
   * after, the Worker is terminated, its end recorded (not clean) and `afterStart` told.
   */
  onError(
    started: () => boolean,
    beforeStart: (message: string) => void,
    afterStart: (message: string) => void,
  ): void {
    this.#worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      const message = e.message || "the Worker failed";
      if (!started()) return beforeStart(message);
      this.#worker.terminate();
      this.ended(false);
      afterStart(message);
    };
  }

  /**
   * Asks the Worker to close (`askClose` posts the message) and resolves with how it ended; a
   * Worker that already ended resolves at once, one that does not answer within twice the grace
   * (plus slack) is terminated and resolves false. Calling it again returns the same promise.
   */
  close(graceMs: number, askClose: () => void): Promise<boolean> {
    this.#closed ??= new Promise<boolean>((resolve) => {
      const worker = this.#worker;
      if (this.#clean !== undefined) {
        worker.terminate();
        return resolve(this.#clean);
      }
      // No answer in time counts as an end (not clean): the owner lets go of what it held.
      const cancel = this.#later(() => this.ended(false), 2 * graceMs + CLOSE_SLACK_MS);
      const finish = (clean: boolean) => {
        cancel();
        worker.terminate();
        resolve(clean);
      };
      this.#onEnded = finish;
      askClose();
    });
    return this.#closed;
  }
}

/** What the daemon hears from a listener's threads while they run. */
export interface ThreadHooks {
  /** A line for the daemon's log. */
  log(message: string): void;
  onListenerEvent(event: ListenerEvent): void;
  /** A request found the token dead: the daemon stops (exit 75). */
  onTokenDead(err: Error): void;
  /** A thread died (an uncaught error): its listener no longer serves as configured (exit 70). */
  onFailure(err: Error): void;
}

/** How one kind of thread names itself in the errors of its start and of its failure. */
export interface ThreadKind<Report extends { kind: string }> {
  /** As the daemon's log names it: "request thread", "public listener". */
  name: string;
  /** The error a failed start rejects with. */
  startError(message: string): Error;
  /** Reports other than the ones both kinds share ({@link LifeReport}). */
  onReport(report: Exclude<Report, LifeReport>): void;
}

/**
 * One thread of a listener as the main isolate sees it, the same for both kinds: the start-up
 * handshake ("start", then "listening" or "failed"), the reports both kinds make, and the stop.
 */
export class ListenerThread<Message, Report extends { kind: string }> {
  readonly #worker: Worker;
  readonly #end: ThreadEnd;

  /** `whenEnded` runs once when the thread ended, however (the owner lets go of what it held). */
  constructor(module: URL, name: string, whenEnded?: (clean: boolean) => void) {
    // The name is the Worker's (self.name); its OS thread is "worker-N" in /proc whatever it is.
    this.#worker = new Worker(module, { type: "module", name });
    this.#end = new ThreadEnd(this.#worker, whenEnded);
  }

  /** True once the thread ended (closed, died, or no answer to a close). */
  get ended(): boolean {
    return this.#end.state !== undefined;
  }

  /** Posts a message (or a batch of them) to the thread. */
  post(message: Message | { kind: "batch"; messages: Message[] }): void {
    this.#worker.postMessage(message);
  }

  /**
   * Sends "start" with `setup`; resolves once the thread accepts, rejects with `kind.startError`
   * when it could not start (the thread is then ended). Reports of one batch are handled in order;
   * an uncaught error after the start ends the thread and tells `hooks.onFailure`.
   */
  start<Setup>(setup: Setup, kind: ThreadKind<Report>, hooks: ThreadHooks): Promise<void> {
    return new Promise((resolve, reject) => {
      let started = false;
      const fail = (message: string) => {
        this.#worker.terminate();
        this.#end.ended(false);
        reject(kind.startError(message));
      };
      const onReport = (report: Report | LifeReport) => {
        switch (report.kind) {
          case "listening":
            started = true;
            return resolve();
          case "failed":
            return fail((report as { message: string }).message);
          case "closed":
            return this.#end.ended(true);
          case "log":
            return hooks.log((report as { message: string }).message);
          case "listener_event":
            return hooks.onListenerEvent((report as { event: ListenerEvent }).event);
          case "token_dead":
            return hooks.onTokenDead(new Error((report as { message: string }).message));
          default:
            return kind.onReport(report as Exclude<Report, LifeReport>);
        }
      };
      this.#worker.onmessage = (e: MessageEvent<Report | { kind: "batch"; reports: Report[] }>) => {
        const report = e.data;
        if (report.kind !== "batch") return onReport(report as Report);
        for (const r of (report as { reports: Report[] }).reports) onReport(r);
      };
      this.#end.onError(
        () => started,
        fail,
        (message) => hooks.onFailure(new Error(`${kind.name} failed: ${message}`)),
      );
      this.#worker.postMessage({ kind: "start", setup });
    });
  }

  /**
   * Asks the thread to close (after `beforeClose`, which may post what is still to go) and resolves
   * true when it closed its sessions; see {@link ThreadEnd.close}.
   */
  close(graceMs: number, beforeClose?: () => void): Promise<boolean> {
    return this.#end.close(graceMs, () => {
      beforeClose?.();
      this.#worker.postMessage({ kind: "close", graceMs });
    });
  }
}

/** What a listener's thread runs, as its stop closes it. */
export interface ThreadService {
  listener: Listener | undefined;
  /** The listener's serve() promise. */
  serving: Promise<void> | undefined;
  token: Token | undefined;
}

/**
 * The stop inside a thread, the same for both kinds: its listener first (what it holds is served
 * up to the grace), then its sessions, closed only once no module call of its own runs any more (a
 * call still running after the grace keeps them: the module is then left to the process exit).
 */
export async function stopThread(service: ThreadService, graceMs: number): Promise<void> {
  await service.listener?.close(graceMs);
  await service.serving;
  if (service.token && await service.token.whenIdle(graceMs)) service.token.close();
}

/**
 * A thread's module: the source file `source` beside this one, or, in the packaged bundle (where
 * this code lives in svcd.js), the separately bundled `bundled` beside it.
 */
export function threadModule(source: string, bundled: string): URL {
  const url = new URL(`./${source}`, import.meta.url);
  try {
    Deno.statSync(url);
    return url;
  } catch {
    return new URL(`./${bundled}`, import.meta.url);
  }
}
