/**
 * Reading request headers as the parser hands them over (name and value pairs in arrival order,
 * values as latin1 strings, one character per byte): every value of a header whatever the case
 * of its name, the one value of a header that must not repeat, and the text a value carries
 * when its bytes are UTF-8.
 *
 * @example
 * ```ts
 * import { singleHeader, utf8FromLatin1 } from "./headers.ts";
 * const label = singleHeader([["X-SVC-Key", "cl\u00c3\u00a9"]], "x-svc-key"); // one value
 * utf8FromLatin1(label!); // "clé"
 * ```
 */
import { latin1Bytes } from "../bytes/mod.ts";

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
