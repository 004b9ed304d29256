/**
 * The metrics listener: its own UNIX socket (--metrics-socket), its own peer-uid check (only
 * --metrics-uid may connect), one route, GET /metrics, in the Prometheus text format. It runs in
 * the main isolate, which sums every isolate's counts (./registry.ts); a scrape is rare and cheap.
 *
 * @example
 * ```ts
 * import { MetricsListener } from "./listener.ts";
 * declare const sampleMain: () => void;
 * const l = MetricsListener.open({ socket: "/run/svcd/metrics.sock", peerUid: 33 }, sampleMain);
 * await l.close();
 * ```
 */
import { Listener, problem } from "../http/mod.ts";
import type { HttpRequest, HttpResponse, ListenerEvent } from "../http/mod.ts";
import { exposition, EXPOSITION_CONTENT_TYPE } from "./exposition.ts";
import { metrics } from "./svcd.ts";

/** Where the metrics listener listens and who may connect. */
export interface MetricsListenerConfig {
  socket: string;
  peerUid: number;
}

/** GET /metrics on a UNIX socket. */
export class MetricsListener {
  private constructor(private readonly listener: Listener, readonly served: Promise<void>) {}

  /**
   * Opens the socket and serves; `beforeScrape` refreshes this isolate's sampled gauges (a scrape
   * waits for it when it returns a promise).
   */
  static open(
    config: MetricsListenerConfig,
    beforeScrape: () => void | Promise<void>,
    log?: (event: ListenerEvent) => void,
  ): MetricsListener {
    const listener = Listener.open({
      path: config.socket,
      proxyUid: config.peerUid,
      workers: 1,
      queueDepth: 16,
      maxBodyBytes: 1024,
      handler: (req) => metricsRoute(req, beforeScrape),
      log,
    });
    return new MetricsListener(listener, listener.serve());
  }

  close(graceMs = 1000): Promise<void> {
    return this.listener.close(graceMs);
  }
}

async function metricsRoute(
  req: HttpRequest,
  beforeScrape: () => void | Promise<void>,
): Promise<HttpResponse> {
  if (req.path !== "/metrics") {
    return problem(404, "Not Found", "The metrics socket serves GET /metrics only.");
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    return problem(405, "Method Not Allowed", "Use GET.", [["Allow", "GET, HEAD"]]);
  }
  await beforeScrape();
  return {
    status: 200,
    headers: [["Content-Type", EXPOSITION_CONTENT_TYPE]],
    body: exposition(metrics),
  };
}
