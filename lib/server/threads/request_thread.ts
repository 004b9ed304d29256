/**
 * The module each request thread runs (`--threads N`): its own isolate, event loop, acceptor share,
 * deadlines, handlers and PKCS#11 sessions, running the same authenticated routes as the main
 * thread does with `--threads 0` (../authenticated/routes.ts) over its own
 * {@link AuthenticatedDeps}. It opens the module the main isolate already initialised and logged
 * in (login state belongs to the process). What must stay exact across threads stays in the main
 * isolate (./request_threads.ts): admission goes there (a handler's "admit" is answered later, the
 * `100 Continue` check's "peek" is a synchronous call), and a signature's audit line is appended
 * there — the answer is released only after the main isolate said it is durable. Only
 * ./request_threads.ts talks to it, in the messages of ./protocol.ts.
 */
import { Listener } from "../../http/mod.ts";
import { attachMetrics, countedListener, sampleGauges } from "../../metrics/observe.ts";
import { Policy } from "../../policy/mod.ts";
import { Token } from "../../token/mod.ts";
import { pooledMessage } from "../log.ts";
import { stopThread } from "./thread_group.ts";
import type { Admission, AdmissionAnswer, AdmitAnswer } from "../authenticated/admission.ts";
import {
  authenticatedContinueCheck,
  type AuthenticatedDeps,
  authenticatedHandler,
} from "../authenticated/routes.ts";
import {
  type AuditHealth,
  type CallMessage,
  MainCaller,
  type MessageBatch,
  type RequestThreadMessage,
  type RequestThreadReport,
  type RequestThreadSetup,
} from "./protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
let listener: Listener | undefined;
let serving: Promise<void> | undefined;
let token: Token | undefined;
let policy: Policy | undefined;
let health: AuditHealth = { healthy: false, lastError: "not started" };
/** /health checks of key copies waiting for the other threads' checks. */
const dropChecks = new Map<number, (labels: string[]) => void>();
let nextDropCheck = 1;
/** Handlers' admissions sent to the main isolate, waiting for its answer. */
const admissions = new Map<number, (answer: AdmissionAnswer) => void>();
let nextAdmission = 1;
/** Audit lines sent to the main isolate, waiting for "durable" or the error. */
const audits = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
let nextAudit = 1;

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
    case "audited":
      return settleAudit(message.id, message.error);
    case "admitted":
      admissions.get(message.id)?.(message.answer);
      admissions.delete(message.id);
      return;
    case "audit_health":
      health = message.health;
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
    case "keys_dropped":
      dropChecks.get(message.id)?.(message.labels);
      dropChecks.delete(message.id);
      return;
    case "close":
      await stop(message.graceMs);
      return report({ kind: "closed" });
  }
}

function start(setup: RequestThreadSetup): void {
  policy = Policy.fromData(setup.policy);
  health = setup.audit;
  const opened = token = Token.open({
    ...setup.token,
    onPooled: (label) =>
      report({ kind: "log", message: pooledMessage(label, setup.token.inlineSignLimitUs) }),
  });
  opened.onDead((err) => report({ kind: "token_dead", message: err.message }));
  const deps = authenticatedDeps(setup, opened);
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

/** The routes' view of the daemon from this thread: its own token and policy, the rest in main. */
function authenticatedDeps(setup: RequestThreadSetup, opened: Token): AuthenticatedDeps {
  const main = new MainCaller(setup.calls, postCall);
  return {
    token: {
      key: (label) => opened.key(label),
      sign: (key, message, digest) =>
        opened.sign(key as Parameters<Token["sign"]>[0], message, digest),
      verify: (key, message, signature, digest) =>
        opened.verify(key as Parameters<Token["verify"]>[0], message, signature, digest),
      info: () => opened.info(),
      loggedIn: () => opened.loggedIn(),
      poolStats: () => opened.poolStats(),
      dropRemovedKeys: () => dropRemovedEverywhere(opened),
    },
    policy: () => policy!,
    audit: {
      append: appendInMain,
      get healthy() {
        return health.healthy;
      },
      get lastError() {
        return health.lastError;
      },
      stats: () => main.call("stats").audit ?? { lines: 0, syncs: 0, maxGroup: 0, seals: 0 },
    },
    budget: {
      recordRefusal: (identity) => main.call("refusal", identity),
      limitedCount: () => main.call("stats").limitedCount,
    },
    admission: admissionAcrossThreads(main),
    publicUrl: setup.publicUrl,
    maxBody: setup.maxBodyBytes,
    log: (message) => report({ kind: "log", message }),
    startedAt: setup.startedAt,
  };
}

/**
 * Admission in the main isolate's one budget and cap: a handler's admit is answered later (the
 * thread serves other requests meanwhile), the `100 Continue` check's peek at once (it blocks).
 */
function admissionAcrossThreads(main: MainCaller): Admission {
  return {
    admit: (identity) =>
      new Promise<AdmitAnswer>((resolve) => {
        const id = nextAdmission++;
        admissions.set(id, (answer) => resolve(withRelease(answer, identity)));
        report({ kind: "admit", id, identity });
      }),
    peek: (identity) => main.call("peek", identity),
  };
}

/** An admitted answer gets the release of its slot, which the main isolate holds for it. */
function withRelease(answer: AdmissionAnswer, identity: string): AdmitAnswer {
  if (answer.kind !== "admitted") return answer;
  return { kind: "admitted", release: once(() => report({ kind: "release", identity })) };
}

/**
 * /health: drops this thread's copies of keys gone from the token, and has every other thread do
 * the same before the answer; the labels dropped anywhere (each once).
 */
function dropRemovedEverywhere(opened: Token): Promise<string[]> {
  const id = nextDropCheck++;
  const labels = opened.dropRemovedKeys();
  return new Promise((resolve) => {
    dropChecks.set(id, (all) => resolve([...new Set(all)]));
    report({ kind: "drop_removed_keys", id, labels });
  });
}

/** A release that frees its cap slot once, however often it is called (as ConcurrencyCap's). */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}

/** Sends the line to the main isolate's audit log; resolves once it is durable there. */
function appendInMain(event: string, actor: string, fields: Record<string, unknown> = {}) {
  const id = nextAudit++;
  return new Promise<number>((resolve, reject) => {
    audits.set(id, { resolve: () => resolve(id), reject });
    report({ kind: "audit", id, event, actor, fields });
  });
}

function settleAudit(id: number, error: string | undefined): void {
  const waiting = audits.get(id);
  audits.delete(id);
  if (error === undefined) waiting?.resolve();
  else waiting?.reject(new Error(error));
}

async function stop(graceMs: number): Promise<void> {
  await stopThread({ listener, serving, token }, graceMs);
  listener = undefined;
  token = undefined;
}
