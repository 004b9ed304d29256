/**
 * The contract of the main isolate's services (lib/server/authenticated/main_services.ts), as checks
 * every implementation must pass: the main isolate's own (services_in_this_thread.ts), a request
 * thread's (services_across_threads.ts, run inside a Worker by services_contract_thread.ts) and the
 * test double (services_in_memory.ts). Each is set up with {@link CONTRACT_SETUP} and the
 * contract's token ({@link contractToken}); the routes see it through the one factory
 * (lib/server/authenticated/deps.ts), as the daemon's do.
 *
 * @example
 * ```ts
 * import { CONTRACT_SETUP, contractToken, runContract } from "./services_contract.ts";
 * import { servicesInMemory } from "./services_in_memory.ts";
 * const token = contractToken();
 * const services = servicesInMemory({ threshold: CONTRACT_SETUP.threshold, token });
 * const lineAt = (seq: number) => Promise.resolve(services.lines[seq - 1]);
 * const failed = (await runContract({ services, token, lineAt })).filter((r) => r.error);
 * ```
 */
import assert from "node:assert/strict";
import { listAuditFiles, parseLine } from "../../lib/audit/mod.ts";
import { authenticatedDeps, type RouteToken } from "../../lib/server/authenticated/deps.ts";
import type { MainServices } from "../../lib/server/authenticated/main_services.ts";
import type { RouteKey } from "../../lib/server/authenticated/routes.ts";

/** What every implementation is set up with: the cap per identity, the budget's threshold. */
export const CONTRACT_SETUP = { cap: 2, threshold: 3 } as const;

/** The identities the checks admit and refuse. */
export const IDENTITIES = {
  capped: "CN=contract-cap",
  other: "CN=contract-other",
  refused: "CN=contract-refused",
  unrefused: "CN=contract-unrefused",
} as const;

/** The log message a thread running the contract reports after its last result. */
export const CONTRACT_DONE = "contract done";

/** The labels the contract's token finds gone at the first key check. */
export const REMOVED_LABELS = ["k-gone", "k-also-gone"];

/** A line as read back from where the implementation wrote it: its members flat, as in the file. */
export type ReadLine = { seq: number; event: string; actor: string; [member: string]: unknown };

/** One implementation under the contract. */
export interface ContractSubject {
  services: MainServices;
  /** The token the implementation's key check was given (its `dropRemovedKeys`). */
  token: ContractToken;
  /** The line with this seq, read back from where it was written. */
  lineAt(seq: number): Promise<ReadLine | undefined>;
}

/** A key of the contract's token: the routes' key plus what only that token knows of it. */
export interface ContractKey extends RouteKey {
  handle: number;
}

/** The contract's token: one key "k", and every key `sign` was given. */
export interface ContractToken extends RouteToken<ContractKey> {
  dropRemovedKeys(): string[];
  readonly signedWith: ContractKey[];
}

/** A token with one key ("k"), whose first key check finds {@link REMOVED_LABELS} gone. */
export function contractToken(): ContractToken {
  const key: ContractKey = {
    label: "k",
    keyType: "ed25519",
    mechanism: "CKM_EDDSA",
    publicKeyRaw: new Uint8Array(32),
    digests: [],
    handle: 7,
  };
  const signedWith: ContractKey[] = [];
  const removed = [...REMOVED_LABELS];
  return {
    signedWith,
    key: (label) => Promise.resolve(label === "k" ? key : undefined),
    sign: (k, message) => {
      signedWith.push(k);
      return Promise.resolve({ signature: message.toReversed(), mechanism: k.mechanism });
    },
    verify: () => Promise.resolve(true),
    info: () => ({ label: "contract" }),
    loggedIn: () => Promise.resolve(true),
    poolStats: () => ({ size: 1, inUse: 0, waiting: 0, cap: 1 }),
    dropRemovedKeys: () => removed.splice(0),
  };
}

