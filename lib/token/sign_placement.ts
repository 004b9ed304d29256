/**
 * Where one key's signatures run: on the calling thread while they are quick, else on the thread
 * pool (a nonblocking FFI call).
 *
 * Why: a hop to a pool thread and back costs the event loop a futex wake, a promise and a second
 * turn, more than a software token's ECDSA or Ed25519 signature itself (bench/BREAKDOWN.md has the
 * measurements). A slow signature (RSA, a network
 * HSM) on the calling thread would stall every other request instead. So each signature made on
 * the calling thread is timed by how long it held the thread ({@link HoldTimer}: preemption by
 * other threads does not count), and a key goes to the pool for good (until it is resolved again:
 * SIGHUP) once {@link SLOW_TO_MOVE} of its last {@link WINDOW} signatures held it longer than the
 * limit: a majority, so that a quick key survives a cold first call, and a slow key stalls the
 * calling thread {@link SLOW_TO_MOVE} times per resolution, not more.
 *
 * @example
 * ```ts
 * import { HoldTimer, SignPlacement } from "./sign_placement.ts";
 * const placement = new SignPlacement(200); // µs
 * const timer = new HoldTimer(0.2); // ms: the limit
 * timer.start(); // … then a synchronous C_Sign …
 * placement.record(timer.heldMs()); // a quick one
 * for (let i = 0; i < 9; i++) placement.record(3.5); // nine that held the thread 3.5 ms
 * placement.inline; // false: from now on the thread pool
 * ```
 */
import {
  CLOCK_THREAD_CPUTIME_ID,
  libc,
  RUSAGE,
  RUSAGE_THREAD,
  TIMESPEC_SIZE,
} from "../../ffi/libc.ts";

/**
 * Signatures whose times decide: the newest ones. Sixteen, because a busy machine has spells of a
 * few milliseconds in which everything is slow, and a quick key must not move to the pool in one
 * of them: a shorter window moved quick keys under load where this one did not (bench/BREAKDOWN.md
 * replays the candidate rules over recorded signature times).
 */
export const WINDOW = 16;
/** Slow signatures among the last {@link WINDOW} that send a key to the pool: a majority. */
export const SLOW_TO_MOVE = 9;

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
   * Notes how long a signature on the calling thread held it, in ms ({@link HoldTimer});
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

/**
 * How long a synchronous call held the calling thread, in ms: the thread's CPU time during the
 * call, or the wall-clock time when the thread slept in it (a voluntary context switch: the module
 * waited for a device, a lock or the network). The time the thread stood preempted by other
 * threads is not the call's: on a busy machine, wall-clock time alone made quick signatures look
 * slow and sent quick keys to the pool. A call whose wall-clock time is within `exactAboveMs` is
 * answered with it (it held the thread no longer than that). Four system calls per call; none
 * with an Infinity limit.
 *
 * @example
 * ```ts
 * import { HoldTimer } from "./sign_placement.ts";
 * const timer = new HoldTimer(0.2);
 * timer.start();
 * const held = timer.heldMs(); // ≈ 0
 * ```
 */
export class HoldTimer {
  readonly #exactAboveMs: number;
  readonly #sleptAboveMs: number;
  readonly #clocks: ThreadClocks;
  readonly #atStart: ThreadReading;
  readonly #atEnd: ThreadReading;
  #startedAt = 0;

  /**
   * `exactAboveMs`: wall-clock times up to this are answered as they are. `clocks`: where the
   * times come from (this thread's own clocks unless a test scripts them). `sleptAboveMs`: a call
   * that slept but ended within this is answered with its CPU time (its sleep taken for a wait on
   * a lock another thread held, not for a module that blocks); 0: every sleep counts.
   */
  constructor(exactAboveMs = 0, clocks: ThreadClocks = THIS_THREAD, sleptAboveMs = 0) {
    this.#exactAboveMs = exactAboveMs;
    this.#sleptAboveMs = sleptAboveMs;
    this.#clocks = clocks;
    this.#atStart = clocks.reading();
    this.#atEnd = clocks.reading();
  }

  /** Marks the start of a call on this thread. */
  start(): void {
    this.#startedAt = this.#clocks.wallMs();
    // Without a limit every call is answered with its wall-clock time: the clocks are not needed.
    if (this.#exactAboveMs !== Infinity) this.#atStart.take();
  }

  /** The time the call since {@link start} held the thread, in ms. */
  heldMs(): number {
    // The end is read before anything here allocates: a garbage collection would be a sleep.
    if (this.#exactAboveMs !== Infinity) this.#atEnd.take();
    const wall = this.#clocks.wallMs() - this.#startedAt;
    if (wall <= this.#exactAboveMs || !this.#atStart.ok || !this.#atEnd.ok) return wall;
    if (this.#atEnd.sleeps() !== this.#atStart.sleeps() && wall > this.#sleptAboveMs) return wall;
    return this.#atEnd.cpuMs() - this.#atStart.cpuMs();
  }
}

/** The clocks a {@link HoldTimer} reads. */
export interface ThreadClocks {
  /** The wall clock, in ms. */
  wallMs(): number;
  /** A reusable reading of this thread's CPU clock and voluntary context switches. */
  reading(): ThreadReading;
}

/** One reading of a thread's clocks, taken at the start or the end of a call. */
export interface ThreadReading {
  take(): void;
  /** False when a clock could not be read (the call is then answered with its wall-clock time). */
  readonly ok: boolean;
  /** The thread's CPU time, in ms. */
  cpuMs(): number;
  /** The thread's voluntary context switches. */
  sleeps(): number;
}

/** The calling thread's own clocks. */
export const THIS_THREAD: ThreadClocks = {
  wallMs: () => performance.now(),
  reading: () => new KernelThreadReading(),
};

/**
 * A reading from the kernel (CLOCK_THREAD_CPUTIME_ID, getrusage(RUSAGE_THREAD)), kept raw: it is
 * decoded only after both readings of a call were taken, since decoding allocates, and a garbage
 * collection between them (the thread waits for V8's helper threads) would count as a sleep.
 */
class KernelThreadReading implements ThreadReading {
  readonly #clock = new Uint8Array(TIMESPEC_SIZE);
  readonly #usage = new Uint8Array(RUSAGE.SIZE);
  readonly #clockView = new DataView(this.#clock.buffer);
  readonly #usageView = new DataView(this.#usage.buffer);
  ok = false;

  take(): void {
    this.ok = libc().clock_gettime(CLOCK_THREAD_CPUTIME_ID, this.#clock) === 0 &&
      libc().getrusage(RUSAGE_THREAD, this.#usage) === 0;
  }

  cpuMs(): number {
    const v = this.#clockView;
    return Number(v.getBigInt64(0, true)) * 1e3 + Number(v.getBigInt64(8, true)) / 1e6;
  }

  sleeps(): number {
    return Number(this.#usageView.getBigInt64(RUSAGE.NVCSW, true));
  }
}
