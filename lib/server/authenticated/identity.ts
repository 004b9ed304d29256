/**
 * The client identity of a request on the authenticated socket: exactly one X-SVC-Client-Subject
 * header, whatever the case of its name, written by the proxy.
 *
 * @example
 * ```ts
 * const id = clientIdentity([["X-SVC-Client-Subject", "CN=a"]]); // { ok: true, subject: "CN=a" }
 * ```
 */
import { headerValues } from "../../http/mod.ts";

export const SUBJECT_HEADER = "x-svc-client-subject";

/** The outcome of reading the identity header: the subject, or why there is none. */
export type Identity =
  | { ok: true; subject: string }
  | { ok: false; reason: "missing" | "empty" | "duplicate" };

/** Reads the subject; two or more headers are refused, never chosen between. */
export function clientIdentity(headers: ReadonlyArray<readonly [string, string]>): Identity {
  const values = headerValues(headers, SUBJECT_HEADER);
  if (values.length > 1) return { ok: false, reason: "duplicate" };
  if (values.length === 0) return { ok: false, reason: "missing" };
  if (values[0] === "") return { ok: false, reason: "empty" };
  return { ok: true, subject: values[0] };
}
