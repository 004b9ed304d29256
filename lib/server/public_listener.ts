/**
 * The main isolate's side of the public listener: opens its socket, starts its Workers
 * (./public_worker.ts, `--public-threads` of them, each accepting from that socket), waits until
 * they accept or start-up failed, relays what they report, and stops them before the token is
 * finalised (the Workers' sessions live in the same module opening).
 *
 * @example
 * ```ts ignore
 * const pub = await PublicListener.start(setup, 2, { log, onListenerEvent, onTokenDead, onFailure });
 * // … on SIGTERM
 * await pub.close(10_000);
 * ```
 */
import {
  closeUnixListener,
  LISTEN_BACKLOG,
  type ListenerEvent,
  openUnixListener,
  type SharedSocket,
  shareSocket,
  type UnixListenerSocket,
} from "../http/mod.ts";
import type { TokenOptions } from "../token/mod.ts";

/** Everything the Worker needs, as plain data (it crosses the isolate boundary by structured clone). */
export interface PublicWorkerSetup {
  socket: string;
  /** The socket, opened by the main isolate and accepted from by every Worker. */
  shared: SharedSocket;
  queueDepth: number;
  maxBodyBytes: number;
  workers: number;
  token: Required<Pick<TokenOptions, "modulePath" | "tokenLabel" | "maxSessions">>;
  caCertificates: string;
  responderCertificate?: string;
  revocationDb: string;
  ocspLabel: string;
  validitySeconds: number;
  /** Nice value the Worker gives its own thread (0 = the process's). */
  nice: number;
}

/** Main isolate → Worker. */
export type PublicWorkerMessage =
  | { kind: "start"; setup: PublicWorkerSetup }
  | { kind: "close"; graceMs: number };

/** Worker → main isolate. */
export type PublicWorkerReport =
  | { kind: "listening" }
  | { kind: "failed"; message: string }
  | { kind: "closed" }
  | { kind: "log"; message: string }
  | { kind: "listener_event"; event: ListenerEvent }
  | { kind: "token_dead"; message: string };

/** What the daemon hears from the public listener while it runs. */
export interface PublicListenerHooks {
  log(message: string): void;
  onListenerEvent(event: ListenerEvent): void;
  /** A signature failed with a dead token: the daemon stops as for the authenticated side. */
  onTokenDead(err: Error): void;
  /** A Worker died (an uncaught error): the public side no longer serves as configured. */
  onFailure(err: Error): void;
}

/** The public listener could not start; the message says why and what to do. */
export class PublicListenerError extends Error {
  override name = "PublicListenerError";
}

/**
 * How long a close waits for the Worker beyond twice the grace (its connections, then its
 * module operations, each get the grace).
 */
const CLOSE_SLACK_MS = 2_000;

/**
 * A running public listener: `threads` Workers accepting from one socket, which this side opens
 * (so a taken path fails before any Worker starts) and removes after the last Worker closed.
 * @example const pub = await PublicListener.start(setup, 2, hooks); await pub.close(1000);
 */
export class PublicListener {
  #socket: UnixListenerSocket;
  #threads: PublicThread[];
  #closed: Promise<boolean> | undefined;

  private constructor(socket: UnixListenerSocket, threads: PublicThread[]) {
    this.#socket = socket;
    this.#threads = threads;
  }

  /**
   * Opens the socket, starts `threads` Workers on it and resolves once every one accepts; rejects
   * with {@link PublicListenerError} when the socket cannot be opened or a Worker could not start
   * (everything started is then stopped again). `module` is the Worker's module
   * (./public_worker.ts; tests give a stand-in).
   *
   * @example
   * ```ts ignore
   * const pub = await PublicListener.start(setup, 2, hooks);
   * ```
   */
  static async start(
    setup: Omit<PublicWorkerSetup, "shared">,
    threads: number,
    hooks: PublicListenerHooks,
    module: URL = workerUrl(),
  ): Promise<PublicListener> {
    let socket: UnixListenerSocket;
    try {
      socket = openUnixListener(setup.socket, LISTEN_BACKLOG);
    } catch (err) {
      throw new PublicListenerError(`public listener: ${(err as Error).message}`);
    }
    const shares = shareSocket(socket, threads);
    const started = shares.map((shared) => PublicThread.start({ ...setup, shared }, hooks, module));
    const outcomes = await Promise.allSettled(started);
    const running = outcomes.flatMap((o) => o.status === "fulfilled" ? [o.value] : []);
    const failed = outcomes.find((o) => o.status === "rejected");
    if (failed) {
      await Promise.all(running.map((t) => t.close(0)));
      closeUnixListener(socket);
      throw failed.reason;
    }
    return new PublicListener(socket, running);
  }

