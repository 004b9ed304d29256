/**
 * The main isolate's side of the authenticated listener when it runs in `--threads N` request
 * threads (./request_thread.ts): opens the socket (every thread accepts from it), splits
 * `--workers` over the threads, and keeps what must stay exact across threads in this isolate
 * alone — the refusal budget (one sqlite file), the concurrency cap and the audit log (one chain,
 * one group commit). With these services of its own it answers what the threads' view of them
 * asks (./services_across_threads.ts, in the messages of ./protocol.ts): admissions, synchronous
 * calls, and audit lines, each answered with its seq once durable. It relays policy reloads, key
 * refreshes and the audit log's health to them, and stops them before the token is finalised.
 */
import type { Policy } from "../../policy/mod.ts";
import type { LocalMainServices } from "../authenticated/main_services.ts";
import {
  answerCall,
  type AuditHealth,
  type CallAnswers,
  type CallMessage,
  callSlot,
  failCall,
  type RequestThreadMessage,
  type RequestThreadReport,
  type RequestThreadSetup,
} from "./protocol.ts";
import { ListenerThread, ThreadGroup, type ThreadHooks, threadModule } from "./thread_group.ts";

/**
 * The main isolate's own services (../authenticated/services_in_this_thread.ts), with which it
 * answers the threads: the one budget, the one cap, the one audit log. Key copies are the threads'
 * own: each thread's check reaches the others through {@link RequestThreads}.
 */
export type ServicesForThreads = Omit<LocalMainServices, "keys">;

/** The request threads could not start; the message says why. */
export class RequestThreadsError extends Error {
  override name = "RequestThreadsError";
}

/**
 * `--workers` handlers over `threads` Workers, as evenly as possible, each at least one: their
 * total stays `workers`, so no more requests use the token at once than with one thread.
 *
 * @example
 * ```ts
 * splitWorkers(16, 3); // → [6, 5, 5]
 * ```
 */
export function splitWorkers(workers: number, threads: number): number[] {
  if (threads < 1 || workers < threads) {
    throw new RangeError(`cannot split ${workers} workers over ${threads} threads`);
  }
  const base = Math.floor(workers / threads);
  return Array.from({ length: threads }, (_, i) => base + (i < workers % threads ? 1 : 0));
}

/** The running request threads of the authenticated socket. */
export class RequestThreads {
  #group: ThreadGroup<RequestThread>;
  #threads: readonly RequestThread[];

