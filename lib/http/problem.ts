/**
 * RFC 9457 problem details: the body of every error response.
 *
 * @example
 * ```ts
 * const res = problem(429, "Too many requests", "at most 3 at once per identity", [["Retry-After", "1"]]);
 * ```
 */
import type { HttpResponse } from "./types.ts";
import { reasonPhrase } from "./response.ts";

/** Media type of problem details. */
export const PROBLEM_TYPE = "application/problem+json";

/**
 * An `application/problem+json` response with `type: "about:blank"`, the status, and the detail
 * when given. With about:blank the title must be the status's reason phrase (RFC 9457 §4.2.1), so a
 * more specific title given here leads the detail instead. The same arguments always give the same
 * bytes.
 *
 * @example
 * ```ts
 * problem(503, "Queue full", "retry"); // title "Service Unavailable", detail "Queue full: retry"
 * ```
 */
export function problem(
  status: number,
  title: string,
  detail?: string,
  headers: Array<[string, string]> = [],
): HttpResponse {
  const phrase = reasonPhrase(status) ?? title;
  const specific = title.toLowerCase() === phrase.toLowerCase() ? undefined : title;
  const text = specific && detail ? `${specific}: ${detail}` : specific ?? detail;
  const doc: Record<string, string | number> = { type: "about:blank", title: phrase, status };
  if (text !== undefined) doc.detail = text;
  return {
    status,
    headers: [["Content-Type", PROBLEM_TYPE], ...headers],
    body: JSON.stringify(doc) + "\n",
  };
}

/** Prefix of the `type` of svcd's own problems: `urn:svcd:problem:<slug>`. */
export const PROBLEM_URN = "urn:svcd:problem:";

/**
 * An `application/problem+json` response of a problem type of svcd's own (`urn:svcd:problem:` and
 * `slug`), with a title of its own (RFC 9457 §3.1.3: the same for every occurrence of the type)
 * and the detail of this occurrence. The same arguments always give the same bytes.
 *
 * @example
 * ```ts
 * typedProblem(400, "digest-length", "Wrong digest length", "sha-256 is 32 bytes");
 * ```
 */
export function typedProblem(
  status: number,
  slug: string,
  title: string,
  detail: string,
  headers: Array<[string, string]> = [],
): HttpResponse {
  const doc = { type: `${PROBLEM_URN}${slug}`, title, status, detail };
  return {
    status,
    headers: [["Content-Type", PROBLEM_TYPE], ...headers],
    body: JSON.stringify(doc) + "\n",
  };
}