  /**
   * Stops accepting, serves what was connected before (up to `graceMs`), closes every Worker's
   * sessions, ends the Workers and removes the socket. Resolves true when every Worker closed its
   * sessions, false when one had died or did not answer in time (a module call of its own may
   * still run: the caller must not finalise the module). Calling it again returns the same promise.
   *
   * @example
   * ```ts ignore
   * if (!(await pub.close(10_000))) console.error("the module is left to the process exit");
   * ```
   */
  close(graceMs: number): Promise<boolean> {
    this.#closed ??= Promise.all(this.#threads.map((t) => t.close(graceMs))).then((clean) => {
      closeUnixListener(this.#socket);
      return clean.every(Boolean);
    });
    return this.#closed;
  }
}

/** One Worker of the public listener. */
class PublicThread {
  #worker: Worker;
  #closed: Promise<boolean> | undefined;
  /** Set when the Worker said "closed" (true) or died (false); a close then resolves at once. */
  #ended: boolean | undefined;
  #onEnded: ((clean: boolean) => void) | undefined;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  /** Starts the Worker; resolves once it accepts, rejects when it could not start. */
  static start(
    setup: PublicWorkerSetup,
    hooks: PublicListenerHooks,
    module: URL,
  ): Promise<PublicThread> {
    const worker = new Worker(module, {
      type: "module",
      name: `svcd-public-${setup.shared.slot}`,
    });
    const thread = new PublicThread(worker);
    return new Promise((resolve, reject) => {
      let started = false;
      const fail = (message: string) => {
        worker.terminate();
        reject(new PublicListenerError(`public listener: ${message}`));
      };
      worker.onmessage = (e: MessageEvent<PublicWorkerReport>) => {
        const report = e.data;
        switch (report.kind) {
          case "listening":
            started = true;
            resolve(thread);
            return;
          case "failed":
            return fail(report.message);
          case "closed":
            return thread.#end(true);
          case "log":
            return hooks.log(report.message);
          case "listener_event":
            return hooks.onListenerEvent(report.event);
          case "token_dead":
            return hooks.onTokenDead(new Error(report.message));
        }
      };
      worker.onerror = (e: ErrorEvent) => {
        e.preventDefault();
        const message = e.message || "the Worker failed";
        if (!started) return fail(message);
        worker.terminate();
        thread.#end(false);
        hooks.onFailure(new Error(`public listener failed: ${message}`));
      };
      worker.postMessage({ kind: "start", setup } satisfies PublicWorkerMessage);
    });
  }

  #end(clean: boolean): void {
    this.#ended ??= clean;
    this.#onEnded?.(this.#ended);
  }

  /** As PublicListener.close, for this Worker alone (the socket stays open). */
  close(graceMs: number): Promise<boolean> {
    this.#closed ??= new Promise<boolean>((resolve) => {
      const worker = this.#worker;
      if (this.#ended !== undefined) {
        worker.terminate();
        return resolve(this.#ended);
      }
      const timer = setTimeout(() => finish(false), 2 * graceMs + CLOSE_SLACK_MS);
      const finish = (clean: boolean) => {
        clearTimeout(timer);
        worker.terminate();
        resolve(clean);
      };
      this.#onEnded = finish;
      worker.postMessage({ kind: "close", graceMs } satisfies PublicWorkerMessage);
    });
    return this.#closed;
  }
}

/**
 * The Worker's module: the source file beside this one, or, in the packaged bundle (where this
 * code lives in svcd.js), the separately bundled `svcd-public-worker.js` beside it.
 */
function workerUrl(): URL {
  const source = new URL("./public_worker.ts", import.meta.url);
  try {
    Deno.statSync(source);
    return source;
  } catch {
    return new URL("./svcd-public-worker.js", import.meta.url);
  }
}
