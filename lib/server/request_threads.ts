/**
 * The main isolate's side of the authenticated listener when it runs in `--threads N` Worker
 * isolates (./request_worker.ts): opens the socket (every Worker accepts from it), splits
 * `--workers` over the Workers, and keeps what must stay exact across threads in this isolate
 * alone — the refusal budget (one sqlite file), the concurrency cap and the audit log (one chain,
 * one group commit). It answers the Workers' synchronous budget and cap calls (./thread_calls.ts),
 * appends their audit lines and answers once each line is durable, relays policy reloads, key
 * refreshes and the audit log's health to them, and stops them before the token is finalised.
 *
 * @example
 * ```ts ignore
 * const threads = await RequestThreads.start(setup, 2, { budget, cap, audit }, hooks);
 * await threads.installPolicy(policy); // after a SIGHUP reload
 * await threads.close(10_000);
 * ```
 */
import type { ListenerEvent, SharedSocket } from "../http/mod.ts";
import type { MetricsShare } from "../metrics/observe.ts";
import type { Policy, PolicyData } from "../policy/mod.ts";
import {
  ADMIT_ACQUIRED,
  ADMIT_CAPPED,
  ADMIT_LIMITED,
  answerCall,
  type CallMessage,
  callSlot,
  failCall,
} from "./thread_calls.ts";
import type { ServiceDeps } from "./service.ts";
import type { ConcurrencyCap } from "../throttle/mod.ts";
import { WorkerEnd, WorkerGroup, workerModule, type WorkerTokenOptions } from "./worker_group.ts";

/** Everything one request Worker is given, as plain data (structured clone). */
export interface RequestWorkerSetup {
  /** The authenticated socket, opened by the main isolate; accepted from by every Worker. */
  shared: SharedSocket;
  proxyUid: number;
  queueDepth: number;
  maxBodyBytes: number;
  /** This Worker's share of --workers: its handlers running at once. */
  workers: number;
  token: WorkerTokenOptions;
  policy: PolicyData;
  audit: AuditHealth;
  publicUrl: string | undefined;
  startedAt: number;
  /** This Worker's reply slot for synchronous calls (./thread_calls.ts). */
  calls: SharedArrayBuffer;
  /** Where this Worker counts (lib/metrics): region firstRegion + shared.slot. */
  metrics?: MetricsShare;
}

/** The audit log's health as the routes read it. */
export interface AuditHealth {
  healthy: boolean;
  lastError: string | undefined;
}

/** Main isolate → Worker. */
export type RequestWorkerMessage =
  | { kind: "start"; setup: RequestWorkerSetup }
  | { kind: "policy"; policy: PolicyData; ack: number }
  | { kind: "refresh_keys"; ack?: number }
  | { kind: "drop_removed_keys"; ack: number }
  | { kind: "keys_dropped"; id: number; labels: string[] }
  | { kind: "audit_health"; health: AuditHealth }
  | { kind: "audited"; id: number; error?: string }
  /** The answer to an "admit" report: the values of a synchronous "admit" call. */
  | { kind: "admitted"; id: number; values: number[] }
  | { kind: "close"; graceMs: number }
  /** Messages of one turn of the main isolate's event loop, in order. */
  | { kind: "batch"; messages: Exclude<RequestWorkerMessage, { kind: "batch" }>[] };

/** Worker → main isolate. */
export type RequestWorkerReport =
  | { kind: "listening" }
  | { kind: "failed"; message: string }
  | { kind: "closed" }
  | { kind: "ack"; ack: number; labels?: string[] }
  | CallMessage
  | { kind: "release"; identity: string }
  /** A handler's budget check and cap slot, answered by an "admitted" message. */
  | { kind: "admit"; id: number; identity: string }
  | {
    kind: "audit";
    id: number;
    event: string;
    actor: string;
    fields: Record<string, unknown>;
  }
  /** /health: this Worker dropped `labels`; the others are to check theirs (answer: "keys_dropped"). */
  | { kind: "drop_removed_keys"; id: number; labels: string[] }
  | { kind: "log"; message: string }
  | { kind: "listener_event"; event: ListenerEvent }
  | { kind: "token_dead"; message: string }
  /** Reports of one turn of the Worker's event loop, in order. */
  | { kind: "batch"; reports: Exclude<RequestWorkerReport, { kind: "batch" }>[] };

