/**
 * The main isolate's side of the public listener: opens its socket, starts its threads
 * (./public_thread.ts, `--public-threads` of them, each accepting from that socket), waits until
 * they accept or start-up failed, relays what they report, and stops them before the token is
 * finalised (the threads' sessions live in the same module opening).
 */
import { createIndexMemory, type IndexMemory } from "../../ocsp/mod.ts";
import type { PublicThreadMessage, PublicThreadReport, PublicThreadSetup } from "./protocol.ts";
import { ListenerThread, ThreadGroup, type ThreadHooks, threadModule } from "./thread_group.ts";

/** The public listener could not start; the message says why and what to do. */
export class PublicThreadsError extends Error {
  override name = "PublicThreadsError";
}

/**
 * A running public listener: `threads` threads accepting from one socket, which this side opens
 * (so a taken path fails before any thread starts) and removes when they stop.
 */
export class PublicThreads {
  #group: ThreadGroup<PublicThread>;

  private constructor(group: ThreadGroup<PublicThread>) {
    this.#group = group;
  }

  /**
   * Opens the socket, starts `threads` threads on it and resolves once every one accepts; rejects
   * with {@link PublicThreadsError} when the socket cannot be opened or a thread could not start
   * (everything started is then stopped again).
   *
   * `module` is a seam for tests: the thread's module, ./public_thread.ts unless a test gives a
   * stand-in (tests/support/stand_in_public_thread.ts). The daemon never passes it.
   */
  static async start(
    setup: Omit<PublicThreadSetup, "shared" | "revocationMemory"> & {
      revocationMemory?: IndexMemory;
    },
    threads: number,
    hooks: ThreadHooks,
    module: URL = threadModule("public_thread.ts", "svcd-public-worker.js"),
  ): Promise<PublicThreads> {
    // One copy of the revocation database, parsed once, for every thread (by the start-up check
    // when it gives its memory: the threads re-read the file only if it changed since).
    const revocationMemory = setup.revocationMemory ??
      createIndexMemory(setup.revocationMaxEntries);
    const group = await ThreadGroup.start(
      setup.socket,
      threads,
      (shared) => PublicThread.start({ ...setup, shared, revocationMemory }, hooks, module),
      SocketError,
    );
    return new PublicThreads(group);
  }

  /**
   * Stops accepting, serves what was connected before (up to `graceMs`), closes every thread's
   * sessions, ends the threads and removes the socket. Resolves true when every thread closed its
   * sessions, false when one had died or did not answer in time (a module call of its own may
   * still run: the caller must not finalise the module). Calling it again returns the same promise.
   */
  close(graceMs: number): Promise<boolean> {
    return this.#group.close(graceMs);
  }
}

/** The socket of the public listener could not be opened. */
class SocketError extends PublicThreadsError {
  constructor(message: string) {
    super(`public listener: ${message}`);
  }
}

/** One thread of the public listener: it reports nothing beyond what both kinds report. */
class PublicThread {
  #thread: ListenerThread<PublicThreadMessage, PublicThreadReport>;

  private constructor(thread: ListenerThread<PublicThreadMessage, PublicThreadReport>) {
    this.#thread = thread;
  }

  /** Starts the thread; resolves once it accepts, rejects when it could not start. */
  static async start(
    setup: PublicThreadSetup,
    hooks: ThreadHooks,
    module: URL,
  ): Promise<PublicThread> {
    const thread = new ListenerThread<PublicThreadMessage, PublicThreadReport>(
      module,
      `svcd-public-${setup.shared.slot}`,
    );
    await thread.start(setup, {
      name: "public listener",
      startError: (message) => new PublicThreadsError(`public listener: ${message}`),
      onReport: () => {},
    }, hooks);
    return new PublicThread(thread);
  }

  /** As PublicThreads.close, for this thread alone (the socket stays open). */
  close(graceMs: number): Promise<boolean> {
    return this.#thread.close(graceMs);
  }
}
