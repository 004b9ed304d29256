/**
 * What the public listener (./public_listener.ts) and the request threads (./request_threads.ts)
 * share: Worker isolates serving one socket that the main isolate opens. All of them start or
 * none does (a failed start stops the others and removes the socket); a stop removes the socket
 * file first, so that no client connects while the Workers take what the kernel already queued,
 * then closes every Worker, then the socket. Each Worker's end — a "closed" report, a crash, or
 * no answer within twice the grace — is kept by a {@link WorkerEnd}.
 *
 * @example
 * ```ts ignore
 * const group = await WorkerGroup.start(path, 2, (shared) => MyThread.start(shared), MyError);
 * await group.close(10_000);
 * ```
 */
import type { TokenOptions } from "../../token/mod.ts";
import {
  closeUnixListener,
  LISTEN_BACKLOG,
  openUnixListener,
  removeUnixListenerPath,
  type SharedSocket,
  shareSocket,
  type UnixListenerSocket,
} from "../../http/mod.ts";

/** How long a close waits for a Worker beyond twice the grace (connections, then sessions). */
const CLOSE_SLACK_MS = 2_000;

/**
 * What a Worker isolate needs to open the module the main isolate logged in to (its own sessions):
 * the token part of its setup message.
 */
export type WorkerTokenOptions = Required<
  Pick<TokenOptions, "modulePath" | "tokenLabel" | "maxSessions" | "inlineSignLimitUs">
>;

/** One Worker of a group, as the group sees it. */
export interface GroupMember {
  /** Resolves true when the Worker closed its sessions, false when it died or did not answer. */
  close(graceMs: number): Promise<boolean>;
}

/**
 * Workers serving one socket.
 * @example const group = await WorkerGroup.start(path, 2, startOne, PublicListenerError);
 */
export class WorkerGroup<T extends GroupMember> {
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
   *
   * @example
   * ```ts ignore
   * await WorkerGroup.start(path, 2, (shared, i) => Thread.start({ ...setup, shared }), MyError);
   * ```
   */
  static async start<T extends GroupMember>(
    path: string,
    count: number,
    startOne: (shared: SharedSocket, index: number) => Promise<T>,
    SocketError: new (message: string) => Error,
  ): Promise<WorkerGroup<T>> {
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
    return new WorkerGroup(socket, running);
  }

  /**
   * Removes the socket file, lets every member serve what was connected before (up to
   * `graceMs`) and close, then closes the socket. Resolves true when every member closed its
   * sessions. Calling it again returns the same promise.
   *
   * @example
   * ```ts ignore
   * if (!(await group.close(10_000))) console.error("the module is left to the process exit");
   * ```
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
 *
 * @example
 * ```ts ignore
 * const end = new WorkerEnd(worker);
 * worker.onerror = () => end.ended(false);
 * await end.close(1000, () => worker.postMessage({ kind: "close", graceMs: 1000 }));
 * ```
 */
export class WorkerEnd {
  #worker: Worker;
  #clean: boolean | undefined;
  #whenEnded: ((clean: boolean) => void) | undefined;
  #onEnded: ((clean: boolean) => void) | undefined;
  #closed: Promise<boolean> | undefined;

  /** `whenEnded` runs once, at the end however it came (the owner lets go of what the Worker held). */
  constructor(worker: Worker, whenEnded?: (clean: boolean) => void) {
    this.#worker = worker;
    this.#whenEnded = whenEnded;
  }

  /** Undefined while the Worker runs; then whether it ended clean. Example: `end.state` */
  get state(): boolean | undefined {
    return this.#clean;
  }

  /** Records the end (the first one counts; later ones are ignored) and finishes a close waiting for it. Example: `end.ended(true)` */
  ended(clean: boolean): void {
    if (this.#clean !== undefined) return;
    this.#clean = clean;
    this.#whenEnded?.(clean);
    this.#onEnded?.(clean);
  }

  /**
   * Handles the Worker's uncaught errors: before it started, `beforeStart` (the start fails);
   * after, the Worker is terminated, its end recorded (not clean) and `afterStart` told.
   *
   * @example
   * ```ts ignore
   * end.onError(() => started, (m) => reject(new Error(m)), (m) => hooks.onFailure(new Error(m)));
   * ```
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
   *
   * @example
   * ```ts ignore
   * await end.close(graceMs, () => worker.postMessage({ kind: "close", graceMs }));
   * ```
   */
  close(graceMs: number, askClose: () => void): Promise<boolean> {
    this.#closed ??= new Promise<boolean>((resolve) => {
      const worker = this.#worker;
      if (this.#clean !== undefined) {
        worker.terminate();
        return resolve(this.#clean);
      }
      // No answer in time counts as an end (not clean): the owner lets go of what it held.
      const timer = setTimeout(() => this.ended(false), 2 * graceMs + CLOSE_SLACK_MS);
      const finish = (clean: boolean) => {
        clearTimeout(timer);
        worker.terminate();
        resolve(clean);
      };
      this.#onEnded = finish;
      askClose();
    });
    return this.#closed;
  }
}

/**
 * A Worker's module: the source file `source` beside this one, or, in the packaged bundle (where
 * this code lives in svcd.js), the separately bundled `bundled` beside it.
 *
 * @example
 * ```ts ignore
 * new Worker(workerModule("public_worker.ts", "svcd-public-worker.js"), { type: "module" });
 * ```
 */
export function workerModule(source: string, bundled: string): URL {
  const url = new URL(`./${source}`, import.meta.url);
  try {
    Deno.statSync(url);
    return url;
  } catch {
    return new URL(`./${bundled}`, import.meta.url);
  }
}
