/**
 * The module each request thread runs (`--threads N`): its own isolate, event loop, acceptor share,
 * deadlines, handlers and PKCS#11 sessions, running the same authenticated routes as the main
 * thread does with `--threads 0` (../authenticated/routes.ts) over dependencies made by the same
 * factory (../authenticated/deps.ts). It opens the module the main isolate already initialised and
 * logged in (login state belongs to the process). What must stay exact across threads stays in the
 * main isolate (./request_threads.ts), reached through ./services_across_threads.ts: admission,
 * and a signature's audit line — the answer is released only after the main isolate said it is
 * durable. Only ./request_threads.ts talks to it, in the messages of ./protocol.ts.
 */
import { Listener } from "../../http/mod.ts";
import { attachMetrics, countedListener, sampleGauges } from "../../metrics/observe.ts";
import { Policy } from "../../policy/mod.ts";
import { Token } from "../../token/mod.ts";
import { pooledMessage } from "../log.ts";
import { stopThread } from "./thread_group.ts";
import { authenticatedDeps } from "../authenticated/deps.ts";
import { authenticatedContinueCheck, authenticatedHandler } from "../authenticated/routes.ts";
import {
  type CallMessage,
  isServiceAnswer,
  MainCaller,
  type MessageBatch,
  type RequestThreadMessage,
  type RequestThreadReport,
  type RequestThreadSetup,
} from "./protocol.ts";
import { type ServicesAcrossThreads, servicesAcrossThreads } from "./services_across_threads.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
let listener: Listener | undefined;
let serving: Promise<void> | undefined;
let token: Token | undefined;
let policy: Policy | undefined;
/** The main isolate's services, once the thread started. */
let services: ServicesAcrossThreads | undefined;

/**
 * Reports made in one turn of the event loop, posted together at its end: under load several
 * requests finish per turn, and each message costs the main isolate a wake-up and a decode.
 */
let outbox: RequestThreadReport[] = [];

function report(message: RequestThreadReport): void {
  outbox.push(message);
  if (outbox.length === 1) queueMicrotask(flushReports);
}

function flushReports(): void {
  if (outbox.length === 0) return;
  const reports = outbox;
  outbox = [];
  scope.postMessage(reports.length === 1 ? reports[0] : { kind: "batch", reports });
}

/** A synchronous call goes out at once, after what was reported before it (a slot's release). */
function postCall(message: CallMessage): void {
  flushReports();
  scope.postMessage(message);
}

scope.onmessage = async (e: MessageEvent<RequestThreadMessage | MessageBatch>) => {
  const message = e.data;
  if (message.kind !== "batch") return await dispatch(message);
  for (const m of message.messages) await dispatch(m);
};

/** Acts on one message from the main isolate. */
async function dispatch(message: RequestThreadMessage): Promise<void> {
  if (isServiceAnswer(message)) return services?.receive(message);
  switch (message.kind) {
    case "start":
      try {
        start(message.setup);
        report({ kind: "listening" });
      } catch (err) {
        await stop(0);
        report({ kind: "failed", message: (err as Error).message });
      }
      return;
    case "policy":
      policy = Policy.fromData(message.policy);
      return report({ kind: "ack", ack: message.ack });
    case "refresh_keys":
      token?.refreshKeys();
      if (message.ack !== undefined) report({ kind: "ack", ack: message.ack });
      return;
    case "drop_removed_keys":
      return report({ kind: "ack", ack: message.ack, labels: token?.dropRemovedKeys() ?? [] });
    case "close":
      await stop(message.graceMs);
      return report({ kind: "closed" });
  }
}

function start(setup: RequestThreadSetup): void {
  policy = Policy.fromData(setup.policy);
  const opened = token = Token.open({
    ...setup.token,
    onPooled: (label) =>
      report({ kind: "log", message: pooledMessage(label, setup.token.inlineSignLimitUs) }),
  });
  opened.onDead((err) => report({ kind: "token_dead", message: err.message }));
  const main = new MainCaller(setup.calls, postCall);
  services = servicesAcrossThreads({ report, main }, opened, setup.audit);
  const deps = authenticatedDeps(opened, () => policy!, services, {
    publicUrl: setup.publicUrl,
    maxBody: setup.maxBodyBytes,
    caCertificates: setup.caCertificates,
    log: (message) => report({ kind: "log", message }),
    startedAt: setup.startedAt,
  });
  attachMetrics(setup.metrics, setup.shared.slot);
  listener = Listener.open({
    path: setup.shared.socket.path,
    shared: setup.shared,
    proxyUid: setup.proxyUid,
    queueDepth: setup.queueDepth,
    maxBodyBytes: setup.maxBodyBytes,
    workers: setup.workers,
    ...countedListener("authenticated", {
      handler: authenticatedHandler(deps),
      continueCheck: authenticatedContinueCheck(deps),
    }),
    log: (event) => report({ kind: "listener_event", event }),
  });
  serving = listener.serve();
  const open = listener;
  sampleGauges("authenticated", () => open.stats(), () => opened.poolStats());
}

async function stop(graceMs: number): Promise<void> {
  await stopThread({ listener, serving, token }, graceMs);
  listener = undefined;
  token = undefined;
}
