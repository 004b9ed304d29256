/**
 * The refusal budget's tuning: defaults an operator can live with, and validation of overrides.
 *
 * Defaults (see README.md beside this file for the reasoning):
 * - threshold 10: the 10th refusal still remembered crosses the budget;
 * - refillSeconds 60: the count decays by one per minute, so one honest mistake a minute never
 *   limits a client, and a burst is forgotten within threshold × refill (10 min);
 * - baseDelaySeconds 5, doubling per refusal past the threshold: 5, 10, 20, 40, 80, 160, 300 s;
 * - maxDelaySeconds 300: the ceiling; never a lock;
 * - maxEntries 10 000: identities remembered at once, the least recently refused evicted first.
 *
 * @example
 * ```ts
 * resolveBudgetTuning({ threshold: 20 }).refillSeconds; // → 60
 * ```
 */

/** The numbers that shape the budget. */
export interface BudgetTuning {
  /** Refusals (after decay) at which an identity is limited. */
  threshold: number;
  /** The count decays by one per this many seconds. */
  refillSeconds: number;
  /** Delay at the crossing; doubles with each refusal counted past the threshold. */
  baseDelaySeconds: number;
  /** Ceiling of the delay. */
  maxDelaySeconds: number;
  /** Identities kept at most (memory and state file). */
  maxEntries: number;
}

const DEFAULTS: Readonly<BudgetTuning> = Object.freeze({
  threshold: 10,
  refillSeconds: 60,
  baseDelaySeconds: 5,
  maxDelaySeconds: 300,
  maxEntries: 10_000,
});

/**
 * The default tuning (a fresh copy).
 *
 * @example
 * ```ts
 * budgetDefaults().threshold; // → 10
 * ```
 */
export function budgetDefaults(): BudgetTuning {
  return { ...DEFAULTS };
}

/**
 * Fills unset (or undefined) fields with defaults and checks the result; throws {@link TuningError}
 * naming the field and the accepted range.
 *
 * @example
 * ```ts
 * resolveBudgetTuning({ threshold: undefined, maxDelaySeconds: 60 }); // defaults + ceiling 60 s
 * ```
 */
export function resolveBudgetTuning(overrides: Partial<BudgetTuning>): BudgetTuning {
  const t = { ...DEFAULTS };
  for (const key of Object.keys(DEFAULTS) as (keyof BudgetTuning)[]) {
    const value = overrides[key];
    if (value !== undefined) t[key] = value;
  }
  requireInteger("threshold", t.threshold, 1, 1_000_000);
  requireInteger("refillSeconds", t.refillSeconds, 1, 86_400 * 30);
  requireInteger("baseDelaySeconds", t.baseDelaySeconds, 1, 86_400);
  requireInteger("maxDelaySeconds", t.maxDelaySeconds, t.baseDelaySeconds, 86_400);
  requireInteger("maxEntries", t.maxEntries, 1, 10_000_000);
  return t;
}

/**
 * A tuning value out of range: names the field, so a caller that set it from an option can name
 * the option instead.
 *
 * @example
 * ```ts
 * try {
 *   resolveBudgetTuning({ baseDelaySeconds: 600 });
 * } catch (err) {
 *   if (err instanceof TuningError) console.error(`${err.field}: ${err.requirement}`);
 * }
 * ```
 */
export class TuningError extends RangeError {
  override name = "TuningError";
  constructor(
    readonly field: keyof BudgetTuning,
    /** What the value must be and what it was, e.g. "must be a whole number from 1 to 10, got 0". */
    readonly requirement: string,
  ) {
    super(`refusal budget: ${field} ${requirement}`);
  }
}

function requireInteger(
  name: keyof BudgetTuning,
  value: number,
  min: number,
  max: number,
): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new TuningError(name, `must be a whole number from ${min} to ${max}, got ${value}`);
  }
}
