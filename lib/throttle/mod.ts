/**
 * Throttles of the authenticated socket: the per-identity refusal budget, persisted across
 * restarts, and the per-identity concurrency cap. Defaults and reasoning: README.md beside this file.
 *
 * @example
 * ```ts
 * const budget = RefusalBudget.open({ stateDir: "/var/lib/svcd" });
 * const cap = ConcurrencyCap.forWorkers(4);
 * ```
 */
export {
  type BudgetCheck,
  type BudgetOptions,
  RefusalBudget,
  type RefusalRecord,
} from "./budget.ts";
export { ConcurrencyCap } from "./concurrency.ts";
export { budgetDefaults, type BudgetTuning, resolveBudgetTuning, TuningError } from "./options.ts";
export { STATE_FILE_NAME, StateError, type StateErrorKind } from "./store.ts";
