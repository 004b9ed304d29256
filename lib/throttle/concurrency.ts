/**
 * Per-identity concurrency cap: at most `limit` requests of one identity in flight; the next
 * gets 429 with Retry-After: 1. Not a refusal: it is not counted against the refusal budget. With a
 * limit of at least 1, a client sending one request at a time is never capped.
 *
 * @example
 * ```ts
 * declare const subject: string;
 * declare function refuse429(): void;
 * declare function serve(): Promise<void>;
 * const cap = ConcurrencyCap.forWorkers(4); // limit 3
 * const release = cap.tryAcquire(subject);
 * if (release === undefined) {
 *   refuse429(); // with Retry-After: 1
 * } else {
 *   try {
 *     await serve();
 *   } finally {
 *     release();
 *   }
 * }
 * ```
 */
export class ConcurrencyCap {
  readonly limit: number;
  #inFlight = new Map<string, number>();

  /**
   * A cap of `limit` (a whole number ≥ 1) requests per identity.
   *
   * @example
   * ```ts
   * new ConcurrencyCap(3);
   * ```
   */
  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`concurrency cap must be a whole number ≥ 1, got ${limit}`);
    }
    this.limit = limit;
  }

  /**
   * The cap for `workers` workers: max(1, workers − 1), so one identity never holds every worker
   * and another client always finds one free.
   *
   * @example
   * ```ts
   * ConcurrencyCap.forWorkers(1).limit; // → 1
   * ```
   */
  static forWorkers(workers: number): ConcurrencyCap {
    return new ConcurrencyCap(Math.max(1, Math.floor(workers) - 1));
  }

  /**
   * Takes a slot for `identity`: a release function (calling it twice releases once), or undefined
   * when the identity already has `limit` requests in flight.
   *
   * @example
   * ```ts
   * declare const cap: ConcurrencyCap;
   * const release = cap.tryAcquire("CN=alice"); // release?.()
   * ```
   */
  tryAcquire(identity: string): (() => void) | undefined {
    const n = this.#inFlight.get(identity) ?? 0;
    if (n >= this.limit) return undefined;
    this.#inFlight.set(identity, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#inFlight.get(identity) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(identity, left);
      else this.#inFlight.delete(identity);
    };
  }

  /**
   * Requests of `identity` in flight now.
   *
   * @example
   * ```ts
   * declare const cap: ConcurrencyCap;
   * cap.inFlight("CN=alice"); // → 0
   * ```
   */
  inFlight(identity: string): number {
    return this.#inFlight.get(identity) ?? 0;
  }

  /**
   * Identities with a request in flight (the map never holds idle identities).
   */
  get identities(): number {
    return this.#inFlight.size;
  }
}
