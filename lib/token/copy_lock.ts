/**
 * The copy lock: one lock for the whole process, held around every C_CopyObject that makes a
 * working copy (key_cache.ts) and around every lookup that counts the objects with a label. Every
 * thread of the process that opens the token (the main isolate and each Worker, each with its own
 * Token) holds the same lock: it lives in a SharedArrayBuffer that the first Token makes and the
 * others are given (TokenOptions.copyLock).
 *
 * Why: a module may let a C_FindObjects of one thread see a copy that another thread's
 * C_CopyObject is still making. SoftHSM2 does: it adds the new session object to its store first,
 * copies the original's attributes into it one by one (CKA_TOKEN=true and CKA_LABEL among them)
 * and applies the template (CKA_TOKEN=false) last, so for that moment a lookup for the token
 * object with the label finds two — a second key that does not exist. Session objects belong to
 * the process, so every thread's lookups see every thread's copies. With the lock, no lookup
 * runs while a copy is being made: what a lookup counts is what is on the token (finished copies
 * are CKA_TOKEN=false and never match). A second key really made on the token with the same label
 * is still counted.
 *
 * Both are short synchronous module calls, so the lock is a word of shared memory taken with
 * Atomics (no event loop in between). A thread waits for it at most {@link COPY_LOCK_WAIT_MS} and
 * then fails the lookup or the copy: a thread ended while it held the lock (a Worker terminated in
 * the middle of a call, at a stop) must not hang every other thread.
 *
 * @example
 * ```ts
 * import { CopyLock } from "./copy_lock.ts";
 * const lock = new CopyLock();
 * const inWorker = new CopyLock(lock.buffer); // the same lock, in another thread
 * inWorker.hold(() => "one module call at a time across both");
 * ```
 */

/** How long a thread waits for the copy lock before it gives up the lookup or copy. */
export const COPY_LOCK_WAIT_MS = 10_000;

const FREE = 0;
const HELD = 1;

/** The copy lock could not be taken in time: another thread held it throughout. */
export class CopyLockTimeout extends Error {
  override name = "CopyLockTimeout";
}

/** One process-wide lock over a shared word; see the module's comment for what it orders. */
export class CopyLock {
  /** The shared word: give it to another thread's Token to share the lock. */
  readonly buffer: SharedArrayBuffer;
  readonly #word: Int32Array;

  /** The lock held in `buffer` (another thread's {@link buffer}), or a new one. */
  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT)) {
    this.buffer = buffer;
    this.#word = new Int32Array(buffer, 0, 1);
  }

  /**
   * Runs `call` (synchronous: the lock is released when it returns or throws) holding the lock.
   * Throws {@link CopyLockTimeout} when the lock stayed held for {@link COPY_LOCK_WAIT_MS}.
   */
  hold<T>(call: () => T): T {
    this.#take();
    try {
      return call();
    } finally {
      Atomics.store(this.#word, 0, FREE);
      Atomics.notify(this.#word, 0, 1);
    }
  }

  #take(): void {
    const deadline = performance.now() + COPY_LOCK_WAIT_MS;
    while (Atomics.compareExchange(this.#word, 0, FREE, HELD) !== FREE) {
      const left = deadline - performance.now();
      if (left <= 0) {
        throw new CopyLockTimeout(
          `another thread held the token's copy lock for ${COPY_LOCK_WAIT_MS} ms`,
        );
      }
      Atomics.wait(this.#word, 0, HELD, left);
    }
  }
}
