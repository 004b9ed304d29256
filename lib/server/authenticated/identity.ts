/**
 * The client identity of a request on the authenticated socket: exactly one X-SVC-Client-Subject
 * header, whatever the case of its name, written by the proxy.
 *
 * @example
 * ```ts
 * const id = clientIdentity([["X-SVC-Client-Subject", "CN=a"]]); // { ok: true, subject: "CN=a" }
 * ```
 */
import { latin1Bytes } from "../../bytes/mod.ts";

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

/**
 * Every value of a header, name compared case-insensitively, in arrival order.
 *
 * @example
 * ```ts
 * headerValues([["X-SVC-Key", "k"]], "x-svc-key"); // ["k"]
 * ```
 */
export function headerValues(
  headers: ReadonlyArray<readonly [string, string]>,
  lowerName: string,
): string[] {
  const out: string[] = [];
  for (const [name, value] of headers) {
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) out.push(value);
  }
  return out;
}

/**
 * The single value of a header that must appear at most once: undefined when absent, null when
 * repeated (the caller refuses the request).
 *
 * @example
 * ```ts
 * singleHeader([["a", "1"], ["A", "2"]], "a"); // null
 * ```
 */
export function singleHeader(
  headers: ReadonlyArray<readonly [string, string]>,
  lowerName: string,
): string | undefined | null {
  const values = headerValues(headers, lowerName);
  if (values.length > 1) return null;
  return values[0];
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The text a latin1 header string carries when its bytes are UTF-8; undefined when they are not.
 *
 * @example
 * ```ts
 * utf8FromLatin1("cl\u00c3\u00a9"); // "clé"
 * ```
 */
export function utf8FromLatin1(value: string): string | undefined {
  try {
    return strictUtf8.decode(latin1Bytes(value));
  } catch {
    return undefined;
  }
}