/** A Worker's answer to a message that asked for one. */
type AckReport = Extract<RequestWorkerReport, { kind: "ack" }>;

/** What stays in the main isolate: the one budget, the one cap, the one audit log. */
export interface MainServices {
  budget: ServiceDeps["budget"];
  cap: Pick<ConcurrencyCap, "tryAcquire" | "inFlight" | "limit">;
  audit: Pick<ServiceDeps["audit"], "append" | "healthy" | "lastError" | "stats">;
}

/** What the daemon hears from the request Workers while they run. */
export interface RequestThreadHooks {
  /** A line for the daemon's log (`kind`: its rate-limit bucket). */
  log(message: string, kind: string): void;
  onListenerEvent(event: ListenerEvent): void;
  /** A request found the token dead: the daemon stops (exit 75). */
  onTokenDead(err: Error): void;
  /** A Worker died (an uncaught error): the authenticated side no longer serves (exit 70). */
  onFailure(err: Error): void;
}

/** The request Workers could not start; the message says why. */
export class RequestThreadsError extends Error {
  override name = "RequestThreadsError";
}

/**
 * `--workers` handlers over `threads` Workers, as evenly as possible, each at least one: their
 * total stays `workers`, so no more requests use the token at once than with one thread.
 * @example splitWorkers(16, 3) // → [6, 5, 5]
 */
export function splitWorkers(workers: number, threads: number): number[] {
  if (threads < 1 || workers < threads) {
    throw new RangeError(`cannot split ${workers} workers over ${threads} threads`);
  }
  const base = Math.floor(workers / threads);
  return Array.from({ length: threads }, (_, i) => base + (i < workers % threads ? 1 : 0));
}

/**
 * The running request Workers of the authenticated socket.
 * @example const threads = await RequestThreads.start(setup, 2, services, hooks);
 */
export class RequestThreads {
  #group: WorkerGroup<RequestThread>;
  #threads: readonly RequestThread[];

