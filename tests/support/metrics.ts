/**
 * What the metrics tests share: subjects that must never leak into a series, a /sign as a proxy
 * sends it, a scrape of the metrics socket and one series' value in it, and `promtool check
 * metrics` over a scrape.
 *
 * @example
 * ```ts
 * declare const socket: string, metricsSocket: string;
 * for (const subject of ODD_SUBJECTS) console.log((await signAs(socket, subject, "k")).status);
 * const text = await scrape(metricsSocket);
 * console.log(sample(text, 'svcd_http_requests_total{listener="authenticated",route="/sign",status="200"}'));
 * const check = await promtoolCheckMetrics(text);
 * if (check.code !== 0) throw new Error(check.out);
 * await assertPromtoolAccepts(text); // exit 0, and not a word of complaint
 * ```
 */
import assert from "node:assert/strict";
import { type ClientResponse, request } from "./http_client.ts";

/** Subjects as byte strings (one char per byte): quotes, braces, UTF-8 and a byte that is not. */
export const ODD_SUBJECTS: readonly string[] = [
  'CN=zo\xc3\xab",le="0.5"}',
  "CN=\xff\xfe{x}\\",
  "CN=mallory\tstatus=200",
];

/** POST /sign of the body "message" with `key`, as the proxy sends it for `subject`. */
export function signAs(socket: string, subject: string, key: string): Promise<ClientResponse> {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", key]],
    body: "message",
  });
}

/** The value of one series line, e.g. `svcd_x_total{a="b"}`; undefined when absent. */
export function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** GET /metrics on the metrics socket: the exposition text. */
export async function scrape(metricsSocket: string): Promise<string> {
  const res = await request(metricsSocket, { method: "GET", path: "/metrics" });
  assert.equal(res.status, 200, res.text());
  return res.text();
}

/** `promtool check metrics` over `text`: its exit code and what it printed. */
export async function promtoolCheckMetrics(text: string): Promise<{ code: number; out: string }> {
  const child = new Deno.Command("promtool", {
    args: ["check", "metrics"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(text));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  const td = new TextDecoder();
  return { code, out: td.decode(stdout) + td.decode(stderr) };
}

/**
 * Asserts that `promtool check metrics` accepts `text`: exit 0 and, unless `silent: false`,
 * nothing printed (no lint complaint either).
 *
 * @example
 * ```ts
 * declare const scrape: string;
 * await assertPromtoolAccepts(scrape);
 * await assertPromtoolAccepts(scrape, { silent: false }); // exit 0 is enough
 * ```
 */
export async function assertPromtoolAccepts(
  text: string,
  opts: { silent?: boolean } = {},
): Promise<void> {
  const check = await promtoolCheckMetrics(text);
  assert.equal(check.code, 0, check.out);
  if (opts.silent ?? true) assert.equal(check.out.trim(), "", check.out);
}
