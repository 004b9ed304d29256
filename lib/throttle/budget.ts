/**
 * Per-identity refusal budget. Every refused request of an identity (403, and 400s
 * its requests caused) is counted; the count decays by one per refill interval. When the count reaches
 * the threshold the identity is limited: all its requests, good ones too, get 429 with Retry-After
 * until the delay has passed. The delay is base × 2^(count − threshold), capped: never a lock.
 *
 * Decisions:
 * - check() runs first on every request, before the audit write and any PKCS#11 call. It reads only
 *   the in-memory map (no clock read for an identity that was never refused); sqlite is behind it.
 * - 429s are not refusals: a limited identity's requests are answered by check() and never counted,
 *   so they write nothing and the delay does not grow while the client waits. A refusal recorded
 *   while already limited (a request that passed check() before the crossing) is not counted either,
 *   so a burst of concurrent refusals is one crossing, whatever the interleaving.
 * - A crossing is a change from not limited to limited; recordRefusal() reports it exactly once, and
 *   the caller writes one identity_limited audit line. After the delay, the next counted refusal
 *   (count still ≥ threshold) crosses again with a doubled delay: a handful of lines per episode.
 * - The count survives a restart: written through to `<stateDir>/refusals.sqlite` (see store.ts); on
 *   open the persisted deadline holds (capped at now + maxDelaySeconds, so a lowered ceiling or a
 *   clock that jumped back can never turn into a lock).
 * - Bounded: identities decayed to zero are dropped (swept once per refill interval), and at most
 *   maxEntries are kept; beyond it the least recently refused one that is not limited is evicted.
 * - Identities longer than 512 characters are keyed by their SHA-256, so the store's size is bounded
 *   in bytes too.
 *
 * @example
 * ```ts
 * declare const subject: string;
 * declare function refuse429(retryAfterSeconds: number): void;
 * declare function audit(event: string, actor: string, fields: object): void;
 * const budget = RefusalBudget.open({ stateDir: "/var/lib/svcd" });
 * const limit = budget.check(subject);
 * if (limit.limited) refuse429(limit.retryAfterSeconds);
 * // … serve; on 403/400:
 * const r = budget.recordRefusal(subject);
 * if (r.crossed) audit("identity_limited", subject, { count: r.count, delay: r.delaySeconds });
 * ```
 */
import { createHash } from "node:crypto";
import { type BudgetEntry, decay, delayForCount, isForgotten } from "./curve.ts";
import { type BudgetTuning, resolveBudgetTuning } from "./options.ts";
import { StateStore } from "./store.ts";

/** Options of RefusalBudget.open; unset or undefined tuning fields take budgetDefaults(). */
export interface BudgetOptions extends Partial<BudgetTuning> {
  /** Folder holding refusals.sqlite (--state-dir); must exist. */
  stateDir: string;
  /** Wall-clock milliseconds; injectable for tests. Default Date.now. */
  now?: () => number;
  /** Called when a write to the state file fails at run time (the in-memory count still holds). */
  onStoreError?: (error: Error) => void;
}

/** Result of check(). */
export type BudgetCheck = { limited: false } | { limited: true; retryAfterSeconds: number };

/** Result of recordRefusal(). */
export interface RefusalRecord {
  /** The identity's count after this refusal. */
  count: number;
  /** True exactly once per crossing: write one identity_limited audit line. */
  crossed: boolean;
  /** The delay in force for this identity (0 when not limited). */
  delaySeconds: number;
}

const NOT_LIMITED: BudgetCheck = Object.freeze({ limited: false });
const LONG_IDENTITY = 512;

/**
 * The budget: an in-memory map of identities with refusals, written through to sqlite.
 *
 * @example
 * ```ts
 * declare const stateDir: string;
 * const budget = RefusalBudget.open({ stateDir, threshold: 5 });
 * ```
 */
export class RefusalBudget {
  readonly tuning: Readonly<BudgetTuning>;
  #entries: Map<string, BudgetEntry>;
  #limited = new Set<string>();
  #store: StateStore;
  #now: () => number;
  #refillMs: number;
  #lastSweepMs: number;
  #onStoreError: (error: Error) => void;

  private constructor(store: StateStore, tuning: BudgetTuning, opts: BudgetOptions) {
    this.tuning = Object.freeze(tuning);
    this.#store = store;
    this.#now = opts.now ?? Date.now;
    this.#refillMs = tuning.refillSeconds * 1000;
    this.#onStoreError = opts.onStoreError ??
      ((e) => console.error(`svcd: refusal state ${store.path}: write failed: ${e.message}`));
    this.#lastSweepMs = this.#now();
    this.#entries = new Map();
  }

  /**
   * Opens the state in `opts.stateDir` and loads it; throws StateError (names the file, says what to
   * do) when it is corrupt or unreadable, RangeError on a bad option.
   *
   * @example
   * ```ts
   * const budget = RefusalBudget.open({ stateDir: "/var/lib/svcd", maxDelaySeconds: 120 });
   * ```
   */
  static open(opts: BudgetOptions): RefusalBudget {
    const tuning = resolveBudgetTuning(opts);
    const store = StateStore.open(opts.stateDir);
    try {
      const budget = new RefusalBudget(store, tuning, opts);
      budget.#load();
      return budget;
    } catch (e) {
      store.close();
      throw e;
    }
  }

  /**
   * Whether `identity` is limited now. Cheap: one map lookup for an identity never refused.
   *
   * @example
   * ```ts
   * declare const budget: RefusalBudget;
   * budget.check("CN=alice"); // → { limited: false }
   * ```
   */
  check(identity: string): BudgetCheck {
    const entry = this.#entries.get(keyOf(identity));
    if (entry === undefined || entry.limitedUntilMs === 0) return NOT_LIMITED;
    const remainingMs = entry.limitedUntilMs - this.#now();
    if (remainingMs <= 0) return NOT_LIMITED;
    const seconds = Math.min(Math.ceil(remainingMs / 1000), this.tuning.maxDelaySeconds);
    return { limited: true, retryAfterSeconds: Math.max(1, seconds) };
  }

