import assert from "node:assert/strict";
import { answerCall, CALL_CODECS, type CallMessage, callSlot, failCall } from "./protocol.ts";

/** A Worker that makes one blocking call and reports what it got (values or the error). */
function caller(): Worker {
  const module = new URL("./protocol.ts", import.meta.url).href;
  const source = `
    import { MainCaller } from "${module}";
    self.onmessage = (e) => {
      const caller = new MainCaller(e.data, (m) => self.postMessage(m));
      try {
        self.postMessage({ got: caller.call("peek", "CN=a") });
      } catch (err) {
        self.postMessage({ error: err.message });
      }
    };`;
  return new Worker(`data:application/javascript,${encodeURIComponent(source)}`, {
    type: "module",
  });
}

async function oneCall(answer: (slot: SharedArrayBuffer) => void): Promise<unknown> {
  const worker = caller();
  const slot = callSlot();
  const result = new Promise((resolve) => {
    worker.onmessage = (e: MessageEvent<CallMessage | Record<string, unknown>>) => {
      if ((e.data as CallMessage).kind === "call") return answer(slot);
      resolve(e.data);
    };
  });
  worker.postMessage(slot);
  try {
    return await result;
  } finally {
    worker.terminate();
  }
}

Deno.test("thread calls: an answered call returns the main isolate's answer", async () => {
  const answer = { kind: "limited", retryAfterSeconds: 7 } as const;
  assert.deepEqual(await oneCall((slot) => answerCall(slot, "peek", answer)), { got: answer });
});

Deno.test("thread calls: a call the main isolate could not answer throws in the Worker, never waits forever", async () => {
  assert.deepEqual(await oneCall((slot) => failCall(slot)), {
    error: "the main isolate could not answer the peek call",
  });
});

Deno.test("thread calls: every answer reads back as it was written", () => {
  const roundTrip = <Op extends keyof typeof CALL_CODECS>(op: Op, answer: unknown) =>
    assert.deepEqual(
      CALL_CODECS[op].decode(CALL_CODECS[op].encode(answer as never)),
      answer,
      `${op} ${JSON.stringify(answer)}`,
    );
  roundTrip("peek", { kind: "limited", retryAfterSeconds: 42 });
  roundTrip("peek", { kind: "capped" });
  roundTrip("peek", { kind: "admitted" });
  roundTrip("refusal", { count: 3, crossed: true, delaySeconds: 8 });
  roundTrip("refusal", { count: 1, crossed: false, delaySeconds: 0 });
  roundTrip("stats", { audit: { lines: 5, syncs: 2, maxGroup: 3, seals: 2 }, limitedCount: 1 });
  roundTrip("stats", { audit: undefined, limitedCount: 0 });
});
