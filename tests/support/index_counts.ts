/**
 * An IndexFileObserver for tests: counts the reads and parses of an index file in shared memory,
 * so every thread's IndexFileSource given the same buffer adds to the same counts.
 *
 * @example
 * ```ts
 * import { IndexFileSource } from "../../lib/ocsp/index_source.ts";
 * const counts = new IndexCounts();
 * const source = new IndexFileSource("index.txt", { observer: counts });
 * await source.current();
 * counts.reads; // 1 after the first read
 * ```
 */
import type { IndexFileObserver } from "../../lib/ocsp/index_source.ts";

const READS = 0, PARSES = 1;

/** Reads and parses of an index file, by every thread given `buffer`. */
export class IndexCounts implements IndexFileObserver {
  readonly #counts: Int32Array;

  /** A Worker gets the same counts with `new IndexCounts(counts.buffer)`. */
  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(8)) {
    this.#counts = new Int32Array(buffer);
  }

  read(): void {
    Atomics.add(this.#counts, READS, 1);
  }

  parsed(): void {
    Atomics.add(this.#counts, PARSES, 1);
  }

  /** Reads of the file after a change, whole or in chunks. */
  get reads(): number {
    return Atomics.load(this.#counts, READS);
  }

  /** Parses of the file into the shared memory. */
  get parses(): number {
    return Atomics.load(this.#counts, PARSES);
  }
}
