/**
 * The Worker of bench/thread-call.ts: makes the calls it is asked for and reports µs per call.
 *
 * @example
 * ```ts
 * new Worker(new URL("./_thread-call-worker.ts", import.meta.url), { type: "module" });
 * ```
 */
import { MainCaller } from "../lib/server/threads/protocol.ts";

// deno-lint-ignore no-explicit-any
const scope = self as any;
scope.onmessage = (e: MessageEvent<{ slot: SharedArrayBuffer; calls: number }>) => {
  const caller = new MainCaller(e.data.slot, (m) => scope.postMessage(m));
  const t = performance.now();
  for (let i = 0; i < e.data.calls; i++) caller.call("peek", "CN=bench1,O=Bench");
  scope.postMessage({ kind: "done", us: (performance.now() - t) * 1000 / e.data.calls });
};
