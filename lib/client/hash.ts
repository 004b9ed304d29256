/**
 * Hashes a file as it is read, in fixed chunks, so memory stays flat whatever its size; on a
 * terminal a progress bar on stderr for large files.
 *
 * @example
 * ```ts
 * import { hashFile, progressFor } from "./hash.ts";
 * import { createDigester } from "./digests.ts";
 * declare const publicKeyRaw: Uint8Array;
 * const { size } = await Deno.stat("big.iso");
 * const digester = createDigester("sha-256", publicKeyRaw);
 * const digest = await hashFile("big.iso", digester, progressFor("big.iso", size));
 * ```
 */
import type { Digester } from "./digests.ts";

/** Read size: large enough that the per-call cost vanishes beside the hashing. */
const CHUNK = 1 << 20;
/** Files from this size up get a progress bar on a terminal. */
export const PROGRESS_FROM_BYTES = 64 << 20;

/** Told the bytes hashed so far; `done()` once at the end. */
export interface Progress {
  advance(bytes: number): void;
  done(): void;
}

/** Streams `path` through `digester` and returns the digest. */
export async function hashFile(
  path: string,
  digester: Digester,
  progress?: Progress,
): Promise<Uint8Array> {
  using file = await Deno.open(path);
  const buf = new Uint8Array(CHUNK);
  try {
    for (;;) {
      const n = await file.read(buf);
      if (n === null) break;
      digester.update(buf.subarray(0, n));
      progress?.advance(n);
    }
  } finally {
    progress?.done();
  }
  return digester.digest();
}

/**
 * A progress bar on stderr for a file of `size` bytes when stderr is a terminal and the file is
 * large; otherwise none.
 */
export function progressFor(name: string, size: number): Progress | undefined {
  if (size < PROGRESS_FROM_BYTES || !Deno.stderr.isTerminal()) return undefined;
  return terminalProgress(
    name,
    size,
    (text) => Deno.stderr.writeSync(new TextEncoder().encode(text)),
  );
}

/** The bar itself, redrawn at most every 100 ms, written through `write`. */
export function terminalProgress(
  name: string,
  size: number,
  write: (text: string) => void,
): Progress {
  const WIDTH = 30;
  let seen = 0;
  let last = 0;
  const start = performance.now();
  const draw = () => {
    const fraction = size === 0 ? 1 : Math.min(1, seen / size);
    const filled = Math.round(fraction * WIDTH);
    const seconds = (performance.now() - start) / 1000;
    const rate = seconds > 0 ? seen / seconds / (1 << 20) : 0;
    write(
      `\rhashing ${name} [${"#".repeat(filled)}${" ".repeat(WIDTH - filled)}] ` +
        `${(fraction * 100).toFixed(0).padStart(3)}% ${rate.toFixed(0)} MiB/s`,
    );
  };
  return {
    advance(bytes) {
      seen += bytes;
      const now = performance.now();
      if (now - last >= 100) {
        last = now;
        draw();
      }
    },
    done() {
      draw();
      write("\n");
    },
  };
}
