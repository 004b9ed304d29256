/**
 * Where a load of the compact index (./index_compact.ts `loadIndex`) takes index.txt's bytes from:
 * one narrow interface, {@link IndexReader}, and its two implementations, bytes already in memory
 * ({@link WholeReader}) and an open file read a chunk at a time ({@link ChunkedReader}).
 *
 * @example
 * ```ts
 * using file = Deno.openSync("/var/lib/svcd/ca/index.txt");
 * const reader: IndexReader = new ChunkedReader(file);
 * for (let part; (part = reader.next()) !== null;) console.log(part.length);
 * ```
 */

/** index.txt's bytes, in parts as they are read, or whole. */
export interface IndexReader {
  /**
   * The next part: whole lines, each ending with LF (a part without a final LF is the file's last
   * line cut short, or a line longer than a chunk); null at the end. Valid until the next call.
   */
  next(): Uint8Array | null;
  /** The whole file, from its start: where a fault is named exactly. */
  whole(): Uint8Array;
}

/**
 * Bytes already in memory: one part, the whole.
 *
 * @example
 * ```ts
 * new WholeReader(new TextEncoder().encode("V\t301231235959Z\t\t1A\tunknown\t/CN=a\n")).next();
 * ```
 */
export class WholeReader implements IndexReader {
  #done = false;

  constructor(readonly bytes: Uint8Array) {}

  next(): Uint8Array | null {
    if (this.#done) return null;
    this.#done = true;
    return this.bytes;
  }

  whole(): Uint8Array {
    return this.bytes;
  }
}

/** Bytes {@link ChunkedReader} reads at a time. */
export const CHUNK_BYTES = 1 << 20;
let chunkBuffer: Uint8Array | undefined;

/**
 * An open file, read from where it stands `chunkBytes` at a time into one buffer this thread
 * reuses (one chunked read at a time in a thread): a re-read of a million lines never allocates a buffer of the file's size, whose pages the
 * kernel would first have to fault in and clear. `whole()` reads the file again from its start.
 *
 * @example
 * ```ts
 * using file = Deno.openSync("/var/lib/svcd/ca/index.txt");
 * new ChunkedReader(file, 4096).next(); // the first whole lines of at most 4096 bytes
 * ```
 */
export class ChunkedReader implements IndexReader {
  readonly #buffer: Uint8Array;
  /** End of the part last given, and of the bytes read into the buffer. */
  #given = 0;
  #filled = 0;

  constructor(private readonly file: Deno.FsFile, chunkBytes: number = CHUNK_BYTES) {
    if (chunkBuffer?.length !== chunkBytes) chunkBuffer = new Uint8Array(chunkBytes);
    this.#buffer = chunkBuffer;
  }

  next(): Uint8Array | null {
    const buf = this.#buffer;
    buf.copyWithin(0, this.#given, this.#filled);
    let filled = this.#filled - this.#given;
    for (;;) {
      const n = filled < buf.length ? this.file.readSync(buf.subarray(filled)) : 0;
      // At the end, or a line longer than the buffer: the rest as it is.
      if (!n) return this.#give(filled, filled);
      filled += n;
      const end = buf.lastIndexOf(LF, filled - 1) + 1;
      if (end > 0) return this.#give(end, filled);
    }
  }

  #give(end: number, filled: number): Uint8Array | null {
    this.#given = end;
    this.#filled = filled;
    return end === 0 ? null : this.#buffer.subarray(0, end);
  }

  whole(): Uint8Array {
    this.file.seekSync(0, Deno.SeekMode.Start);
    return readAllFrom(this.file);
  }
}

const LF = 10;

/** The rest of an open file, from where it stands to its end. */
function readAllFrom(file: Deno.FsFile): Uint8Array {
  let buf = new Uint8Array(Math.max(file.statSync().size + 1, 4096));
  let got = 0;
  for (let n; (n = file.readSync(buf.subarray(got))) !== null && n > 0;) {
    got += n;
    if (got === buf.length) {
      const more = new Uint8Array(buf.length * 2);
      more.set(buf);
      buf = more;
    }
  }
  return buf.subarray(0, got);
}
