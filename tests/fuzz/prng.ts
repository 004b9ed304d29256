/**
 * A seeded pseudo-random generator for the fuzzers (xoshiro128**): the same seed gives the same
 * cases on every machine, so a finding is reproduced by its seed and case number.
 *
 * @example
 * ```ts
 * const rng = new Prng(42);
 * rng.int(10); // 0..9, the same for seed 42 everywhere
 * ```
 */
export class Prng {
  #s = new Uint32Array(4);

  /** Seeds the four words with splitmix32 so that nearby seeds give unrelated streams. */
  constructor(seed: number) {
    let x = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      this.#s[i] = (z ^ (z >>> 16)) >>> 0;
    }
    if (this.#s.every((w) => w === 0)) this.#s[0] = 1;
  }

  /** The next 32 random bits. Example: `rng.next()`. */
  next(): number {
    const s = this.#s;
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  }

  /** An integer in [0, n). Example: `rng.int(6) + 1` throws a die. */
  int(n: number): number {
    return n <= 0 ? 0 : Math.floor((this.next() / 0x1_0000_0000) * n);
  }

  /** True with probability `p`. Example: `if (rng.chance(0.1)) mutate()`. */
  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  /** One element of a non-empty list. Example: `rng.pick(["GET", "POST"])`. */
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  /** `n` random bytes. Example: `rng.bytes(16)`. */
  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.next() & 0xff;
    return out;
  }

  /** A length skewed towards small values, at most `max`. Example: `rng.size(4096)`. */
  size(max: number): number {
    const bits = this.int(Math.max(1, Math.ceil(Math.log2(max + 1))) + 1);
    return Math.min(max, this.int(2 ** bits));
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
