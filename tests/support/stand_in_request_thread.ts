/**
 * Test stand-in for lib/server/threads/request_thread.ts: answers "start" as the real thread does,
 * then behaves as `setup.token.tokenLabel` says — "crash-after-start" throws an uncaught error once
 * it reported listening; "fail-start" reports a start-up failure; "admit:<identity>:<n>" admits the
 * identity `n` times as a handler does (an "admit" report, answered by "admitted") and logs the
 * answers ("admit admitted,admitted,capped") and a synchronous peek ("peek capped"), then releases
 * one slot, peeks twice ("peek admitted,admitted": a peek takes no slot) and admits twice
 * ("again admitted,capped"); any mode answers "close".
 */
import type {
  MessageBatch,
  RequestThreadMessage,
  RequestThreadReport,
} from "../../lib/server/threads/protocol.ts";
import { MainCaller } from "../../lib/server/threads/protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: RequestThreadReport) => scope.postMessage(r);
const waiting = new Map<number, (kind: string) => void>();
let nextId = 1;

/** One admission as a handler makes it: resolves with the main isolate's answer. */
function admit(identity: string): Promise<string> {
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    report({ kind: "admit", id, identity });
  });
}

async function run(calls: SharedArrayBuffer, identity: string, n: number): Promise<void> {
  const main = new MainCaller(calls, report);
  const answers = [];
  for (let i = 0; i < n; i++) answers.push(await admit(identity));
  report({ kind: "log", message: `admit ${answers.join(",")}` });
  const peek = () => main.call("peek", identity).kind;
  report({ kind: "log", message: `peek ${peek()}` });
  report({ kind: "release", identity });
  report({ kind: "log", message: `peek ${[peek(), peek()].join(",")}` });
  const again = [await admit(identity), await admit(identity)];
  report({ kind: "log", message: `again ${again.join(",")}` });
}

function dispatch(message: RequestThreadMessage): void {
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
    if (verb === "admit") void run(message.setup.calls, identity, Number(n));
  } else if (message.kind === "admitted") {
    waiting.get(message.id)?.(message.answer.kind);
    waiting.delete(message.id);
  } else if (message.kind === "close") {
    report({ kind: "closed" });
  }
}

scope.onmessage = (e: MessageEvent<RequestThreadMessage | MessageBatch>) => {
  const message = e.data;
  if (message.kind !== "batch") return dispatch(message);
  for (const m of message.messages) dispatch(m);
};
