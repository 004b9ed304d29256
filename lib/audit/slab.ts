/**
 * Byte buffers carved out of shared 64 KiB slabs. In Deno a typed array larger than 64 bytes gets
 * an off-heap backing store: allocating one (and sweeping it later) costs some 3–6 k instructions,
 * a view of a slab a tenth of that. The audit log takes one per line and one per written group.
 * Bump allocation only: a region is never handed out twice, and a slab is freed by the garbage
 * collector once no view of it is left.
 *
 * @example
 * ```ts
 * const buf = slabBytes(300); // a zero-filled Uint8Array of 300 bytes, part of a larger buffer
 * ```
 */

const SLAB_BYTES = 64 * 1024;
let slab = new Uint8Array(0);
let next = 0;

/**
 * A fresh zero-filled view of `n` bytes (a buffer of its own when `n` is larger than a slab).
 *
 * @example
 * ```ts
 * declare const total: number;
 * const group = slabBytes(total);
 * ```
 */
export function slabBytes(n: number): Uint8Array {
  if (n > SLAB_BYTES / 4) return new Uint8Array(n);
  if (next + n > slab.length) {
    slab = new Uint8Array(SLAB_BYTES);
    next = 0;
  }
  const view = slab.subarray(next, next + n);
  next += n;
  return view;
}
