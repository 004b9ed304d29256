/**
 * Where one key's signatures run: on the calling thread while they are quick, else on the thread
 * pool (a nonblocking FFI call).
 *
 * Why: a hop to a pool thread and back costs the event loop a futex wake, a promise and a second
 * turn (~25 µs of its CPU and ~80 µs of the process's on the 2-core VM of bench/BREAKDOWN.md),
 * more than a software token's ECDSA or Ed25519 signature itself. A slow signature (RSA, a network
 * HSM) on the calling thread would stall every other request instead. So each signature made on
 * the calling thread is timed, and a key goes to the pool for good (until it is resolved again:
 * SIGHUP) once {@link SLOW_TO_MOVE} of its last {@link WINDOW} signatures took longer than the
 * limit: a majority, so that a quick key survives a cold first call or the odd preemption, and a
 * slow key stalls the calling thread {@link SLOW_TO_MOVE} times per resolution, not more.
 *
 * @example
 * ```ts
 * import { SignPlacement } from "./sign_placement.ts";
 * const placement = new SignPlacement(200); // µs
 * for (let i = 0; i < 5; i++) placement.record(3.5); // five 3.5 ms signatures
 * placement.inline; // false: from now on the thread pool
 * ```
 */

/** Signatures whose times decide: the newest ones. */
export const WINDOW = 8;
/** Slow signatures among the last {@link WINDOW} that send a key to the pool. */
export const SLOW_TO_MOVE = 5;

/** One key's choice of thread. */
export class SignPlacement {
  readonly #limitMs: number;
  #inline: boolean;
  /** Bit i set: the i-th newest signature timed was over the limit. */
  #slow = 0;

  /**
   * `limitUs`: signatures under this many µs stay on the calling thread; 0 puts every signature on
   * the pool, Infinity every one on the calling thread.
   *
   * @example
   * ```ts
   * import { SignPlacement } from "./sign_placement.ts";
   * new SignPlacement(0).inline; // false
   * ```
   */
  constructor(limitUs: number) {
    if (!(limitUs >= 0)) {
      throw new RangeError(`the inline signing limit must be ≥ 0 µs, not ${limitUs}`);
    }
    this.#limitMs = limitUs / 1000;
    this.#inline = limitUs > 0;
  }

  /**
   * Whether the next signature runs on the calling thread.
   *
   * @example
   * ```ts
   * import { SignPlacement } from "./sign_placement.ts";
   * new SignPlacement(Infinity).inline; // true
   * ```
   */
  get inline(): boolean {
    return this.#inline;
  }

  /**
   * Notes how long a signature on the calling thread took, in ms (`performance.now()` units);
   * true when this one sent the key to the pool.
   *
   * @example
   * ```ts
   * import { SignPlacement } from "./sign_placement.ts";
   * const p = new SignPlacement(200);
   * p.record(5); // a slow first signature (cold caches) among quick ones…
   * p.record(0.06);
   * p.inline; // …true: it stays
   * ```
   */
  record(ms: number): boolean {
    if (!this.#inline) return false;
    this.#slow = ((this.#slow << 1) | (ms > this.#limitMs ? 1 : 0)) & ((1 << WINDOW) - 1);
    if (popCount(this.#slow) < SLOW_TO_MOVE) return false;
    this.#inline = false;
    return true;
  }
}

function popCount(bits: number): number {
  let n = 0;
  for (let b = bits; b !== 0; b &= b - 1) n++;
  return n;
}
