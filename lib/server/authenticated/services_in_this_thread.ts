/**
 * The main isolate's services called in the main isolate itself (./main_services.ts): the audit
 * log, the budget and the cap are the daemon's own objects. The routes use it with `--threads 0`;
 * with `--threads N` the main isolate answers its request threads with it
 * (../threads/request_threads.ts).
 */
import { admissionInThisThread, type AdmissionParts } from "./admission.ts";
import type { LocalMainServices, MainServices } from "./main_services.ts";

/** The main isolate's parts the services are made of. */
export interface ServiceParts {
  audit: MainServices["audit"];
  budget: AdmissionParts["budget"] & MainServices["budget"];
  cap: AdmissionParts["cap"];
  /** This isolate's token: its key copies. */
  token: { dropRemovedKeys(): string[] };
}

/**
 * The services over this isolate's parts.
 *
 * @example
 * ```ts
 * import { ConcurrencyCap, type RefusalBudget } from "../../throttle/mod.ts";
 * import type { AuditLog } from "../../audit/mod.ts";
 * import type { Token } from "../../token/mod.ts";
 * import { servicesInThisThread } from "./services_in_this_thread.ts";
 * declare const audit: AuditLog, budget: RefusalBudget, token: Token;
 * const services = servicesInThisThread({ audit, budget, cap: new ConcurrencyCap(3), token });
 * const seq = await services.audit.append("sign", "CN=alice", { key: "k1" }); // durable now
 * ```
 */
export function servicesInThisThread(
  { audit, budget, cap, token }: ServiceParts,
): LocalMainServices {
  return {
    audit,
    admission: admissionInThisThread({ budget, cap }),
    budget,
    keys: { dropRemoved: () => token.dropRemovedKeys() },
  };
}