/** The checks, by what each shows. */
export const CONTRACT: Record<string, (subject: ContractSubject) => Promise<void>> = {
  "append resolves with the seq of its line, durable where the log is read": async (
    { services, lineAt },
  ) => {
    assert.equal(services.audit.healthy, true);
    assert.equal(services.audit.lastError, undefined);
    const before = services.audit.stats?.()?.lines ?? 0;
    const first = await services.audit.append("sign", "CN=contract", { request_id: "c-1" });
    const second = await services.audit.append("sign", "CN=contract", { request_id: "c-2" });
    assert.ok(Number.isSafeInteger(first) && first >= 1, `seq ${first}`);
    assert.ok(second > first, `seqs ${first}, ${second}`);
    for (const [seq, id] of [[first, "c-1"], [second, "c-2"]] as const) {
      const line = await lineAt(seq);
      assert.ok(line, `no line with seq ${seq}`);
      assert.deepEqual(
        { seq: line.seq, event: line.event, actor: line.actor, request_id: line.request_id },
        { seq, event: "sign", actor: "CN=contract", request_id: id },
      );
    }
    const after = services.audit.stats?.()?.lines;
    if (after !== undefined) assert.ok(after - before >= 2, `lines ${before} → ${after}`);
  },

  "the cap admits its number of an identity's requests at once; peek takes no slot": async (
    { services: { admission } },
  ) => {
    const who = IDENTITIES.capped;
    const taken = [];
    for (let i = 0; i < CONTRACT_SETUP.cap; i++) taken.push(await admission.admit(who));
    assert.deepEqual(taken.map((a) => a.kind), Array(CONTRACT_SETUP.cap).fill("admitted"));
    assert.equal((await admission.admit(who)).kind, "capped");
    assert.equal(admission.peek(who).kind, "capped");
    const other = await admission.admit(IDENTITIES.other);
    assert.equal(other.kind, "admitted");
    const first = taken[0];
    assert.ok(first.kind === "admitted");
    first.release();
    first.release(); // a second call releases nothing more
    assert.deepEqual([admission.peek(who).kind, admission.peek(who).kind], [
      "admitted",
      "admitted",
    ]);
    const again = await admission.admit(who);
    assert.deepEqual([again.kind, (await admission.admit(who)).kind], ["admitted", "capped"]);
    for (const a of [again, other, ...taken]) if (a.kind === "admitted") a.release();
    assert.equal(admission.peek(who).kind, "admitted");
  },

  "the budget limits an identity at its threshold, for admit and peek alike": async (
    { services: { admission, budget } },
  ) => {
    const who = IDENTITIES.refused;
    const limitedBefore = budget.limitedCount();
    const records = [];
    for (let i = 0; i < CONTRACT_SETUP.threshold; i++) records.push(budget.recordRefusal(who));
    assert.deepEqual(
      records.map((r) => [r.count, r.crossed]),
      records.map((_, i) => [i + 1, i + 1 === CONTRACT_SETUP.threshold]),
    );
    const delay = records.at(-1)!.delaySeconds;
    assert.ok(delay > 0, `delay ${delay}`);
    const whileLimited = budget.recordRefusal(who);
    assert.equal(whileLimited.crossed, false, "one crossing per episode");
    assert.equal(budget.limitedCount(), limitedBefore + 1);
    const admitted = await admission.admit(who);
    const peeked = admission.peek(who);
    for (const answer of [admitted, peeked]) {
      assert.ok(answer.kind === "limited", answer.kind);
      assert.ok(answer.retryAfterSeconds > 0 && answer.retryAfterSeconds <= delay);
    }
    const unrefused = await admission.admit(IDENTITIES.unrefused);
    assert.equal(unrefused.kind, "admitted");
    unrefused.release();
  },

  "keys resolve as the token's own, and the key check reaches every copy once": async (
    { services, token },
  ) => {
    const deps = authenticatedDeps(
      token,
      () => ({ allows: () => true, labelsFor: () => [] }),
      services,
      {
        log: () => {},
        startedAt: 0,
      },
    );
    // The token's own key type, no cast: a handle only the token knows comes back to its sign.
    const key: ContractKey | undefined = await deps.token.key("k");
    assert.equal(key?.handle, 7);
    await deps.token.sign(key!, new Uint8Array([1, 2]));
    assert.equal(token.signedWith.at(-1), key);
    assert.deepEqual((await deps.token.dropRemovedKeys!()).toSorted(), REMOVED_LABELS.toSorted());
    assert.deepEqual(await deps.token.dropRemovedKeys!(), []);
  },
};

/** Runs every check in order; one result per check, with the error of a failed one. */
export async function runContract(
  subject: ContractSubject,
): Promise<{ name: string; error?: string }[]> {
  const results = [];
  for (const [name, check] of Object.entries(CONTRACT)) {
    try {
      await check(subject);
      results.push({ name });
    } catch (err) {
      results.push({ name, error: (err as Error).stack ?? String(err) });
    }
  }
  return results;
}

/** The line with `seq` in the audit files of `dir`, as written there. */
export async function auditLineAt(dir: string, seq: number): Promise<ReadLine | undefined> {
  for (const name of await listAuditFiles(dir)) {
    const bytes = await Deno.readFile(`${dir}/${name}`);
    let start = 0;
    for (let end = bytes.indexOf(10); end >= 0; start = end + 1, end = bytes.indexOf(10, start)) {
      const parsed = parseLine(bytes.subarray(start, end));
      if (typeof parsed !== "string" && parsed.line.seq === seq) return parsed.line;
    }
  }
  return undefined;
}
