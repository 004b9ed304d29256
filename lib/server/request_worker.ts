/**
 * One request Worker of the authenticated socket (`--threads N`): its own isolate, event loop,
 * acceptor share, deadlines, handlers and PKCS#11 sessions, running the same routes as the
 * single-thread daemon (./service.ts) over its own {@link ServiceDeps}. It opens the module the
 * main isolate already initialised and logged in (login state is per process, spec §3). What must
 * stay exact across threads stays in the main isolate (./request_threads.ts): the refusal budget
 * and the concurrency cap are asked synchronously (./thread_calls.ts), and a signature's audit
 * line is appended there — the answer is released only after the main isolate said it is durable.
 *
 * @example
 * ```ts ignore
 * new Worker(new URL("./request_worker.ts", import.meta.url), { type: "module" });
 * ```
 */
import { Listener } from "../http/mod.ts";
import { attachMetrics, countedListener, sampleGauges } from "../metrics/observe.ts";
import { Policy } from "../policy/mod.ts";
import { Token } from "../token/mod.ts";
import { pooledMessage } from "./log.ts";
import { stopWorker } from "./worker_stop.ts";
import {
  type Admittance,
  authenticatedAdmission,
  authenticatedHandler,
  type ServiceDeps,
} from "./service.ts";
import { ADMIT_ACQUIRED, ADMIT_LIMITED, type CallMessage, MainCaller } from "./thread_calls.ts";
import type {
  AuditHealth,
  RequestWorkerMessage,
  RequestWorkerReport,
  RequestWorkerSetup,
} from "./request_threads.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
let listener: Listener | undefined;
let serving: Promise<void> | undefined;
let token: Token | undefined;
let policy: Policy | undefined;
let health: AuditHealth = { healthy: false, lastError: "not started" };
/** /health checks of key copies waiting for the other Workers' checks. */
const dropChecks = new Map<number, (labels: string[]) => void>();
let nextDropCheck = 1;
/** Handlers' admissions sent to the main isolate, waiting for its answer. */
const admissions = new Map<number, (values: number[]) => void>();
let nextAdmission = 1;
/** Audit lines sent to the main isolate, waiting for "durable" or the error. */
const audits = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();
let nextAudit = 1;

/**
 * Reports made in one turn of the event loop, posted together at its end: under load several
 * requests finish per turn, and each message costs the main isolate a wake-up and a decode.
 */
let outbox: RequestWorkerReport[] = [];

function report(message: RequestWorkerReport): void {
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

scope.onmessage = async (e: MessageEvent<RequestWorkerMessage>) => {
  const message = e.data;
  if (message.kind !== "batch") return await handle(message);
  for (const m of message.messages) await handle(m);
};

async function handle(message: Exclude<RequestWorkerMessage, { kind: "batch" }>): Promise<void> {
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
      admissions.get(message.id)?.(message.values);
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

function start(setup: RequestWorkerSetup): void {
  policy = Policy.fromData(setup.policy);
  health = setup.audit;
  const opened = token = Token.open({
    ...setup.token,
    onPooled: (label) =>
      report({ kind: "log", message: pooledMessage(label, setup.token.inlineSignLimitUs) }),
  });
  opened.onDead((err) => report({ kind: "token_dead", message: err.message }));
  const deps = serviceDeps(setup, opened);
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
      admit: authenticatedAdmission(deps),
    }),
    log: (event) => report({ kind: "listener_event", event }),
  });
  serving = listener.serve();
  const open = listener;
  sampleGauges("authenticated", () => open.stats(), () => opened.poolStats());
}

/** The routes' view of the daemon from this Worker: local token and policy, the rest in main. */
function serviceDeps(setup: RequestWorkerSetup, opened: Token): ServiceDeps {
  const main = new MainCaller(setup.calls, postCall);
  const release = (identity: string) => () => report({ kind: "release", identity });
  return {
    token: {
      key: (label) => opened.key(label),
      sign: (key, message) => opened.sign(key as Parameters<Token["sign"]>[0], message),
      verify: (key, message, signature) =>
        opened.verify(key as Parameters<Token["verify"]>[0], message, signature),
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
      stats: () => {
        const [lines, syncs, maxGroup, seals] = main.call("stats");
        return { lines, syncs, maxGroup, seals };
      },
    },
    budget: {
      check: () => {
        throw new Error("request threads admit through deps.admit");
      },
      recordRefusal: (identity) => {
        const [count, crossed, delaySeconds] = main.call("refusal", identity);
        return { count, crossed: crossed === 1, delaySeconds };
      },
      limitedCount: () => main.call("stats")[4],
    },
    cap: {
      tryAcquire: () => {
        throw new Error("request threads admit through deps.admit");
      },
    },
    admit: (identity) => admittance(main.call("admit", identity), release(identity)),
    peek: (identity) => admittance(main.call("peek", identity), () => {}),
    admitLater: (identity) =>
      new Promise((resolve) => {
        const id = nextAdmission++;
        admissions.set(id, (values) => resolve(admittance(values, release(identity))));
        report({ kind: "admit", id, identity });
      }),
    publicUrl: setup.publicUrl,
    log: (message) => report({ kind: "log", message }),
    startedAt: setup.startedAt,
  };
}

/**
 * /health: drops this Worker's copies of keys gone from the token, and has every other Worker do
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

/** An admit answer's values (./thread_calls.ts) as the routes take them. */
function admittance(values: ArrayLike<number>, release: () => void): Admittance {
  const [kind, retryAfterSeconds] = [values[0], values[1]];
  if (kind === ADMIT_LIMITED) return { limited: true, retryAfterSeconds };
  return { limited: false, release: kind === ADMIT_ACQUIRED ? once(release) : undefined };
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
  await stopWorker({ listener, serving, token }, graceMs);
  listener = undefined;
  token = undefined;
}
