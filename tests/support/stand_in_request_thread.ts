/**
 * Test stand-in for ./request_worker.ts: answers "start" as the real Worker does, then behaves as
 * `setup.token.tokenLabel` says — "crash-after-start" throws an uncaught error once it reported
 * listening; "fail-start" reports a start-up failure; "admit:<identity>:<n>" makes `n` synchronous
 * admit calls for the identity (./thread_calls.ts) and logs the answers ("admit 1,1,2") and a peek
 * ("peek 2"), then releases one slot, peeks twice ("peek 1,1": a peek takes no slot) and admits
 * twice ("again 1,2"); any mode answers "close".
 *
 * @example
 * ```ts ignore
 * await RequestThreads.start({ ...setup, token: { ...t, tokenLabel: "fail-start" } }, 1, s, h, STAND_IN);
 * ```
 */
import type {
  RequestWorkerMessage,
  RequestWorkerReport,
} from "../../lib/server/threads/request_threads.ts";
import { MainCaller } from "../../lib/server/threads/protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: RequestWorkerReport) => scope.postMessage(r);

scope.onmessage = (e: MessageEvent<RequestWorkerMessage>) => {
  const message = e.data;
  if (message.kind === "start") {
    const mode = message.setup.token.tokenLabel;
    if (mode === "fail-start") return report({ kind: "failed", message: "no such token" });
    report({ kind: "listening" });
    if (mode === "crash-after-start") {
      setTimeout(() => {
        throw new Error("boom");
      }, 0);
    }
    const [verb, identity, n] = mode.split(":");
    if (verb !== "admit") return;
    const main = new MainCaller(message.setup.calls, report);
    const answers = Array.from({ length: Number(n) }, () => main.call("admit", identity)[0]);
    report({ kind: "log", message: `admit ${answers.join(",")}` });
    report({ kind: "log", message: `peek ${main.call("peek", identity)[0]}` });
    report({ kind: "release", identity });
    const call = (op: "admit" | "peek") => main.call(op, identity)[0];
    report({ kind: "log", message: `peek ${[call("peek"), call("peek")].join(",")}` });
    report({ kind: "log", message: `again ${[call("admit"), call("admit")].join(",")}` });
  } else if (message.kind === "close") {
    report({ kind: "closed" });
  }
};
