/**
 * What tests of lib/server/threads/request_threads.ts give `RequestThreads.start` when a stand-in
 * module runs in the threads (./stand_in_request_thread.ts, ./services_contract_thread.ts): a
 * setup whose token part names no module (the stand-in reads its mode from `tokenLabel`), and
 * hooks that record what the threads report, with a wait for what a test expects to see.
 *
 * @example
 * ```ts
 * import { recordingHooks, standInSetup } from "./request_threads.ts";
 * const { hooks, logs, until } = recordingHooks();
 * const setup = standInSetup("admit:CN=a:3");
 * // await RequestThreads.start(setup, 1, services, hooks, STAND_IN);
 * await until(() => logs.length > 0);
 * ```
 */
import { Policy } from "../../lib/policy/mod.ts";
import type { ThreadHooks } from "../../lib/server/threads/thread_group.ts";
import { moduleTempDir } from "./temp_dir.ts";

/** A setup for `RequestThreads.start`: a fresh socket path, `tokenLabel` the stand-in's mode. */
export function standInSetup(tokenLabel: string, workers = 4) {
  return {
    path: `${moduleTempDir("svcd-request-")}/auth.sock`,
    proxyUid: Deno.uid() ?? 0,
    queueDepth: 1,
    maxBodyBytes: 1,
    workers,
    token: {
      modulePath: "/nonexistent.so",
      tokenLabel,
      maxSessions: 1,
      inlineSignLimitUs: 0,
      copyLock: new SharedArrayBuffer(4),
    },
    policy: Policy.parse(new Uint8Array()).toData(),
    audit: { healthy: true, lastError: undefined },
    publicUrl: undefined,
    startedAt: 0,
  };
}

/** Hooks recording the threads' log lines and failures; `until` waits for a condition on them. */
export function recordingHooks() {
  const logs: string[] = [];
  const failures: Error[] = [];
  const waiters: (() => void)[] = [];
  const changed = () => waiters.splice(0).forEach((w) => w());
  const until = async (seen: () => boolean) => {
    while (!seen()) await new Promise<void>((resolve) => waiters.push(resolve));
  };
  const hooks: ThreadHooks = {
    log: (message) => {
      logs.push(message);
      changed();
    },
    onListenerEvent: () => {},
    onTokenDead: () => {},
    onFailure: (err) => {
      failures.push(err);
      changed();
    },
  };
  return { hooks, logs, failures, until };
}
