/**
 * The main isolate's side of the public listener: starts its Worker (./public_worker.ts), waits
 * until the socket accepts or start-up failed, relays what the Worker reports, and stops it before
 * the token is finalised (the Worker's sessions live in the same module opening).
 *
 * @example
 * ```ts ignore
 * const pub = await PublicListener.start(setup, { log, onTokenDead, onFailure });
 * // … on SIGTERM
 * await pub.close(10_000);
 * ```
 */
import type { ListenerEvent } from "../http/mod.ts";
import type { TokenOptions } from "../token/mod.ts";

/** Everything the Worker needs, as plain data (it crosses the isolate boundary by structured clone). */
export interface PublicWorkerSetup {
  socket: string;
  queueDepth: number;
  maxBodyBytes: number;
  workers: number;
  token: Required<Pick<TokenOptions, "modulePath" | "tokenLabel" | "maxSessions">>;
  caCertificates: string;
  responderCertificate?: string;
  revocationDb: string;
  ocspLabel: string;
  validitySeconds: number;
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
  /** The Worker died (an uncaught error): the public side no longer serves. */
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
 * A running public listener.
 * @example const pub = await PublicListener.start(setup, hooks); await pub.close(1000);
 */
export class PublicListener {
  #worker: Worker;
  #closed: Promise<boolean> | undefined;
  /** Set when the Worker said "closed" (true) or died (false); a close then resolves at once. */
  #ended: boolean | undefined;
  #onEnded: ((clean: boolean) => void) | undefined;

  private constructor(worker: Worker) {
    this.#worker = worker;
  }

  /**
   * Starts the Worker and resolves once its socket accepts; rejects with
   * {@link PublicListenerError} when it could not start (the Worker is then gone). `module` is
   * the Worker's module (./public_worker.ts; tests give a stand-in).
   *
   * @example
   * ```ts ignore
   * const pub = await PublicListener.start(setup, hooks);
   * ```
   */
  static start(
    setup: PublicWorkerSetup,
    hooks: PublicListenerHooks,
    module: URL = workerUrl(),
  ): Promise<PublicListener> {
    const worker = new Worker(module, { type: "module", name: "svcd-public" });
    const pub = new PublicListener(worker);
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
            resolve(pub);
            return;
          case "failed":
            return fail(report.message);
          case "closed":
            return pub.#end(true);
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
        pub.#end(false);
        hooks.onFailure(new Error(`public listener failed: ${message}`));
      };
      worker.postMessage({ kind: "start", setup } satisfies PublicWorkerMessage);
    });
  }

  #end(clean: boolean): void {
    this.#ended ??= clean;
    this.#onEnded?.(this.#ended);
  }

  /**
   * Stops accepting, serves what was connected before (up to `graceMs`), closes the Worker's
   * sessions and ends the Worker. Resolves true when the Worker closed its sessions, false when it
   * had died or did not answer in time (a module call of its own may still run: the caller must
   * not finalise the module). Calling it again returns the same promise.
   *
   * @example
   * ```ts ignore
   * if (!(await pub.close(10_000))) console.error("the module is left to the process exit");
   * ```
   */
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
