/**
 * A task that a burst of requests runs at most twice: a request while it runs asks for one more
 * run after it, and every further request meanwhile shares that run. So the last request is always
 * served by a run that starts after it (what it asked for is seen), and a storm of requests never
 * queues more than one run — the daemon's SIGHUP reloads the policy this way: a reload reads a file
 * and starts a thread, and one per SIGHUP would pile up faster than they finish.
 *
 * @example
 * ```ts
 * const reload = coalesced(async () => console.log("reading the file"));
 * await Promise.all([reload(), reload(), reload()]); // "reading the file" twice, not three times
 * ```
 */

/** `task` wrapped: each call resolves when a run that started at or after the call has ended. */
export function coalesced(task: () => Promise<void>): () => Promise<void> {
  let running: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  const start = (): Promise<void> => {
    const run = task().finally(() => {
      if (running === run) running = undefined;
    });
    running = run;
    return run;
  };
  return () => {
    if (queued) return queued;
    if (!running) return start();
    // A failed run does not fail the one queued after it: each call gets its own run's outcome.
    queued = running.catch(() => {}).then(() => {
      queued = undefined;
      return start();
    });
    return queued;
  };
}
