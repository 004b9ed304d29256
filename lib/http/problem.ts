/**
 * RFC 9457 problem details: the body of every error response.
 *
 * @example
 * ```ts
 * return problem(429, "Too many requests", "at most 3 at once per identity", [["Retry-After", "1"]]);
 * ```
 */
import type { HttpResponse } from "./types.ts";

/** Media type of problem details. */
export const PROBLEM_TYPE = "application/problem+json";

/**
 * An `application/problem+json` response with `type: "about:blank"`, the status and title, and the
 * detail when given. The same arguments always give the same bytes.
 * @example problem(403, "Forbidden")
 */
export function problem(
  status: number,
  title: string,
  detail?: string,
  headers: Array<[string, string]> = [],
): HttpResponse {
  const doc: Record<string, string | number> = { type: "about:blank", title, status };
  if (detail !== undefined) doc.detail = detail;
  return {
    status,
    headers: [["Content-Type", PROBLEM_TYPE], ...headers],
    body: JSON.stringify(doc) + "\n",
  };
}
