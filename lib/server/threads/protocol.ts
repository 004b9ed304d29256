/**
 * Synchronous calls from a request Worker to the main isolate, for what must stay exact across
 * threads and is asked synchronously by the routes (lib/server/service.ts): the refusal budget and
 * the concurrency cap live in the main isolate only. The Worker posts the call and blocks on
 * `Atomics.wait` over its own reply slot (a SharedArrayBuffer); the main isolate's `onmessage`
 * computes the answer, stores it in the slot and wakes the Worker (`Atomics.notify`). The main
 * isolate never blocks; a Worker makes one call at a time (it is one thread), so one slot each is
 * enough. Measured (bench/thread-call.ts, 2-core VM): 93–104 µs per round trip and 39–50 µs of
 * main-thread CPU when the machine is otherwise idle (each hand-over wakes a halted vCPU), about
 * 20 µs and 10 µs in an earlier run of the same loop while other work kept the cores busy.
 *
 * @example
 * ```ts ignore
 * import { ADMIT_ACQUIRED, answerCall, callSlot, MainCaller } from "./protocol.ts";
 * const slot = callSlot(); // made by the main isolate, given to the Worker in its setup
 * // In the Worker (blocks until answered):
 * const [admitted] = new MainCaller(slot, (m) => self.postMessage(m)).call("admit", subject);
 * // In the main isolate, on that { kind: "call", op: "admit", identity } message:
 * answerCall(slot, [ADMIT_ACQUIRED, 0]);
 * ```
 */

/** What a Worker can ask the main isolate synchronously. */
export type CallOp =
  /** Budget check, then a cap slot: [ADMIT_*, retryAfterSeconds]. */
  | "admit"
  /**
   * Budget check and whether a cap slot is free, taking none (the `100 Continue` check):
   * [ADMIT_*, retryAfterSeconds], ADMIT_ACQUIRED meaning "one is free".
   */
  | "peek"
  /** A refusal counted: [count, crossed ? 1 : 0, delaySeconds]. */
  | "refusal"
  /** For /health: [lines, syncs, maxGroup, seals, limitedCount, has audit stats ? 1 : 0]. */
  | "stats";

/** The call message a Worker posts (and the main isolate answers in the slot). */
export interface CallMessage {
  kind: "call";
  op: CallOp;
  identity: string;
}

/** First value of an "admit" answer. */
export const ADMIT_LIMITED = 0;
/** First value of an "admit" answer: a cap slot was taken (release it with a "release" message). */
export const ADMIT_ACQUIRED = 1;
/** First value of an "admit" answer: the identity has the cap's number of requests in flight. */
export const ADMIT_CAPPED = 2;

const STATE = 0;
const PENDING = 1;
const ANSWERED = 2;
const FAILED = 3;
const VALUES = 6;
const VALUES_OFFSET = 8;

/**
 * One Worker's reply slot: a state word and {@link VALUES} numbers.
 * @example const slot = callSlot(); // given to the Worker in its setup
 */
export function callSlot(): SharedArrayBuffer {
  return new SharedArrayBuffer(VALUES_OFFSET + 8 * VALUES);
}

/**
 * The main isolate's answer to the pending call of the Worker owning `slot`: stores `values` and
 * wakes it. Never blocks.
 * @example answerCall(slot, [ADMIT_ACQUIRED, 0]);
 */
export function answerCall(slot: SharedArrayBuffer, values: readonly number[]): void {
  const out = new Float64Array(slot, VALUES_OFFSET, VALUES);
  for (let i = 0; i < values.length && i < VALUES; i++) out[i] = values[i];
  wake(slot, ANSWERED);
}

/**
 * The main isolate could not answer the pending call (its budget, cap or log threw): the Worker's
 * call throws, and its request fails alone instead of the Worker waiting forever.
 * @example failCall(slot);
 */
export function failCall(slot: SharedArrayBuffer): void {
  wake(slot, FAILED);
}

function wake(slot: SharedArrayBuffer, outcome: number): void {
  const state = new Int32Array(slot, 0, 1);
  Atomics.store(state, STATE, outcome);
  Atomics.notify(state, STATE);
}

/**
 * The Worker's side: posts a call and waits for its answer.
 * @example
 * ```ts ignore
 * const caller = new MainCaller(setup.calls, (m) => self.postMessage(m));
 * const [kind, retryAfter] = caller.call("admit", subject);
 * ```
 */
export class MainCaller {
  readonly #state: Int32Array;
  readonly #post: (message: CallMessage) => void;
  /** The last answer; overwritten by the next call (read it before calling again). */
  readonly values: Float64Array;

  constructor(slot: SharedArrayBuffer, post: (message: CallMessage) => void) {
    this.#state = new Int32Array(slot, 0, 1);
    this.values = new Float64Array(slot, VALUES_OFFSET, VALUES);
    this.#post = post;
  }

  /**
   * Asks the main isolate and blocks this thread until it answered; returns {@link values}.
   * @example caller.call("refusal", subject)[1] === 1 // crossed
   */
  call(op: CallOp, identity = ""): Float64Array {
    Atomics.store(this.#state, STATE, PENDING);
    this.#post({ kind: "call", op, identity });
    // Returns at once when the answer came before the wait began ("not-equal").
    Atomics.wait(this.#state, STATE, PENDING);
    if (Atomics.load(this.#state, STATE) === FAILED) {
      throw new Error(`the main isolate could not answer the ${op} call`);
    }
    return this.values;
  }
}