  private constructor(group: ThreadGroup<RequestThread>) {
    this.#group = group;
    this.#threads = group.members;
    for (const t of this.#threads) t.dropElsewhere = () => this.#dropRemovedKeys(t);
  }

  /**
   * Opens the socket at `path`, starts `threads` threads on it and resolves once every one
   * accepts; rejects with {@link RequestThreadsError} when the socket cannot be opened or a thread
   * could not start (what started is stopped again and the socket removed).
   *
   * `module` is a seam for tests: the thread's module, ./request_thread.ts unless a test gives a
   * stand-in (tests/support/stand_in_request_thread.ts). The daemon never passes it.
   */
  static async start(
    setup: Omit<RequestThreadSetup, "shared" | "workers" | "calls"> & {
      path: string;
      workers: number;
    },
    threads: number,
    services: ServicesForThreads,
    hooks: ThreadHooks,
    module: URL = threadModule("request_thread.ts", "svcd-request-worker.js"),
  ): Promise<RequestThreads> {
    const { path, ...common } = setup;
    const shares = splitWorkers(setup.workers, threads);
    const group = await ThreadGroup.start(
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

  /** Installs `policy` in every thread; resolves when each has it (a request after that sees it). */
  async installPolicy(policy: Policy): Promise<void> {
    const data = policy.toData();
    await Promise.all(this.#threads.map((t) => t.ask({ kind: "policy", policy: data, ack: 0 })));
  }

  /** Drops every thread's key copies (SIGHUP); resolves when each has dropped them. */
  async refreshKeys(): Promise<void> {
    await Promise.all(this.#threads.map((t) => t.ask({ kind: "refresh_keys", ack: 0 })));
  }

  /** Tells every thread the audit log's health (its routes refuse to sign while it is unhealthy). */
  auditHealth(health: AuditHealth): void {
    for (const t of this.#threads) t.post({ kind: "audit_health", health });
  }

  /**
   * Stops accepting, serves what was connected before (up to `graceMs`), closes every thread's
   * sessions, ends the threads and removes the socket. Resolves true when every thread closed its
   * sessions (false: one may still be inside the module, which must then not be finalised).
   */
  close(graceMs: number): Promise<boolean> {
    return this.#group.close(graceMs);
  }

  /**
   * /health on one thread checked its key copies: every other thread checks its own before the
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

/** A thread's answer to a message that asked for one. */
type AckReport = Extract<RequestThreadReport, { kind: "ack" }>;

/** What only request threads report (the rest is ListenerThread's). */
type RequestOnlyReport = Exclude<
  RequestThreadReport,
  { kind: "listening" | "failed" | "closed" | "log" | "listener_event" | "token_dead" }
>;

/** One request thread and the main isolate's bookkeeping for it. */
class RequestThread {
  #thread: ListenerThread<RequestThreadMessage, RequestThreadReport>;
  #calls: SharedArrayBuffer;
  #services: ServicesForThreads;
  #hooks: ThreadHooks;
  /** Cap slots this thread holds, per identity (released by its "release" reports). */
  #held = new Map<string, (() => void)[]>();
  #acks = new Map<number, (ack: AckReport | undefined) => void>();
  #nextAck = 1;
  /** Messages posted in this turn of the event loop, sent together at its end. */
  #outbox: RequestThreadMessage[] = [];
  /** The other threads' check of their key copies (RequestThreads #dropRemovedKeys). */
  dropElsewhere: () => Promise<string[]> = () => Promise.resolve([]);

  private constructor(
    module: URL,
    setup: RequestThreadSetup,
    services: ServicesForThreads,
    hooks: ThreadHooks,
  ) {
    this.#thread = new ListenerThread(module, `svcd-req-${setup.shared.slot}`, () => this.#letGo());
    this.#calls = setup.calls;
    this.#services = services;
    this.#hooks = hooks;
  }

  /** Starts the thread; resolves once it accepts, rejects when it could not start. */
  static async start(
    setup: RequestThreadSetup,
    services: ServicesForThreads,
    hooks: ThreadHooks,
    module: URL,
  ): Promise<RequestThread> {
    const thread = new RequestThread(module, setup, services, hooks);
    await thread.#thread.start(setup, {
      name: "request thread",
      startError: (message) => new RequestThreadsError(message),
      onReport: (report) => thread.#onReport(report as RequestOnlyReport),
    }, hooks);
    return thread;
  }

  /**
   * Sends `message` at the end of this turn with the others of the turn: a group commit answers
   * several of a thread's audit lines at once, in one message.
   */
  post(message: RequestThreadMessage): void {
    if (this.#thread.ended) return;
    this.#outbox.push(message);
    if (this.#outbox.length === 1) queueMicrotask(() => this.#flush());
  }

  #flush(): void {
    const messages = this.#outbox;
    this.#outbox = [];
    if (messages.length === 0 || this.#thread.ended) return;
    this.#thread.post(messages.length === 1 ? messages[0] : { kind: "batch", messages });
  }

  /**
   * Posts `message` with a fresh ack number; resolves with the thread's ack (undefined when the
   * thread ended first).
   */
  ask(
    message: Extract<RequestThreadMessage, { ack?: number }>,
  ): Promise<AckReport | undefined> {
    if (this.#thread.ended) return Promise.resolve(undefined);
    const ack = this.#nextAck++;
    return new Promise((resolve) => {
      this.#acks.set(ack, resolve);
      this.post({ ...message, ack });
    });
  }

  #onReport(report: RequestOnlyReport): void {
    switch (report.kind) {
      case "call":
        return this.#answerCall(report);
      case "admit":
        return this.post({ kind: "admitted", id: report.id, answer: this.#admit(report.identity) });
      case "release":
        return this.#release(report.identity);
      case "audit":
        return this.#append(report);
      case "ack":
        this.#acks.get(report.ack)?.(report);
        this.#acks.delete(report.ack);
        return;
      case "drop_removed_keys":
        this.dropElsewhere().then((labels) =>
          this.post({ kind: "keys_dropped", id: report.id, labels: [...report.labels, ...labels] })
        );
        return;
    }
  }

  /** Answers a blocking call; one that throws fails that call alone (the thread never waits forever). */
  #answerCall(call: CallMessage): void {
    try {
      this.#answerOne(call.op, call.identity);
    } catch (err) {
      failCall(this.#calls);
      this.#hooks.log(`request thread: the ${call.op} call failed: ${(err as Error).message}`);
    }
  }

  #answerOne(op: CallMessage["op"], identity: string): void {
    const { admission, budget, audit } = this.#services;
    switch (op) {
      case "peek":
        return answerCall(this.#calls, op, admission.peek(identity));
      case "refusal":
        return answerCall(this.#calls, op, budget.recordRefusal(identity));
      case "stats": {
        const answer: CallAnswers["stats"] = {
          audit: audit.stats?.(),
          limitedCount: budget.limitedCount(),
        };
        return answerCall(this.#calls, op, answer);
      }
    }
  }

  /** A handler's admission: the slot it takes is held here until the thread releases it. */
  #admit(identity: string): CallAnswers["peek"] {
    // A thread that has ended (a batch can carry "closed" before a late admit) gets no slot.
    if (this.#thread.ended) return { kind: "capped" };
    const answer = this.#services.admission.admit(identity);
    if (answer.kind !== "admitted") return answer;
    const held = this.#held.get(identity);
    if (held) held.push(answer.release);
    else this.#held.set(identity, [answer.release]);
    return { kind: "admitted" };
  }

  #release(identity: string): void {
    const held = this.#held.get(identity);
    held?.pop()?.();
    if (held?.length === 0) this.#held.delete(identity);
  }

  /** Appends a thread's line; the answer goes back only once the line is durable (or failed). */
  #append(line: Extract<RequestThreadReport, { kind: "audit" }>): void {
    this.#services.audit.append(line.event, line.actor, line.fields).then(
      (seq) => this.post({ kind: "audited", id: line.id, seq }),
      (err) => this.post({ kind: "audited", id: line.id, error: (err as Error).message }),
    );
  }

  /** The thread ended (closed, died, or no answer to a close): its slots and waiting acks are let go. */
  #letGo(): void {
    for (const releases of this.#held.values()) for (const release of releases) release();
    this.#held.clear();
    for (const resolve of this.#acks.values()) resolve(undefined);
    this.#acks.clear();
  }

  /** As RequestThreads.close, for this thread alone (the socket stays open). */
  close(graceMs: number): Promise<boolean> {
    return this.#thread.close(graceMs, () => this.#flush()); // what this turn posted goes first
  }
}
