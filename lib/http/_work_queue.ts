/**
 * The work queue of a listener: parsed requests wait here in arrival order (FIFO) until one of the
 * `workers` handler slots is free. A head index instead of `Array.shift()` keeps taking O(1); the
 * array is compacted once most of it has been taken.
 *
 * @example
 * ```ts
 * const work = new WorkQueue<string>(2);
 * work.push("a");
 * for (let item = work.next(); item !== undefined; item = work.next()) {
 *   work.started();
 *   // … run it; when it ends:
 *   work.finished();
 * }
 * ```
 */

/** Taken items at which the array is compacted (when they are also more than half of it). */
const COMPACT_AFTER = 1024;

/**
 * A FIFO of items and a count of the handler slots in use.
 *
 * @example
 * ```ts
 * const work = new WorkQueue<number>(1);
 * work.push(7);
 * work.next(); // 7 (a slot is free)
 * ```
 */
export class WorkQueue<T> {
  #items: (T | undefined)[] = [];
  #head = 0;
  #active = 0;

  constructor(readonly workers: number) {}

  /** Handler slots in use. */
  get active(): number {
    return this.#active;
  }

  /** Items waiting for a slot. */
  get queued(): number {
    return this.#items.length - this.#head;
  }

  /** Adds an item at the end. */
  push(item: T): void {
    this.#items.push(item);
  }

  /** The oldest waiting item while a slot is free (the caller calls started() if it runs it). */
  next(): T | undefined {
    if (this.#active >= this.workers || this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head];
    this.#items[this.#head++] = undefined;
    if (this.#head > COMPACT_AFTER && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  /** A handler took a slot. */
  started(): void {
    this.#active++;
  }

  /** A handler gave its slot back. */
  finished(): void {
    this.#active--;
  }
}
