/**
 * Test stand-in for lib/server/threads/public_thread.ts: answers "start" as the real thread does,
 * then behaves as `setup.ocspLabel` says — "crash-after-start" throws an uncaught error once it
 * reported listening, "fail-start" reports a start-up failure, "fail-slot-1" too but only in the
 * thread of slot 1, "silent-close" never answers "close"; any other answers "close" with "closed".
 */
import type { PublicThreadMessage, PublicThreadReport } from "../../lib/server/threads/protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: PublicThreadReport) => scope.postMessage(r);
let mode = "";

scope.onmessage = (e: MessageEvent<PublicThreadMessage>) => {
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
