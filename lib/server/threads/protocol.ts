/**
 * Everything that crosses between the main isolate and a request, public or policy reader thread, in
 * one place: what each thread is given at its start, the messages each way (discriminated unions on
 * `kind`), and the synchronous calls a request thread makes to the main isolate with their typed
 * answers.
 *
 * Messages are posted (structured clone). A message that asks for an answer carries an `ack` or
 * `id` number, which the answer repeats. Under load several messages of one event-loop turn travel
 * together in one `batch`: each costs the receiving isolate a wake-up and a decode.
 *
 * A synchronous call is for what the routes must know at once and only the main isolate knows (the
 * `100 Continue` check, a refusal counted, /health's counts): the thread posts a {@link CallMessage}
 * and blocks on `Atomics.wait` over its own reply slot (a SharedArrayBuffer); the main isolate's
 * `onmessage` writes the answer there with {@link answerCall} and wakes it. The main isolate never
 * blocks; a thread makes one call at a time (it is one thread), so one slot each is enough. Each
 * answer is a named structure ({@link CallAnswers}) with one encoder and one decoder
 * ({@link CALL_CODECS}) between it and the slot's numbers.
 */
import type { MetricsShare } from "../../metrics/observe.ts";
import type { ListenerEvent, SharedSocket } from "../../http/mod.ts";
import type { ParseOptions, PolicyData, PolicyProblem, PolicyRead } from "../../policy/mod.ts";
import type { IndexMemory } from "../../ocsp/mod.ts";
import type { TokenOptions } from "../../token/mod.ts";
import type { AdmissionAnswer } from "../authenticated/admission.ts";

// ---------------------------------------------------------------------------------------------
// What a thread is given at its start

/**
 * What a thread needs to open the module the main isolate logged in to (its own sessions): the
 * token part of its setup, with the main isolate's copy lock (every Token of the process shares
 * it: lib/token/_key_cache.ts).
 */
export type ThreadTokenOptions = Required<
  Pick<
    TokenOptions,
    "modulePath" | "tokenLabel" | "maxSessions" | "inlineSignLimitUs" | "copyLock"
  >
>;

/** The audit log's health as the routes read it. */
export interface AuditHealth {
  healthy: boolean;
  lastError: string | undefined;
}

/** Everything one request thread is given, as plain data (structured clone). */
export interface RequestThreadSetup {
  /** Where this thread counts (lib/metrics): region firstRegion + shared.slot. */
  metrics?: MetricsShare;
  /** The authenticated socket, opened by the main isolate; accepted from by every thread. */
  shared: SharedSocket;
  proxyUid: number;
  queueDepth: number;
  maxBodyBytes: number;
  /** This thread's share of --workers: its handlers running at once. */
  workers: number;
  token: ThreadTokenOptions;
  policy: PolicyData;
  audit: AuditHealth;
  publicUrl: string | undefined;
  /** The CA certificate file GET /token builds chains from (--ca-cert); none: no chains. */
  caCertificates?: string;
  startedAt: number;
  /** This thread's reply slot for synchronous calls ({@link callSlot}). */
  calls: SharedArrayBuffer;
}

/** Everything one public thread is given, as plain data (structured clone). */
export interface PublicThreadSetup {
  /** Where this thread counts (lib/metrics): region firstRegion + shared.slot. */
  metrics?: MetricsShare;
  socket: string;
  /** The public socket, opened by the main isolate and accepted from by every thread. */
  shared: SharedSocket;
  queueDepth: number;
  maxBodyBytes: number;
  workers: number;
  token: ThreadTokenOptions;
  caCertificates: string;
  responderCertificate?: string;
  revocationDb: string;
  /** Most certificates in the revocation database (sizes the shared memory). */
  revocationMaxEntries: number;
  /** The revocation database, read once into this memory for every thread (made by `start`). */
  revocationMemory: IndexMemory;
  ocspLabel: string;
  validitySeconds: number;
  /** Nice value the thread gives itself when it is above the thread's own (never lowered). */
  nice: number;
  /**
   * The CRLs: every thread serves them from `dir`; the thread of socket slot 0 keeps them fresh
   * (signs with the CA key and writes them).
   */
  crl?: CrlConfig;
}

/** The CRLs the public listener keeps fresh and serves at /crl/NAME (`--ca-dir`). */
export interface CrlConfig {
  /** The CA folder of `svcd ca` (ca.json: the CA key, the URLs, the partitions). */
  caDir: string;
  /** Where the signed CRLs are written, and served from. */
  dir: string;
  /** nextUpdate − thisUpdate, seconds; each CRL is re-signed when half of it has passed. */
  validitySeconds: number;
}

// ---------------------------------------------------------------------------------------------
// Messages both kinds of thread share

/** Main isolate → thread: the start-up and the stop, the same for both kinds. */
export type LifeMessage<Setup> =
  | { kind: "start"; setup: Setup }
  | { kind: "close"; graceMs: number };

