import assert from "node:assert/strict";
import { threadNice } from "./priority.ts";

Deno.test("thread priority: a Worker's setThreadNice changes that thread only", async () => {
  const before = threadNice();
  const worker = new Worker(
    `data:application/javascript,${
      encodeURIComponent(`
        import { setThreadNice, threadNice } from "${new URL(
        "./priority.ts",
        import.meta.url,
      )}";
        setThreadNice(7);
        self.postMessage(threadNice());
      `)
    }`,
    { type: "module" },
  );
  const inWorker = await new Promise<number>((
    resolve,
  ) => (worker.onmessage = (e) => resolve(e.data)));
  worker.terminate();
  assert.equal(inWorker, 7);
  assert.equal(threadNice(), before, "the main thread keeps its priority");
});
