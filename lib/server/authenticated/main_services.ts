/**
 * What the main isolate provides the authenticated routes, wherever they run: the one audit log,
 * the one refusal budget and concurrency cap (admission), and the check of every isolate's key
 * copies. Each must stay exact across request threads, so only the main isolate holds them.
 *
 * One contract, two implementations (one file each):
 * - ./services_in_this_thread.ts — the main isolate's own parts, called directly (`--threads 0`;
 *   with `--threads N` the main isolate answers its threads' messages with it);
 * - ../threads/services_across_threads.ts — a request thread's view of them, in the messages of
 *   ../threads/protocol.ts.
 *
 * Tests use an ordinary third implementation (tests/support/services_in_memory.ts), and one
 * contract test runs the same checks against all three.
 */
import type { Admission, LocalAdmission } from "./admission.ts";
import type { AuthenticatedDeps } from "./routes.ts";

/** The main isolate's services, as the routes use them (see the module comment). */
export interface MainServices {
  /**
   * The one audit log. `append` resolves with the line's seq once the line is durable, and
   * rejects when it cannot be made durable; `healthy` and `lastError` say whether it can now.
   */
  audit: AuthenticatedDeps["audit"];
  /** The refusal budget's check and the concurrency cap's slot (./admission.ts). */
  admission: Admission;
  /** The refusal budget's bookkeeping: a refusal counted, the identities it limits now. */
  budget: AuthenticatedDeps["budget"];
  /** The key copies of every isolate that signs. */
  keys: KeyCopies;
}

/** The key copies of every isolate that signs (each keeps its own, see lib/token). */
export interface KeyCopies {
  /**
   * Drops, in every isolate holding copies, the keys whose token object is gone; resolves once each
   * did, with the labels dropped anywhere, each once.
   */
  dropRemoved(): string[] | Promise<string[]>;
}

/** {@link MainServices} whose admission answers at once: the main isolate's own. */
export interface LocalMainServices extends MainServices {
  admission: LocalAdmission;
}
