/**
 * The shared memory between the main isolate and its sign thread (./sign_thread.ts,
 * ./_worker.ts): a control block of four counters and flags, and a ring of job slots.
 * Both sides read and write it through these names only.
 *
 * A slot, in 64-bit words: the session, the key, the CK_MECHANISM (its type and an empty
 * parameter, three words: the worker hands these 24 bytes to C_SignInit as they are), the data's
 * length, the signature's length (in: the room; out: what C_Sign wrote), the return value, which
 * call returned it, and the time the signature held the thread; then the data and the signature.
 *
 * @example
 * ```ts
 * import { SLOT, slotOffset } from "./_slots.ts";
 * const words = new BigInt64Array(new SharedArrayBuffer(slotOffset(1)));
 * words[slotOffset(0) / 8 + SLOT.KEY] = 7n;
 * ```
 */

/** Slots in the ring: a power of two, and more than the signatures a daemon has in flight. */
export const SLOTS = 64;
/** Largest message a slot carries; a larger one is signed on the calling thread. */
export const DATA_ROOM = 16 * 1024;
/** Room for a signature: more than the largest of every key type (ML-DSA-87, the composite). */
export const SIGNATURE_ROOM = 8 * 1024;
const HEADER_BYTES = 128;
const SLOT_BYTES = HEADER_BYTES + DATA_ROOM + SIGNATURE_ROOM;

/** The words of a slot's header. */
export const SLOT = {
  SESSION: 0,
  KEY: 1,
  /** CK_MECHANISM: mechanism, pParameter, ulParameterLen. */
  MECHANISM: 2,
  DATA_LENGTH: 5,
  SIGNATURE_LENGTH: 6,
  RV: 7,
  /** 0: C_SignInit returned RV; 1: C_Sign did. */
  FAILED_CALL: 8,
  /** A float64: the ms the signature held the thread (../sign_placement.ts `HoldTimer`). */
  HELD_MS: 9,
} as const;

/** Where the data and the signature of a slot start, from the slot's first byte. */
export const DATA_AT = HEADER_BYTES;
export const SIGNATURE_AT = HEADER_BYTES + DATA_ROOM;

/** The control block's Int32 cells. */
export const CONTROL = {
  /** Jobs posted by the main isolate (wraps as an Int32). */
  POSTED: 0,
  /** Jobs done by the thread (wraps as an Int32). */
  DONE: 1,
  /** 1 while the thread waits for a job: the poster must notify POSTED. */
  SLEEPING: 2,
  /** 1: the thread returns. */
  STOP: 3,
  /** 1 while the thread is in a call of the module: closing waits for 0 before the module goes. */
  IN_MODULE: 4,
} as const;
export const CONTROL_BYTES = 32;

/** The byte offset of slot `i`, and the ring's size as `slotOffset(SLOTS)`. */
export function slotOffset(i: number): number {
  return i * SLOT_BYTES;
}

/** The slot of a job counter (an Int32 that wraps). */
export function slotOf(counter: number): number {
  return counter & (SLOTS - 1);
}
