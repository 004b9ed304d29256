/**
 * The arithmetic of the budget, pure and clock-free: how a count decays and which delay it earns.
 *
 * @example
 * ```ts
 * delayForCount(12, { threshold: 10, baseDelaySeconds: 5, maxDelaySeconds: 300 }); // → 20
 * ```
 */
import type { BudgetTuning } from "./options.ts";

/** What is remembered per identity; times are wall-clock milliseconds so they survive a restart. */
export interface BudgetEntry {
  /** Refusals not yet forgotten, as of `anchorMs`. */
  count: number;
  /** The decay clock: one refusal is forgotten per refill interval after this instant. */
  anchorMs: number;
  /** Limited until this instant; 0 when not limited. */
  limitedUntilMs: number;
  /** Last refusal counted; orders eviction (least recently refused first). */
  touchedMs: number;
}

/**
 * The count after decay at `nowMs`, with the anchor moved by whole intervals only so partial progress
 * towards the next decrement is kept. A clock that went backwards decays nothing.
 *
 * @example
 * ```ts
 * decay({ count: 3, anchorMs: 0, limitedUntilMs: 0, touchedMs: 0 }, 120_000, 60_000).count; // → 1
 * ```
 */
export function decay(entry: BudgetEntry, nowMs: number, refillMs: number): BudgetEntry {
  const steps = Math.floor((nowMs - entry.anchorMs) / refillMs);
  if (steps <= 0) return entry;
  const count = Math.max(0, entry.count - steps);
  const anchorMs = count === 0 ? nowMs : entry.anchorMs + steps * refillMs;
  return { ...entry, count, anchorMs };
}

/**
 * Whether an entry carries nothing any more: decayed to zero and not limited. Such entries are dropped.
 *
 * @example
 * ```ts
 * isForgotten({ count: 1, anchorMs: 0, limitedUntilMs: 0, touchedMs: 0 }, 60_000, 60_000); // → true
 * ```
 */
export function isForgotten(entry: BudgetEntry, nowMs: number, refillMs: number): boolean {
  return entry.limitedUntilMs <= nowMs && entry.anchorMs + entry.count * refillMs <= nowMs;
}

/**
 * Delay earned by a count at or past the threshold: base × 2^(count − threshold), at most the ceiling.
 *
 * @example
 * ```ts
 * delayForCount(10, { threshold: 10, baseDelaySeconds: 5, maxDelaySeconds: 300 }); // → 5
 * ```
 */
export function delayForCount(
  count: number,
  t: Pick<BudgetTuning, "threshold" | "baseDelaySeconds" | "maxDelaySeconds">,
): number {
  const doublings = Math.min(Math.max(0, count - t.threshold), 52);
  return Math.min(t.maxDelaySeconds, t.baseDelaySeconds * 2 ** doublings);
}
