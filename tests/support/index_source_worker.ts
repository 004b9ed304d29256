/**
 * A Worker for lib/ocsp/index_source_test.ts: answers lookups from an IndexFileSource over the memory it is
 * given, as a public thread does, so a test can count the parses several threads share (in the
 * shared counts it is given).
 *
 * @example
 * ```ts
 * import { createIndexMemory } from "../../lib/ocsp/index_compact.ts";
 * import { IndexCounts } from "./index_counts.ts";
 * declare const path: string;
 * const memory = createIndexMemory();
 * const url = new URL("../../tests/support/index_source_worker.ts", import.meta.url);
 * const worker = new Worker(url, { type: "module" });
 * worker.postMessage({ path, memory, counts: new IndexCounts().buffer, serial: "0A" });
 * ```
 */
import { IndexFileSource } from "../../lib/ocsp/index_source.ts";
import type { IndexMemory } from "../../lib/ocsp/index_compact.ts";
import { StaleSnapshotError } from "../../lib/ocsp/index_db.ts";
import { IndexCounts } from "./index_counts.ts";

/** A lookup asked of the Worker. */
export interface IndexWorkerQuestion {
  path: string;
  memory: IndexMemory;
  /** The buffer of the IndexCounts the source tells of its reads and parses. */
  counts: SharedArrayBuffer;
  serial: string;
}

let source: IndexFileSource | undefined;

// deno-lint-ignore no-explicit-any
const scope = self as any;
scope.onmessage = async (e: MessageEvent<IndexWorkerQuestion>) => {
  const { path, memory, counts, serial } = e.data;
  source ??= new IndexFileSource(path, { memory, observer: new IndexCounts(counts) });
  for (;;) {
    const snapshot = await source.current();
    try {
      scope.postMessage(snapshot?.lookup(serial)?.status ?? (snapshot ? "unknown" : "unavailable"));
      return;
    } catch (err) {
      if (!(err instanceof StaleSnapshotError)) throw err;
    }
  }
};
