/**
 * Debian's Prometheus for tests: one scrape job on a short interval, listening on 127.0.0.1 only,
 * its storage in a temporary folder; read back through its HTTP API. Every wait polls the API until
 * a condition holds, within a bound.
 *
 * @example
 * ```ts
 * declare const dir: string, target: string;
 * const prometheus = await startPrometheus(dir, target); // e.g. "127.0.0.1:9464"
 * await prometheus.waitFor("up", (v) => v === 1);
 * await prometheus.stop();
 * ```
 */
import { freePort } from "./nginx.ts";

/** A running Prometheus. */
export interface TestPrometheus {
  port: number;
  /** GET /api/v1/<path> with these query parameters; the `data` of a success, else throws. */
  api(path: string, params: Array<[string, string]>): Promise<unknown>;
  /** The value of an instant query that returns one sample, or undefined when it returns none. */
  value(query: string): Promise<number | undefined>;
  /** Polls `query` until `holds(value)`, at most `timeoutMs`; returns the value that held. */
  waitFor(query: string, holds: (v: number) => boolean, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

/** Seconds between scrapes: short, so a test waits about a second for a new sample. */
const SCRAPE_SECONDS = 1;

/** Starts Prometheus scraping `target` (host:port, path /metrics) and waits until it is ready. */
export async function startPrometheus(dir: string, target: string): Promise<TestPrometheus> {
  const port = freePort();
  await Deno.mkdir(`${dir}/prometheus-data`, { recursive: true });
  await Deno.writeTextFile(
    `${dir}/prometheus.yml`,
    `global:
  scrape_interval: ${SCRAPE_SECONDS}s
  scrape_timeout: ${SCRAPE_SECONDS}s
scrape_configs:
  - job_name: svcd
    static_configs:
      - targets: ["${target}"]
`,
  );
  const child = new Deno.Command("/usr/bin/prometheus", {
    args: [
      `--config.file=${dir}/prometheus.yml`,
      `--storage.tsdb.path=${dir}/prometheus-data`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--log.level=warn",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  let exited = false;
  child.status.then(() => exited = true);
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (!exited) child.kill("SIGTERM");
    await child.status;
    await stderr;
  };
  try {
    await poll(
      async () => {
        if (exited) throw new Error(`prometheus exited: ${await stderr}`);
        return await fetch(`${base}/-/ready`).then(async (r) => {
          await r.body?.cancel();
          return r.ok;
        }, () => false);
      },
      30_000,
      "prometheus did not become ready",
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const api = async (path: string, params: Array<[string, string]>) => {
    const url = new URL(`${base}/api/v1/${path}`);
    for (const [k, v] of params) url.searchParams.append(k, v);
    const body = await (await fetch(url)).json();
    if (body.status !== "success") throw new Error(`${url}: ${JSON.stringify(body)}`);
    return body.data;
  };
  const value = async (query: string) => {
    const data = await api("query", [["query", query]]) as {
      result: Array<{ value: [number, string] }>;
    };
    if (data.result.length > 1) throw new Error(`${query}: ${data.result.length} samples`);
    return data.result.length === 0 ? undefined : Number(data.result[0].value[1]);
  };
  return {
    port,
    api,
    value,
    waitFor: async (query, holds, timeoutMs = 30_000) => {
      let last: number | undefined;
      await poll(
        async () => {
          last = await value(query);
          return last !== undefined && holds(last);
        },
        timeoutMs,
        () => `${query} never held (last value ${last})`,
      );
      return last!;
    },
    stop,
  };
}

/** Calls `check` every 100 ms until it returns true; throws after `timeoutMs`. */
async function poll(
  check: () => Promise<boolean>,
  timeoutMs: number,
  why: string | (() => string),
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(typeof why === "string" ? why : why());
    await new Promise((r) => setTimeout(r, 100));
  }
}