/** Thread → main isolate: its start-up answer, its end, and what the daemon's log and stop hear. */
export type LifeReport =
  /** Start-up finished: the thread accepts. */
  | { kind: "listening" }
  /** Start-up failed; what it opened is closed again. */
  | { kind: "failed"; message: string }
  /** The answer to "close": the thread's listener and sessions are closed. */
  | { kind: "closed" }
  | { kind: "log"; message: string }
  | { kind: "listener_event"; event: ListenerEvent }
  | { kind: "token_dead"; message: string };

// ---------------------------------------------------------------------------------------------
// Public threads

/** Main isolate → public thread. */
export type PublicThreadMessage = LifeMessage<PublicThreadSetup>;

/** Public thread → main isolate. */
export type PublicThreadReport = LifeReport;

// ---------------------------------------------------------------------------------------------
// Request threads

/** Main isolate → request thread, one at a time. */
export type RequestThreadMessage =
  | LifeMessage<RequestThreadSetup>
  /** A reloaded policy; answered by an "ack". */
  | { kind: "policy"; policy: PolicyData; ack: number }
  /** SIGHUP: drop every key copy; answered by an "ack" when `ack` is given. */
  | { kind: "refresh_keys"; ack?: number }
  /** Another thread's /health dropped keys gone from the token: check yours ("ack" with labels). */
  | { kind: "drop_removed_keys"; ack: number }
  | ServiceAnswer;

/**
 * Main isolate → request thread: what the main isolate's services (../authenticated/main_services.ts)
 * answer a thread, and the audit log's health its routes read.
 */
export type ServiceAnswer =
  /** The answer to a "drop_removed_keys" report: the labels every thread dropped. */
  | { kind: "keys_dropped"; id: number; labels: string[] }
  | { kind: "audit_health"; health: AuditHealth }
  /** The answer to an "audit" report: the line is durable with this seq, or `error` says why not. */
  | { kind: "audited"; id: number; seq: number }
  | { kind: "audited"; id: number; error: string }
  /** The answer to an "admit" report. */
  | { kind: "admitted"; id: number; answer: AdmissionAnswer };

/** Every kind of {@link ServiceAnswer} (a kind added to the type must be added here). */
const SERVICE_ANSWERS: Readonly<Record<ServiceAnswer["kind"], true>> = {
  keys_dropped: true,
  audit_health: true,
  audited: true,
  admitted: true,
};

/** Whether `message` is for the thread's view of the main isolate's services. */
export function isServiceAnswer(message: RequestThreadMessage): message is ServiceAnswer {
  return Object.hasOwn(SERVICE_ANSWERS, message.kind);
}

/** Request thread → main isolate, one at a time. */
export type RequestThreadReport =
  | LifeReport
  /** The answer to a message that carried an `ack`. */
  | { kind: "ack"; ack: number; labels?: string[] }
  | ServiceRequest;

/** Request thread → main isolate: what a thread asks of the main isolate's services. */
export type ServiceRequest =
  | CallMessage
  /** A handler's admission: the budget check and a cap slot (answer: "admitted"). */
  | { kind: "admit"; id: number; identity: string }
  /** A request ended: the cap slot its "admit" took is given back. */
  | { kind: "release"; identity: string }
  /** A line for the one audit log (answer: "audited", once the line is durable). */
  | { kind: "audit"; id: number; event: string; actor: string; fields: Record<string, unknown> }
  /** /health: this thread dropped `labels`; the others are to check theirs (answer: "keys_dropped"). */
  | { kind: "drop_removed_keys"; id: number; labels: string[] };

/** Several messages of one turn of the main isolate's event loop, in order. */
export type MessageBatch = { kind: "batch"; messages: RequestThreadMessage[] };

/** Several reports of one turn of a thread's event loop, in order. */
export type ReportBatch = { kind: "batch"; reports: RequestThreadReport[] };

// ---------------------------------------------------------------------------------------------
// The policy reader thread (one per read, ./policy_reader.ts)

/** Main isolate → policy reader thread: the file to read and how to parse it. */
export interface PolicyReadMessage {
  path: string;
  options: ParseOptions;
}

/**
 * Policy reader thread → main isolate: the file read and parsed (the grants shared, not copied), or
 * why it could not be read (a PolicyError's line and problems).
 */
export type PolicyReadReport =
  | { kind: "read"; read: PolicyRead }
  | { kind: "refused"; line: number; problems: PolicyProblem[] };

// ---------------------------------------------------------------------------------------------
// Synchronous calls (request thread → main isolate, the thread blocked until answered)

/** The answer to each synchronous call. */
export interface CallAnswers {
  /**
   * The budget check and whether a cap slot is free, taking none (the `100 Continue` check: no
   * slot is held while its release travels to the main isolate).
   */
  peek: AdmissionAnswer;
  /** A refusal counted against the identity's budget. */
  refusal: RefusalAnswer;
  /** /health's counts from the main isolate. */
  stats: StatsAnswer;
}

/** What a request thread can ask the main isolate synchronously. */
export type CallOp = keyof CallAnswers;

