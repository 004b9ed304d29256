/**
 * Admission: whether an identity's next request may run now. The refusal budget is asked first (an
 * identity it limits takes no slot), then the concurrency cap, which gives the request a slot it
 * holds until its answer is made. The routes see one {@link Admission}, part of the main isolate's
 * services (./main_services.ts): {@link admissionInThisThread} with `--threads 0`, and with
 * `--threads N` the request thread's view of the one budget and cap in the main isolate
 * (../threads/services_across_threads.ts), which itself answers with {@link admissionInThisThread}.
 */
import type { ConcurrencyCap, RefusalBudget } from "../../throttle/mod.ts";

/** The refusal budget's and the concurrency cap's answer for an identity's next request. */
export type AdmissionAnswer =
  /** Over the refusal budget: 429 with this Retry-After. */
  | { kind: "limited"; retryAfterSeconds: number }
  /** The identity has the cap's number of requests in flight: 429, Retry-After 1. */
  | { kind: "capped" }
  /** A slot was taken (by `peek`: one is free). */
  | { kind: "admitted" };

/**
 * `admit`'s answer: an {@link AdmissionAnswer} whose admitted request holds its slot until it calls
 * `release` (once; later calls do nothing).
 */
export type AdmitAnswer =
  | Exclude<AdmissionAnswer, { kind: "admitted" }>
  | { kind: "admitted"; release: () => void };

/** The one way the routes admit a request. */
export interface Admission {
  /** Takes a slot when the identity is admitted; across threads the answer comes later. */
  admit(identity: string): AdmitAnswer | Promise<AdmitAnswer>;
  /**
   * The same answer at once and taking no slot, for the `100 Continue` check: it answers from the
   * head alone, and the handler admits again once the body came.
   */
  peek(identity: string): AdmissionAnswer;
}

/** An {@link Admission} whose every answer comes at once. */
export interface LocalAdmission extends Admission {
  admit(identity: string): AdmitAnswer;
}

/** The budget and the cap as admission uses them. */
export interface AdmissionParts {
  budget: Pick<RefusalBudget, "check">;
  cap: Pick<ConcurrencyCap, "tryAcquire">;
}

/**
 * Admission over a budget and a cap of this isolate.
 *
 * @example
 * ```ts
 * import { ConcurrencyCap, RefusalBudget } from "../../throttle/mod.ts";
 * import { admissionInThisThread } from "./admission.ts";
 * function admitAlice(budget: RefusalBudget): boolean {
 *   const admission = admissionInThisThread({ budget, cap: new ConcurrencyCap(1) });
 *   return admission.peek("CN=alice").kind === "admitted";
 * }
 * ```
 */
export function admissionInThisThread({ budget, cap }: AdmissionParts): LocalAdmission {
  const admit = (identity: string): AdmitAnswer => {
    const limit = budget.check(identity);
    if (limit.limited) return { kind: "limited", retryAfterSeconds: limit.retryAfterSeconds };
    const release = cap.tryAcquire(identity);
    return release ? { kind: "admitted", release } : { kind: "capped" };
  };
  return {
    admit,
    peek: (identity) => {
      const answer = admit(identity);
      if (answer.kind !== "admitted") return answer;
      answer.release();
      return { kind: "admitted" };
    },
  };
}