  private constructor(group: WorkerGroup<RequestThread>) {
    this.#group = group;
    this.#threads = group.members;
    for (const t of this.#threads) t.dropElsewhere = () => this.#dropRemovedKeys(t);
  }

  /**
   * Opens the socket at `path`, starts `threads` Workers on it and resolves once every one
   * accepts; rejects with {@link RequestThreadsError} when the socket cannot be opened or a Worker
   * could not start (what started is stopped again and the socket removed).
   *
   * @example
   * ```ts ignore
   * const threads = await RequestThreads.start({ path, ...setup }, 2, services, hooks);
   * ```
   */
  static async start(
    setup: Omit<RequestWorkerSetup, "shared" | "workers" | "calls"> & {
      path: string;
      workers: number;
    },
    threads: number,
    services: MainServices,
    hooks: RequestThreadHooks,
    module: URL = workerModule("request_worker.ts", "svcd-request-worker.js"),
  ): Promise<RequestThreads> {
    const { path, ...common } = setup;
    const shares = splitWorkers(setup.workers, threads);
    const group = await WorkerGroup.start(
      path,
      threads,
      (shared, i) =>
        RequestThread.start(
          { ...common, shared, workers: shares[i], calls: callSlot() },
          services,
          hooks,
          module,
        ),
      RequestThreadsError,
    );
    return new RequestThreads(group);
  }

  /**
   * Installs `policy` in every Worker; resolves when each has it (a request after that sees it).
   * @example await threads.installPolicy(file.current);
   */
  async installPolicy(policy: Policy): Promise<void> {
    const data = policy.toData();
    await Promise.all(this.#threads.map((t) => t.ask({ kind: "policy", policy: data, ack: 0 })));
  }

  /**
   * Drops every Worker's key copies (SIGHUP); resolves when each has dropped them.
   * @example await threads.refreshKeys();
   */
  async refreshKeys(): Promise<void> {
    await Promise.all(this.#threads.map((t) => t.ask({ kind: "refresh_keys", ack: 0 })));
  }

  /**
   * Tells every Worker the audit log's health (its routes refuse to sign while it is unhealthy).
   * @example threads.auditHealth({ healthy: false, lastError: "ENOSPC" });
   */
  auditHealth(health: AuditHealth): void {
    for (const t of this.#threads) t.post({ kind: "audit_health", health });
  }

  /**
   * Stops accepting, serves what was connected before (up to `graceMs`), closes every Worker's
   * sessions, ends the Workers and removes the socket. Resolves true when every Worker closed its
   * sessions (false: one may still be inside the module, which must then not be finalised).
   *
   * @example
   * ```ts ignore
   * await threads.close(10_000);
   * ```
   */
  close(graceMs: number): Promise<boolean> {
    return this.#group.close(graceMs);
  }

  /**
   * /health on one Worker checked its key copies: every other Worker checks its own before the
   * answer goes out, so a key gone from the token is used by no thread after that /health. The
   * labels any of them dropped.
   */
  async #dropRemovedKeys(from: RequestThread): Promise<string[]> {
    const others = this.#threads.filter((t) => t !== from);
    const answers = await Promise.all(
      others.map((t) => t.ask({ kind: "drop_removed_keys", ack: 0 })),
    );
    return answers.flatMap((a) => a?.labels ?? []);
  }
}

/** One request Worker and the main isolate's bookkeeping for it. */
class RequestThread {
  #worker: Worker;
  #calls: SharedArrayBuffer;
  #services: MainServices;
  /** Cap slots this Worker holds, per identity (released by its "release" messages). */
  #held = new Map<string, (() => void)[]>();
  #acks = new Map<number, (ack: AckReport | undefined) => void>();
  #nextAck = 1;
  #life: WorkerEnd;
  /** Messages posted in this turn of the event loop, sent together at its end. */
  #outbox: Exclude<RequestWorkerMessage, { kind: "batch" }>[] = [];
  /** The other Workers' check of their key copies (RequestThreads #dropRemovedKeys). */
  dropElsewhere: () => Promise<string[]> = () => Promise.resolve([]);

  private constructor(worker: Worker, calls: SharedArrayBuffer, services: MainServices) {
    this.#worker = worker;
    this.#life = new WorkerEnd(worker, () => this.#letGo());
    this.#calls = calls;
    this.#services = services;
  }

  /** Starts the Worker; resolves once it accepts, rejects when it could not start. */
  static start(
    setup: RequestWorkerSetup,
    services: MainServices,
    hooks: RequestThreadHooks,
    module: URL,
  ): Promise<RequestThread> {
    // The name is the Worker's (self.name); its OS thread is "worker-N" in /proc whatever it is.
    const worker = new Worker(module, { type: "module", name: `svcd-req-${setup.shared.slot}` });
    const thread = new RequestThread(worker, setup.calls, services);
    return new Promise((resolve, reject) => {
      let started = false;
      const fail = (message: string) => {
        worker.terminate();
        thread.#life.ended(false);
        reject(new RequestThreadsError(message));
      };
      const onReport = (report: Exclude<RequestWorkerReport, { kind: "batch" }>) => {
        if (report.kind === "listening") {
          started = true;
          resolve(thread);
        } else if (report.kind === "failed") fail(report.message);
        else thread.#onReport(report, hooks);
      };
      worker.onmessage = (e: MessageEvent<RequestWorkerReport>) => {
        const report = e.data;
        if (report.kind !== "batch") return onReport(report);
        for (const r of report.reports) onReport(r);
      };
      thread.#life.onError(
        () => started,
        fail,
        (message) => hooks.onFailure(new Error(`request thread failed: ${message}`)),
      );
      thread.post({ kind: "start", setup });
    });
  }

  /**
   * Sends `message` at the end of this turn with the others of the turn: a group commit answers
   * several of a Worker's audit lines at once, in one message.
   */
  post(message: Exclude<RequestWorkerMessage, { kind: "batch" }>): void {
    if (this.#life.state !== undefined) return;
    this.#outbox.push(message);
    if (this.#outbox.length === 1) queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    const messages = this.#outbox;
    this.#outbox = [];
    if (messages.length === 0 || this.#life.state !== undefined) return;
    this.#worker.postMessage(messages.length === 1 ? messages[0] : { kind: "batch", messages });
  }

  /**
   * Posts `message` with a fresh ack number; resolves with the Worker's ack (undefined when the
   * Worker ended first).
   */
  ask(
    message: Extract<RequestWorkerMessage, { ack?: number }>,
  ): Promise<AckReport | undefined> {
    if (this.#life.state !== undefined) return Promise.resolve(undefined);
    const ack = this.#nextAck++;
    return new Promise((resolve) => {
      this.#acks.set(ack, resolve);
      this.post({ ...message, ack });
    });
  }

  #onReport(
    report: Exclude<RequestWorkerReport, { kind: "batch" | "listening" | "failed" }>,
    hooks: RequestThreadHooks,
  ): void {
    switch (report.kind) {
      case "call":
        return this.#answerSync(report, hooks);
      case "release":
        return this.#release(report.identity);
      case "admit":
        return this.post({
          kind: "admitted",
          id: report.id,
          values: this.#answer({ kind: "call", op: "admit", identity: report.identity }),
        });
      case "audit":
        return this.#append(report);
      case "ack":
        this.#acks.get(report.ack)?.(report);
        this.#acks.delete(report.ack);
        return;
      case "closed":
        return this.#life.ended(true);
      case "drop_removed_keys":
        this.dropElsewhere().then((labels) =>
          this.post({ kind: "keys_dropped", id: report.id, labels: [...report.labels, ...labels] })
        );
        return;
      case "log":
        return hooks.log(report.message, "request");
      case "listener_event":
        return hooks.onListenerEvent(report.event);
      case "token_dead":
        return hooks.onTokenDead(new Error(report.message));
    }
  }

  /** Answers a blocking call; one that throws fails that call alone (the Worker never waits forever). */
  #answerSync(call: CallMessage, hooks: RequestThreadHooks): void {
    try {
      answerCall(this.#calls, this.#answer(call));
    } catch (err) {
      failCall(this.#calls);
      hooks.log(`request thread: the ${call.op} call failed: ${(err as Error).message}`, "request");
    }
  }

  /** The values of a synchronous call's answer (./thread_calls.ts). */
  #answer(call: CallMessage): number[] {
    const { budget, cap, audit } = this.#services;
    switch (call.op) {
      case "admit": {
        // A Worker that has ended (a batch can carry "closed" before a late admit) gets no slot.
        if (this.#life.state !== undefined) return [ADMIT_CAPPED, 0];
        const limit = budget.check(call.identity);
        if (limit.limited) return [ADMIT_LIMITED, limit.retryAfterSeconds];
        const release = cap.tryAcquire(call.identity);
        if (!release) return [ADMIT_CAPPED, 0];
        const held = this.#held.get(call.identity);
        if (held) held.push(release);
        else this.#held.set(call.identity, [release]);
        return [ADMIT_ACQUIRED, 0];
      }
      case "peek": {
        const limit = budget.check(call.identity);
        if (limit.limited) return [ADMIT_LIMITED, limit.retryAfterSeconds];
        return [cap.inFlight(call.identity) < cap.limit ? ADMIT_ACQUIRED : ADMIT_CAPPED, 0];
      }
      case "refusal": {
        const r = budget.recordRefusal(call.identity);
        return [r.count, r.crossed ? 1 : 0, r.delaySeconds];
      }
      case "stats": {
        const s = audit.stats?.() as Record<string, number> | undefined;
        return [
          s?.lines ?? 0,
          s?.syncs ?? 0,
          s?.maxGroup ?? 0,
          s?.seals ?? 0,
          budget.limitedCount(),
          s ? 1 : 0,
        ];
      }
    }
  }

  #release(identity: string): void {
    const held = this.#held.get(identity);
    held?.pop()?.();
    if (held?.length === 0) this.#held.delete(identity);
  }

  /** Appends a Worker's line; the answer goes back only once the line is durable (or failed). */
  #append(line: Extract<RequestWorkerReport, { kind: "audit" }>): void {
    this.#services.audit.append(line.event, line.actor, line.fields).then(
      () => this.post({ kind: "audited", id: line.id }),
      (err) => this.post({ kind: "audited", id: line.id, error: (err as Error).message }),
    );
  }

  /** The Worker ended (closed, died, or no answer to a close): its slots and waiting acks are let go. */
  #letGo(): void {
    for (const releases of this.#held.values()) for (const release of releases) release();
    this.#held.clear();
    for (const resolve of this.#acks.values()) resolve(undefined);
    this.#acks.clear();
  }

  /** As RequestThreads.close, for this Worker alone (the socket stays open). */
  close(graceMs: number): Promise<boolean> {
    return this.#life.close(graceMs, () => {
      this.#flush(); // what this turn posted goes first
      this.#worker.postMessage({ kind: "close", graceMs } satisfies RequestWorkerMessage);
    });
  }
}
