/**
 * Test stand-in for lib/server/threads/request_thread.ts that runs the services contract
 * (./services_contract.ts) inside a request thread, against that thread's view of the main
 * isolate's services (lib/server/threads/services_across_threads.ts). It answers "start" as the real
 * thread does; `setup.token.tokenLabel` is "contract:<audit dir>", the folder the main isolate's
 * audit log writes to. Each check's result is reported as a "log" message (JSON
 * `{ name, error? }`), then CONTRACT_DONE; it answers "close".
 */
import type {
  MessageBatch,
  RequestThreadMessage,
  RequestThreadReport,
  RequestThreadSetup,
} from "../../lib/server/threads/protocol.ts";
import { isServiceAnswer, MainCaller } from "../../lib/server/threads/protocol.ts";
import {
  type ServicesAcrossThreads,
  servicesAcrossThreads,
} from "../../lib/server/threads/services_across_threads.ts";
import { auditLineAt, CONTRACT_DONE, contractToken, runContract } from "./services_contract.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
const report = (r: RequestThreadReport) => scope.postMessage(r);
let services: ServicesAcrossThreads | undefined;

async function run(setup: RequestThreadSetup): Promise<void> {
  const auditDir = setup.token.tokenLabel.slice("contract:".length);
  const token = contractToken();
  const across = services = servicesAcrossThreads(
    { report, main: new MainCaller(setup.calls, report) },
    token,
    setup.audit,
  );
  const results = await runContract({
    services: across,
    token,
    lineAt: (seq) => auditLineAt(auditDir, seq),
  });
  for (const result of results) report({ kind: "log", message: JSON.stringify(result) });
  report({ kind: "log", message: CONTRACT_DONE });
}

function dispatch(message: RequestThreadMessage): void {
  if (isServiceAnswer(message)) return services?.receive(message);
  switch (message.kind) {
    case "start":
      report({ kind: "listening" });
      void run(message.setup);
      return;
    case "close":
      return report({ kind: "closed" });
  }
}

scope.onmessage = (e: MessageEvent<RequestThreadMessage | MessageBatch>) => {
  const message = e.data;
  if (message.kind !== "batch") return dispatch(message);
  for (const m of message.messages) dispatch(m);
};
