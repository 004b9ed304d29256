/**
 * Test stand-in for ./public_worker.ts: answers "start" as the real Worker does, then behaves as
 * `setup.socket` says — "crash-after-start" throws an uncaught error once it reported listening,
 * "fail-start" reports a start-up failure, "silent-close" never answers "close".
 *
 * @example
 * ```ts ignore
 * await PublicListener.start({ ...setup, socket: "crash-after-start" }, hooks, STAND_IN);
 * ```
 */
import type { PublicWorkerMessage, PublicWorkerReport } from "./public_listener.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: PublicWorkerReport) => scope.postMessage(r);

scope.onmessage = (e: MessageEvent<PublicWorkerMessage>) => {
  const message = e.data;
  if (message.kind === "start") {
    const mode = message.setup.socket;
    if (mode === "fail-start") return report({ kind: "failed", message: "no such key" });
    report({ kind: "listening" });
    if (mode === "crash-after-start") {
      setTimeout(() => {
        throw new Error("boom");
      }, 0);
    }
  } else if (message.kind === "close") {
    // "silent-close": no answer, as a Worker stuck in a module call.
  }
};
