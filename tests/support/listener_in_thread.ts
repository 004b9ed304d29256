/**
 * Test fixture: runs a Listener inside a Worker (as the public listener will) and answers with the
 * worker's own view of the request. Messages: {path} in → "listening" out; "close" in → "closed" out.
 */
import { Listener } from "../../lib/http/mod.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
let listener: Listener | null = null;
let serving: Promise<void> | null = null;

scope.onmessage = async (e: MessageEvent) => {
  if (e.data === "close") {
    await listener?.close(1000);
    await serving;
    scope.postMessage("closed");
    return;
  }
  listener = Listener.open({
    path: e.data.path,
    proxyUid: null,
    workers: 2,
    handler: (req) => Promise.resolve({ status: 200, body: `worker ${req.method} ${req.path}` }),
  });
  serving = listener.serve();
  scope.postMessage("listening");
};
