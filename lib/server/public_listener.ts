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
import type { ListenerEvent, SharedSocket } from "../http/mod.ts";
import { createIndexMemory, type IndexMemory } from "../ocsp/mod.ts";
import { WorkerEnd, WorkerGroup, workerModule, type WorkerTokenOptions } from "./worker_group.ts";

/** Everything the Worker needs, as plain data (it crosses the isolate boundary by structured clone). */
export interface PublicWorkerSetup {
  socket: string;
  /** The socket, opened by the main isolate and accepted from by every Worker. */
  shared: SharedSocket;
  queueDepth: number;
  maxBodyBytes: number;
  workers: number;
  token: WorkerTokenOptions;
  caCertificates: string;
  responderCertificate?: string;
  revocationDb: string;
  /** Most certificates in the revocation database (sizes the shared memory). */
  revocationMaxEntries: number;
  /** The revocation database, read once into this memory for every Worker (made by `start`). */
  revocationMemory: IndexMemory;
  ocspLabel: string;
  validitySeconds: number;
  /** Nice value the Worker gives its own thread when it is above the thread's (never lowered). */
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
 * A running public listener: `threads` Workers accepting from one socket, which this side opens
 * (so a taken path fails before any Worker starts) and removes when they stop (./worker_group.ts).
 * @example const pub = await PublicListener.start(setup, 2, hooks); await pub.close(1000);
 */
export class PublicListener {
  #group: WorkerGroup<PublicThread>;

  private constructor(group: WorkerGroup<PublicThread>) {
    this.#group = group;
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
    setup: Omit<PublicWorkerSetup, "shared" | "revocationMemory">,
    threads: number,
    hooks: PublicListenerHooks,
    module: URL = workerModule("public_worker.ts", "svcd-public-worker.js"),
  ): Promise<PublicListener> {
    // One copy of the revocation database, parsed once, for every Worker.
    const revocationMemory = createIndexMemory(setup.revocationMaxEntries);
    const group = await WorkerGroup.start(
      setup.socket,
      threads,
      (shared) => PublicThread.start({ ...setup, shared, revocationMemory }, hooks, module),
      SocketError,
    );
    return new PublicListener(group);
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
    return this.#group.close(graceMs);
  }
}

/** The socket of the public listener could not be opened. */
class SocketError extends PublicListenerError {
  constructor(message: string) {
    super(`public listener: ${message}`);
  }
}

/** One Worker of the public listener. */
class PublicThread {
  #worker: Worker;
  #end: WorkerEnd;

  private constructor(worker: Worker) {
    this.#worker = worker;
    this.#end = new WorkerEnd(worker);
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
            return thread.#end.ended(true);
          case "log":
            return hooks.log(report.message);
          case "listener_event":
            return hooks.onListenerEvent(report.event);
          case "token_dead":
            return hooks.onTokenDead(new Error(report.message));
        }
      };
      thread.#end.onError(
        () => started,
        fail,
        (message) => hooks.onFailure(new Error(`public listener failed: ${message}`)),
      );
      worker.postMessage({ kind: "start", setup } satisfies PublicWorkerMessage);
    });
  }

  /** As PublicListener.close, for this Worker alone (the socket stays open). */
  close(graceMs: number): Promise<boolean> {
    return this.#end.close(
      graceMs,
      () => this.#worker.postMessage({ kind: "close", graceMs } satisfies PublicWorkerMessage),
    );
  }
}
