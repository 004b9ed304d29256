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

/**
 * Entries keyed by file descriptor, each due `ms` after its `since`.
 *
 * @example
 * ```ts
 * const reading = new DeadlineQueue<{ since: number }>(10_000);
 * reading.dueAt(); // undefined while empty
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

  /** When the head is due (performance.now() time), or undefined when empty. */
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
