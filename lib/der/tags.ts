/**
 * DER tag numbers: the universal ones svcd reads and writes, and the context-specific forms.
 *
 * @example
 * ```ts
 * import { ctx, TAG } from "./tags.ts";
 * TAG.SEQUENCE === 0x30 && ctx(0) === 0xa0; // → true
 * ```
 */

/** Universal and common context tags (the whole identifier octet). Example: `TAG.SEQUENCE === 0x30`. */
export const TAG = {
  BOOLEAN: 0x01,
  INTEGER: 0x02,
  BIT_STRING: 0x03,
  OCTET_STRING: 0x04,
  NULL: 0x05,
  OID: 0x06,
  ENUMERATED: 0x0a,
  UTF8_STRING: 0x0c,
  PRINTABLE_STRING: 0x13,
  IA5_STRING: 0x16,
  UTC_TIME: 0x17,
  GENERALIZED_TIME: 0x18,
  SEQUENCE: 0x30,
  SET: 0x31,
} as const;

/** Context-specific constructed tag [n] (EXPLICIT or constructed IMPLICIT). Example: `ctx(0) === 0xa0`. */
export function ctx(n: number): number {
  return 0xa0 | n;
}

/** Context-specific primitive tag [n] (IMPLICIT over a primitive). Example: `ctxPrimitive(2) === 0x82`. */
export function ctxPrimitive(n: number): number {
  return 0x80 | n;
}
