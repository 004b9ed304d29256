/**
 * Test stand-in for ./public_worker.ts: answers "start" as the real Worker does, then behaves as
 * `setup.ocspLabel` says — "crash-after-start" throws an uncaught error once it reported listening,
 * "fail-start" reports a start-up failure, "fail-slot-1" too but only in the Worker of slot 1,
 * "silent-close" never answers "close"; any other answers "close" with "closed".
 *
 * @example
 * ```ts ignore
 * await PublicListener.start({ ...setup, ocspLabel: "crash-after-start" }, 1, hooks, STAND_IN);
 * ```
 */
import type {
  PublicWorkerMessage,
  PublicWorkerReport,
} from "../../lib/server/threads/public_threads.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: PublicWorkerReport) => scope.postMessage(r);
let mode = "";

scope.onmessage = (e: MessageEvent<PublicWorkerMessage>) => {
  const message = e.data;
  if (message.kind === "start") {
    mode = message.setup.ocspLabel;
    const slot = message.setup.shared.slot;
    if (mode === "fail-start" || (mode === "fail-slot-1" && slot === 1)) {
      return report({ kind: "failed", message: "no such key" });
    }
    report({ kind: "listening" });
    if (mode === "crash-after-start") {
      setTimeout(() => {
        throw new Error("boom");
      }, 0);
    }
  } else if (message.kind === "close" && mode !== "silent-close") {
    report({ kind: "closed" }); // "silent-close": no answer, as a Worker stuck in a module call
  }
};
