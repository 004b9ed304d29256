/**
 * A request thread's view of the main isolate's services (../authenticated/main_services.ts), in
 * the messages of ./protocol.ts; the main isolate answers them with its own services
 * (./request_threads.ts). The contract is the one of the main isolate's own implementation:
 * `append` resolves with the line's seq once it is durable there, admission counts in the one
 * budget and cap, and the key check reaches every thread.
 *
 * - admission: a handler's `admit` is reported and answered later ("admitted"; the thread serves
 *   other requests meanwhile), its release reported once; the `100 Continue` check's `peek` is a
 *   synchronous call (it blocks the thread until the main isolate answered);
 * - audit: each line is reported and its promise settled by "audited" (the seq, or the error); the
 *   log's health is what the last "audit_health" said;
 * - budget: a refusal and /health's counts are synchronous calls;
 * - keys: this thread drops its own copies, then every other thread does ("keys_dropped").
 */
import type { AdmissionAnswer, AdmitAnswer } from "../authenticated/admission.ts";
import type { MainServices } from "../authenticated/main_services.ts";
import type { AuditHealth, MainCaller, ServiceAnswer, ServiceRequest } from "./protocol.ts";

/** How the services reach the main isolate from a request thread. */
export interface MainLink {
  /** Posts a request with the others of this turn of the event loop. */
  report(message: ServiceRequest): void;
  /** The synchronous calls (./protocol.ts). */
  main: MainCaller;
}

/** The services of a request thread, and where the main isolate's answers go. */
export interface ServicesAcrossThreads extends MainServices {
  /** Settles what `answer` answers (or takes the log's new health). */
  receive(answer: ServiceAnswer): void;
}

/**
 * The services over `link`; `ownCopies` is this thread's token (its key copies), `health` the audit
 * log's health at the thread's start.
 *
 * @example
 * ```ts
 * import { MainCaller } from "./protocol.ts";
 * import { servicesAcrossThreads } from "./services_across_threads.ts";
 * declare const slot: SharedArrayBuffer, token: { dropRemovedKeys(): string[] };
 * declare function post(message: unknown): void;
 * const services = servicesAcrossThreads(
 *   { report: post, main: new MainCaller(slot, post) },
 *   token,
 *   { healthy: true, lastError: undefined },
 * );
 * // the thread's onmessage: services.receive(answer) for "audited", "admitted", …
 * ```
 */
export function servicesAcrossThreads(
  link: MainLink,
  ownCopies: { dropRemovedKeys(): string[] },
  health: AuditHealth,
): ServicesAcrossThreads {
  const admissions = new Waiting<AdmissionAnswer>();
  const audits = new Waiting<Extract<ServiceAnswer, { kind: "audited" }>>();
  const dropChecks = new Waiting<string[]>();
  const { report, main } = link;
  return {
    audit: {
      append: (event, actor, fields = {}) =>
        audits.ask((id) => report({ kind: "audit", id, event, actor, fields })).then((answer) => {
          if ("error" in answer) throw new Error(answer.error);
          return answer.seq;
        }),
      get healthy() {
        return health.healthy;
      },
      get lastError() {
        return health.lastError;
      },
      stats: () => main.call("stats").audit,
    },
    admission: {
      admit: (identity) =>
        admissions.ask((id) => report({ kind: "admit", id, identity })).then((answer) =>
          withRelease(answer, () => report({ kind: "release", identity }))
        ),
      peek: (identity) => main.call("peek", identity),
    },
    budget: {
      recordRefusal: (identity) => main.call("refusal", identity),
      limitedCount: () => main.call("stats").limitedCount,
    },
    keys: {
      dropRemoved: () => {
        const labels = ownCopies.dropRemovedKeys();
        return dropChecks.ask((id) => report({ kind: "drop_removed_keys", id, labels }))
          .then((all) => [...new Set(all)]);
      },
    },
    receive: (answer) => {
      switch (answer.kind) {
        case "audited":
          return audits.settle(answer.id, answer);
        case "admitted":
          return admissions.settle(answer.id, answer.answer);
        case "keys_dropped":
          return dropChecks.settle(answer.id, answer.labels);
        case "audit_health":
          health = answer.health;
          return;
      }
    },
  };
}

/** Requests sent to the main isolate, each waiting for the answer with its id. */
class Waiting<T> {
  #waiting = new Map<number, (answer: T) => void>();
  #nextId = 1;

  /** Sends the request `send` makes with a fresh id; resolves with the answer to that id. */
  ask(send: (id: number) => void): Promise<T> {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      this.#waiting.set(id, resolve);
      send(id);
    });
  }

  settle(id: number, answer: T): void {
    this.#waiting.get(id)?.(answer);
    this.#waiting.delete(id);
  }
}

/** An admitted answer gets the release of its slot, which the main isolate holds for it. */
function withRelease(answer: AdmissionAnswer, release: () => void): AdmitAnswer {
  if (answer.kind !== "admitted") return answer;
  return { kind: "admitted", release: once(release) };
}

/** A release that frees its cap slot once, however often it is called (as ConcurrencyCap's). */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