  /**
   * Counts one refused request of `identity` (not a 429). Reports the crossing exactly once.
   *
   * @example
   * ```ts
   * declare const budget: RefusalBudget;
   * const { crossed, count, delaySeconds } = budget.recordRefusal("CN=alice");
   * ```
   */
  recordRefusal(identity: string): RefusalRecord {
    const key = keyOf(identity);
    const now = this.#now();
    const previous = this.#entries.get(key);
    if (previous !== undefined && previous.limitedUntilMs > now) {
      const delaySeconds = Math.ceil((previous.limitedUntilMs - now) / 1000);
      return { count: previous.count, crossed: false, delaySeconds };
    }
    const entry = this.#countOne(previous, now);
    const crossed = entry.count >= this.tuning.threshold;
    const delaySeconds = crossed ? delayForCount(entry.count, this.tuning) : 0;
    entry.limitedUntilMs = crossed ? now + delaySeconds * 1000 : 0;
    const evicted = this.#remember(key, entry);
    this.#guard(() => this.#store.write(key, entry, { durable: crossed, evicted }));
    this.#sweepIfDue(now);
    return { count: entry.count, crossed, delaySeconds };
  }

  /**
   * How many identities are limited now (for /health; never who).
   *
   * @example
   * ```ts
   * declare const budget: RefusalBudget;
   * budget.limitedCount(); // → 0
   * ```
   */
  limitedCount(): number {
    const now = this.#now();
    for (const key of this.#limited) {
      const entry = this.#entries.get(key);
      if (entry === undefined || entry.limitedUntilMs <= now) this.#limited.delete(key);
    }
    return this.#limited.size;
  }

  /**
   * Identities remembered now (at most maxEntries).
   */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Closes the state file (checkpointing the WAL). Further calls throw.
   */
  close(): void {
    this.#store.close();
  }

  #countOne(previous: BudgetEntry | undefined, now: number): BudgetEntry {
    const base = previous === undefined
      ? { count: 0, anchorMs: now, limitedUntilMs: 0, touchedMs: now }
      : decay(previous, now, this.#refillMs);
    const anchorMs = base.count === 0 ? now : base.anchorMs;
    return { count: base.count + 1, anchorMs, limitedUntilMs: 0, touchedMs: now };
  }

  /** Stores the entry as the most recently refused; returns the identities evicted beyond the cap. */
  #remember(key: string, entry: BudgetEntry): string[] {
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    if (entry.limitedUntilMs > 0) this.#limited.add(key);
    else this.#limited.delete(key);
    const evicted: string[] = [];
    while (this.#entries.size > this.tuning.maxEntries) {
      const victim = this.#evictOne(entry.touchedMs);
      if (victim === undefined) break;
      evicted.push(victim);
    }
    return evicted;
  }

  /**
   * Evicts the least recently refused identity that is not limited; only when every one is limited,
   * the one whose delay ends first. Usually the oldest entry qualifies at once; limited ones at the
   * old end are passed over, so a flood of new subjects never lifts a limit.
   */
  #evictOne(now: number): string | undefined {
    let victim: string | undefined;
    let soonest: string | undefined;
    let soonestUntil = Infinity;
    for (const [key, entry] of this.#entries) {
      if (entry.limitedUntilMs <= now) {
        victim = key;
        break;
      }
      if (entry.limitedUntilMs < soonestUntil) {
        [soonest, soonestUntil] = [key, entry.limitedUntilMs];
      }
    }
    victim ??= soonest;
    if (victim === undefined) return undefined;
    this.#entries.delete(victim);
    this.#limited.delete(victim);
    return victim;
  }

  /** Drops identities decayed to zero, at most once per refill interval (O(entries) each time). */
  #sweepIfDue(now: number): void {
    if (now - this.#lastSweepMs < this.#refillMs && now >= this.#lastSweepMs) return;
    this.#lastSweepMs = now;
    for (const [key, entry] of this.#entries) {
      if (isForgotten(entry, now, this.#refillMs)) {
        this.#entries.delete(key);
        this.#limited.delete(key);
      }
    }
    this.#guard(() => this.#store.removeForgotten(now, this.#refillMs));
  }

  #load(): void {
    const now = this.#now();
    const ceilingMs = now + this.tuning.maxDelaySeconds * 1000;
    this.#store.removeForgotten(now, this.#refillMs);
    for (const [key, stored] of this.#store.loadAll()) {
      const limitedUntilMs = stored.limitedUntilMs > now
        ? Math.min(stored.limitedUntilMs, ceilingMs)
        : 0;
      const entry = { ...stored, limitedUntilMs };
      this.#entries.set(key, entry);
      if (limitedUntilMs > 0) this.#limited.add(key);
    }
    while (this.#entries.size > this.tuning.maxEntries) {
      const victim = this.#evictOne(now);
      if (victim === undefined) break;
      this.#store.remove(victim);
    }
  }

  #guard(write: () => void): void {
    try {
      write();
    } catch (e) {
      this.#onStoreError(e as Error);
    }
  }
}

/** The map and table key of an identity: itself, or a hash when it is very long. */
function keyOf(identity: string): string {
  if (identity.length <= LONG_IDENTITY) return identity;
  // \x01 never occurs in a header value, so a hashed key cannot collide with a real subject.
  return "\x01sha256:" + createHash("sha256").update(identity, "latin1").digest("hex");
}
