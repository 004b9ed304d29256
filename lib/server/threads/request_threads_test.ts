import assert from "node:assert/strict";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";
import { ConcurrencyCap } from "../../throttle/mod.ts";
import { RequestThreads, RequestThreadsError, splitWorkers } from "./request_threads.ts";
import { servicesInMemory } from "../../../tests/support/services_in_memory.ts";
import { Policy } from "../../policy/mod.ts";
import type { ThreadHooks } from "./thread_group.ts";

const STAND_IN = new URL("../../../tests/support/stand_in_request_thread.ts", import.meta.url);

function setup(mode: string) {
  return {
    path: `${moduleTempDir("svcd-request-")}/auth.sock`,
    proxyUid: Deno.uid() ?? 0,
    queueDepth: 1,
    maxBodyBytes: 1,
    workers: 4,
    token: {
      modulePath: "/nonexistent.so",
      tokenLabel: mode,
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

function services(cap = new ConcurrencyCap(2)) {
  return servicesInMemory({ cap });
}

function hooks() {
  const logs: string[] = [];
  const failures: Error[] = [];
  const waiters: (() => void)[] = [];
  const changed = () => waiters.splice(0).forEach((w) => w());
  const until = async (seen: () => boolean) => {
    while (!seen()) await new Promise<void>((resolve) => waiters.push(resolve));
  };
  const h: ThreadHooks = {
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
  return { h, logs, failures, until };
}

Deno.test("request threads: --workers is split over the threads, their total unchanged", () => {
  assert.deepEqual(splitWorkers(16, 2), [8, 8]);
  assert.deepEqual(splitWorkers(5, 2), [3, 2]);
  assert.deepEqual(splitWorkers(3, 3), [1, 1, 1]);
  assert.throws(() => splitWorkers(1, 2), RangeError);
});

Deno.test("request threads: a start-up failure rejects with its message and removes the socket", async () => {
  const s = setup("fail-start");
  const { h } = hooks();
  await assert.rejects(
    RequestThreads.start(s, 2, services(), h, STAND_IN),
    (e) => e instanceof RequestThreadsError && /no such token/.test(e.message),
  );
  assert.throws(() => Deno.lstatSync(s.path), Deno.errors.NotFound);
});

Deno.test("request threads: a Worker that dies after start is a failure (exit 70); close resolves false", async () => {
  const { h, failures, until } = hooks();
  const threads = await RequestThreads.start(
    setup("crash-after-start"),
    1,
    services(),
    h,
    STAND_IN,
  );
  await until(() => failures.length > 0);
  assert.match(failures[0].message, /request thread failed: .*boom/);
  assert.equal(await threads.close(1000), false);
});

Deno.test("request threads: admissions and peeks reach the one cap in the main isolate", async () => {
  const cap = new ConcurrencyCap(2);
  const { h, logs, until } = hooks();
  const threads = await RequestThreads.start(
    setup("admit:CN=a:3"),
    1,
    services(cap),
    h,
    STAND_IN,
  );
  try {
    await until(() => logs.some((l) => l.startsWith("again")));
    // A released slot is taken again; a peek takes none.
    assert.deepEqual(logs, [
      "admit admitted,admitted,capped",
      "peek capped",
      "peek admitted,admitted",
      "again admitted,capped",
    ]);
    assert.equal(cap.inFlight("CN=a"), 2);
  } finally {
    assert.equal(await threads.close(1000), true);
  }
  assert.equal(cap.inFlight("CN=a"), 0, "a Worker that ended holds no slot");
});
