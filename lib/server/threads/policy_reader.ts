/**
 * The policy file read and parsed in a thread of its own (./policy_thread.ts), so that a reload of
 * a large policy never holds the event loop that serves requests: the main isolate only installs
 * the result. The daemon hands {@link readPolicyInThread} to `PolicyFile` for the start and for
 * every reload.
 */
import { type ParseOptions, PolicyError, type PolicyRead } from "../../policy/mod.ts";
import { threadModule } from "./thread_group.ts";
import type { PolicyReadMessage, PolicyReadReport } from "./protocol.ts";

/**
 * Reads and parses the policy file at `path` in a new thread at the lowest priority; rejects with
 * the PolicyError the reader met (unreadable, too large), or one naming the file when the thread
 * itself failed, so that a reload keeps the policy in force.
 *
 * @example
 * ```ts
 * const { parsed, fileBytes } = await readPolicyInThread("/etc/svcd/policy", {});
 * console.log(fileBytes, parsed.size, parsed.errors);
 * ```
 */
export function readPolicyInThread(
  path: string,
  options: ParseOptions,
  module: URL = threadModule("policy_thread.ts", "svcd-policy-worker.js"),
): Promise<PolicyRead> {
  const worker = new Worker(module, { type: "module", name: "policy reader" });
  return new Promise<PolicyRead>((resolve, reject) => {
    worker.onmessage = (e: MessageEvent<PolicyReadReport>) => {
      const report = e.data;
      if (report.kind === "read") return resolve(report.read);
      const first = report.problems[0];
      reject(new PolicyError(path, report.line, first.message, report.problems));
    };
    worker.onerror = (e: ErrorEvent) => {
      e.preventDefault();
      reject(new PolicyError(path, 0, `the policy reader thread failed: ${e.message}`));
    };
    worker.onmessageerror = () => {
      reject(new PolicyError(path, 0, "the policy reader thread's answer could not be read"));
    };
    const message: PolicyReadMessage = { path, options };
    worker.postMessage(message);
  }).finally(() => worker.terminate());
}
