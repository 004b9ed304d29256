/**
 * A reload storm against a running daemon: clients sign with one granted key without pause while
 * the daemon is sent SIGHUP at a steady rhythm (each one drops every key copy in every thread and
 * reloads the policy). Every answer is counted by status; the first few answers other than 200
 * are kept with their body, and a sample of the signatures is checked independently (never by
 * the module that made them). Bounded: it ends after `hups` signals or `requests` answers,
 * whichever is given, never by a clock alone.
 *
 * @example
 * ```ts
 * import type { TestDaemon } from "./daemon.ts";
 * declare const daemon: TestDaemon;
 * const storm = await reloadStorm(daemon, { subjects: ["CN=a"], key: "k1", hups: 100 });
 * console.log(storm.statuses); // e.g. { "200": 5210 }
 * ```
 */
import { type ClientResponse, request } from "./http_client.ts";
import { type DaemonPublicKey, daemonPublicKeys, verifyIndependently } from "./oracle.ts";
import type { TestDaemon } from "./daemon.ts";

/** What a storm does; one of `hups` and `requests` bounds it. */
export interface StormOptions {
  /** Granted subjects; client i signs as subjects[i % length]. */
  subjects: string[];
  /** The granted key's label (an ec-p256 key: its signatures are checked with Web Crypto). */
  key: string;
  /** Clients signing at once (default 8). */
  clients?: number;
  /** Pause between two SIGHUPs in ms (default 50): the storm's rhythm, not a wait for anything. */
  hupEveryMs?: number;
  /** Ends after this many SIGHUPs (the clients then finish the request they are in). */
  hups?: number;
  /** Ends once this many answers arrived (the SIGHUPs go on until then). */
  requests?: number;
  /** Runs before each SIGHUP (e.g. a new policy file for the reload to read). */
  beforeHup?: (n: number) => Promise<void>;
  /** More loops, run while the storm lasts: each is given whether the storm still runs. */
  alongside?: Array<(running: () => boolean) => Promise<void>>;
  /** Told every `progressEvery` answers (a long run's progress line). */
  onProgress?: (result: StormResult) => void;
  progressEvery?: number;
}

/** What the clients saw. */
export interface StormResult {
  /** Answers by HTTP status. */
  statuses: Record<string, number>;
  /** Requests that got no answer (the connection failed). */
  transportErrors: number;
  /** The first answers other than 200 (status and body), at most 10. */
  failures: string[];
  hups: number;
  /** Signatures checked with Web Crypto, and how many of those did not verify. */
  checked: number;
  badSignatures: number;
}

/** One in CHECK_EVERY signatures is verified independently (the check costs the client, not the daemon). */
const CHECK_EVERY = 50;
const MAX_FAILURES_KEPT = 10;

/** Runs the storm against `daemon` until its bound is reached; resolves with what the clients saw. */
export async function reloadStorm(daemon: TestDaemon, opts: StormOptions): Promise<StormResult> {
  if ((opts.hups === undefined) === (opts.requests === undefined)) {
    throw new Error("reloadStorm: give exactly one of hups and requests");
  }
  const publicKey = (await daemonPublicKeys(daemon.socket, opts.subjects[0])).get(opts.key);
  if (!publicKey) throw new Error(`reloadStorm: the daemon lists no key '${opts.key}'`);
  const result: StormResult = {
    statuses: {},
    transportErrors: 0,
    failures: [],
    hups: 0,
    checked: 0,
    badSignatures: 0,
  };
  let answers = 0;
  let over = false;
  const ended = Promise.withResolvers<void>();
  const end = () => {
    over = true;
    ended.resolve();
  };
  const count = (res: ClientResponse | undefined) => {
    answers++;
    if (!res) result.transportErrors++;
    else result.statuses[res.status] = (result.statuses[res.status] ?? 0) + 1;
    if (opts.onProgress && answers % (opts.progressEvery ?? 10_000) === 0) opts.onProgress(result);
    if (opts.requests !== undefined && answers >= opts.requests) end();
  };
  const client = async (i: number) => {
    const subject = opts.subjects[i % opts.subjects.length];
    for (let n = 0; !over; n++) {
      const message = new TextEncoder().encode(`storm ${i} ${n}`);
      const res = await signOnce(daemon, subject, opts.key, message).catch(() => undefined);
      count(res);
      if (res?.status !== 200) {
        if (result.failures.length < MAX_FAILURES_KEPT) {
          result.failures.push(res ? `${res.status} ${res.text()}` : "no answer");
        }
      } else if (n % CHECK_EVERY === 0) {
        await checkSignature(result, publicKey, message, res.body);
      }
    }
  };
  const signals = async () => {
    while (!over) {
      await opts.beforeHup?.(result.hups + 1);
      daemon.signal("SIGHUP");
      result.hups++;
      if (opts.hups !== undefined && result.hups >= opts.hups) return end();
      await Promise.race([
        ended.promise,
        new Promise((r) => setTimeout(r, opts.hupEveryMs ?? 50)),
      ]);
    }
  };
  await Promise.all([
    signals(),
    ...Array.from({ length: opts.clients ?? 8 }, (_, i) => client(i)),
    ...(opts.alongside ?? []).map((loop) => loop(() => !over)),
  ]);
  return result;
}

function signOnce(
  daemon: TestDaemon,
  subject: string,
  key: string,
  message: Uint8Array,
): Promise<ClientResponse> {
  return request(daemon.socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", key]],
    body: message,
  });
}

async function checkSignature(
  result: StormResult,
  publicKey: DaemonPublicKey,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<void> {
  result.checked++;
  if (!await verifyIndependently("ec-p256", publicKey, message, signature)) {
    result.badSignatures++;
  }
}

/** The answers other than 200, summed over statuses, plus requests that got none. */
export function notOk(result: StormResult): number {
  const others = Object.entries(result.statuses).filter(([status]) => status !== "200");
  return others.reduce((sum, [, n]) => sum + n, 0) + result.transportErrors;
}
