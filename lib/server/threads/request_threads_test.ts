import assert from "node:assert/strict";
import { ConcurrencyCap } from "../../throttle/mod.ts";
import { RequestThreads, RequestThreadsError, splitWorkers } from "./request_threads.ts";
import { servicesInMemory } from "../../../tests/support/services_in_memory.ts";
import { recordingHooks, standInSetup } from "../../../tests/support/request_threads.ts";

const STAND_IN = new URL("../../../tests/support/stand_in_request_thread.ts", import.meta.url);

Deno.test("request threads: --workers is split over the threads, their total unchanged", () => {
  assert.deepEqual(splitWorkers(16, 2), [8, 8]);
  assert.deepEqual(splitWorkers(5, 2), [3, 2]);
  assert.deepEqual(splitWorkers(3, 3), [1, 1, 1]);
  assert.throws(() => splitWorkers(1, 2), RangeError);
});

Deno.test("request threads: a start-up failure rejects with its message and removes the socket", async () => {
  const s = standInSetup("fail-start");
  const { hooks: h } = recordingHooks();
  await assert.rejects(
    RequestThreads.start(s, 2, servicesInMemory(), h, STAND_IN),
    (e) => e instanceof RequestThreadsError && /no such token/.test(e.message),
  );
  assert.throws(() => Deno.lstatSync(s.path), Deno.errors.NotFound);
});

Deno.test("request threads: a Worker that dies after start is a failure (exit 70); close resolves false", async () => {
  const { hooks: h, failures, until } = recordingHooks();
  const threads = await RequestThreads.start(
    standInSetup("crash-after-start"),
    1,
    servicesInMemory(),
    h,
    STAND_IN,
  );
  await until(() => failures.length > 0);
  assert.match(failures[0].message, /request thread failed: .*boom/);
  assert.equal(await threads.close(1000), false);
});

Deno.test("request threads: admissions and peeks reach the one cap in the main isolate", async () => {
  const cap = new ConcurrencyCap(2);
  const { hooks: h, logs, until } = recordingHooks();
  const threads = await RequestThreads.start(
    standInSetup("admit:CN=a:3"),
    1,
    servicesInMemory({ cap }),
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
