import assert from "node:assert/strict";
import { answerCall, type CallMessage, callSlot, failCall } from "./protocol.ts";

/** A Worker that makes one blocking call and reports what it got (values or the error). */
function caller(): Worker {
  const module = new URL("./protocol.ts", import.meta.url).href;
  const source = `
    import { MainCaller } from "${module}";
    self.onmessage = (e) => {
      const caller = new MainCaller(e.data, (m) => self.postMessage(m));
      try {
        self.postMessage({ got: [...caller.call("admit", "CN=a").slice(0, 2)] });
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

Deno.test("thread calls: an answered call returns the main isolate's values", async () => {
  assert.deepEqual(await oneCall((slot) => answerCall(slot, [1, 7])), { got: [1, 7] });
});

Deno.test("thread calls: a call the main isolate could not answer throws in the Worker, never waits forever", async () => {
  assert.deepEqual(await oneCall((slot) => failCall(slot)), {
    error: "the main isolate could not answer the admit call",
  });
});
