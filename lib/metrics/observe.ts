/**
 * Counting around a listener without changing it: its handler and `100 Continue` check wrapped (answers by
 * route and status, /sign latency, signatures by key type and mode), and this isolate's gauges
 * sampled once a second (connections held, sessions in use). Used alike by the main isolate
 * (--threads 0) and by each request or public Worker.
 *
 * @example
 * ```ts
 * import { Listener, type ListenerOptions } from "../http/mod.ts";
 * import type { ContinueCheck, Handler } from "../http/mod.ts";
 * import { countedListener } from "./observe.ts";
 * declare const options: ListenerOptions, handler: Handler, continueCheck: ContinueCheck;
 * Listener.open({ ...options, ...countedListener("authenticated", { handler, continueCheck }) });
 * ```
 */
import type { ContinueCheck, Handler, HttpRequest, HttpResponse } from "../http/mod.ts";
import { countResponse, countSign, metrics, setIsolateGauges } from "./svcd.ts";

/** The shared buffer and the first region of a group of Workers (region = first + its slot). */
export interface MetricsShare {
  buffer: SharedArrayBuffer;
  firstRegion: number;
}

/**
 * In a Worker: counts into region `share.firstRegion + slot` of the main isolate's buffer.
 * @example attachMetrics(setup.metrics, setup.shared.slot)
 */
export function attachMetrics(share: MetricsShare | undefined, slot: number): void {
  if (share) metrics.attach(share.buffer, share.firstRegion + slot);
}

/**
 * The handler and the `100 Continue` check, counting each answer.
 * @example countedListener("public", { handler })
 */
export function countedListener(
  listener: "authenticated" | "public",
  parts: { handler: Handler; continueCheck?: ContinueCheck },
): { handler: Handler; continueCheck?: ContinueCheck } {
  const { handler, continueCheck } = parts;
  return {
    handler: async (req) => {
      const start = performance.now();
      const res = await handler(req);
      countResponse(listener, req.path, res.status);
      if (req.path === "/sign") {
        const keyType = res.status === 200 ? header(res, "x-svc-key-type") : undefined;
        countSign((performance.now() - start) / 1000, keyType, hasDigestHeader(req));
      }
      return res;
    },
    continueCheck: continueCheck && ((head) => {
      const res = continueCheck(head);
      if (res) countResponse(listener, head.path, res.status);
      return res;
    }),
  };
}

/**
 * Samples this isolate's gauges now and every second (the timer does not hold the process open);
 * returns the function that samples, for a scrape to call first.
 * @example const sample = sampleGauges("authenticated", () => listener.stats(), () => token.poolStats())
 */
export function sampleGauges(
  listener: string,
  stats: () => { waiting: number; reading: number; queued: number },
  pool?: () => { inUse: number; cap: number },
): () => void {
  const sample = () => {
    try {
      const s = stats();
      setIsolateGauges(listener, s.waiting + s.reading + s.queued, pool?.());
    } catch { /* a closed listener or token: the last values stay */ }
  };
  sample();
  const timer = setInterval(sample, 1000);
  Deno.unrefTimer(timer);
  return sample;
}

function header(res: HttpResponse, name: string): string | undefined {
  return res.headers?.find(([n]) => n.toLowerCase() === name)?.[1];
}

function hasDigestHeader(req: HttpRequest): boolean {
  return req.headers.some(([n]) => n.length === 12 && n.toLowerCase() === "x-svc-digest");
}