/** The refusal budget after one more refusal of the identity. */
export interface RefusalAnswer {
  count: number;
  /** This refusal crossed the budget (the identity is now limited). */
  crossed: boolean;
  delaySeconds: number;
}

/** What /health reports from the main isolate. */
export interface StatsAnswer {
  /** The audit log's counters; undefined when the log keeps none. */
  audit: { lines: number; syncs: number; maxGroup: number; seals: number } | undefined;
  /** Identities the refusal budget limits now. */
  limitedCount: number;
}

/** The call message a thread posts (and the main isolate answers in the thread's slot). */
export interface CallMessage {
  kind: "call";
  op: CallOp;
  identity: string;
}

/** How one answer is written to a slot's numbers and read back. */
interface Codec<T> {
  encode(answer: T): number[];
  decode(values: ArrayLike<number>): T;
}

const LIMITED = 0;
const ADMITTED = 1;
const CAPPED = 2;

/** The one encoder and decoder of each synchronous call's answer. */
export const CALL_CODECS: { readonly [Op in CallOp]: Codec<CallAnswers[Op]> } = {
  peek: {
    encode: (a) =>
      a.kind === "limited"
        ? [LIMITED, a.retryAfterSeconds]
        : [a.kind === "admitted" ? ADMITTED : CAPPED, 0],
    decode: (v) =>
      v[0] === LIMITED
        ? { kind: "limited", retryAfterSeconds: v[1] }
        : { kind: v[0] === ADMITTED ? "admitted" : "capped" },
  },
  refusal: {
    encode: (a) => [a.count, a.crossed ? 1 : 0, a.delaySeconds],
    decode: (v) => ({ count: v[0], crossed: v[1] === 1, delaySeconds: v[2] }),
  },
  stats: {
    encode: (a) => {
      const s = a.audit;
      return [
        a.limitedCount,
        s ? 1 : 0,
        s?.lines ?? 0,
        s?.syncs ?? 0,
        s?.maxGroup ?? 0,
        s?.seals ?? 0,
      ];
    },
    decode: (v) => ({
      limitedCount: v[0],
      audit: v[1] === 1 ? { lines: v[2], syncs: v[3], maxGroup: v[4], seals: v[5] } : undefined,
    }),
  },
};

const STATE = 0;
const PENDING = 1;
const ANSWERED = 2;
const FAILED = 3;
/** Numbers in a slot: room for the largest answer. */
const VALUES = 6;
const VALUES_OFFSET = 8;

/**
 * One thread's reply slot: a state word and {@link VALUES} numbers. Made by the main isolate and
 * given to the thread in its setup.
 */
export function callSlot(): SharedArrayBuffer {
  return new SharedArrayBuffer(VALUES_OFFSET + 8 * VALUES);
}

/**
 * The main isolate's answer to the pending `op` call of the thread owning `slot`: writes `answer`
 * and wakes the thread. Never blocks.
 */
export function answerCall<Op extends CallOp>(
  slot: SharedArrayBuffer,
  op: Op,
  answer: CallAnswers[Op],
): void {
  const values = CALL_CODECS[op].encode(answer);
  new Float64Array(slot, VALUES_OFFSET, VALUES).set(values.slice(0, VALUES));
  wake(slot, ANSWERED);
}

/**
 * The main isolate could not answer the pending call (its budget or log threw): the thread's call
 * throws, and its request fails alone instead of the thread waiting forever.
 */
export function failCall(slot: SharedArrayBuffer): void {
  wake(slot, FAILED);
}

function wake(slot: SharedArrayBuffer, outcome: number): void {
  const state = new Int32Array(slot, 0, 1);
  Atomics.store(state, STATE, outcome);
  Atomics.notify(state, STATE);
}

/**
 * The thread's side of the synchronous calls: posts a call and waits for its answer.
 *
 * @example
 * ```ts
 * import { MainCaller } from "./protocol.ts";
 * function limitedNow(port: MessagePort, slot: SharedArrayBuffer, subject: string): boolean {
 *   const main = new MainCaller(slot, (message) => port.postMessage(message));
 *   return main.call("peek", subject).kind === "limited";
 * }
 * ```
 */
export class MainCaller {
  readonly #state: Int32Array;
  readonly #values: Float64Array;
  readonly #post: (message: CallMessage) => void;

  constructor(slot: SharedArrayBuffer, post: (message: CallMessage) => void) {
    this.#state = new Int32Array(slot, 0, 1);
    this.#values = new Float64Array(slot, VALUES_OFFSET, VALUES);
    this.#post = post;
  }

  /** Asks the main isolate and blocks this thread until it answered; throws when it could not. */
  call<Op extends CallOp>(op: Op, identity = ""): CallAnswers[Op] {
    Atomics.store(this.#state, STATE, PENDING);
    this.#post({ kind: "call", op, identity });
    // Returns at once when the answer came before the wait began ("not-equal").
    Atomics.wait(this.#state, STATE, PENDING);
    if (Atomics.load(this.#state, STATE) === FAILED) {
      throw new Error(`the main isolate could not answer the ${op} call`);
    }
    return CALL_CODECS[op].decode(this.#values);
  }
}
