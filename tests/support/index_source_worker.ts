/**
 * A Worker for lib/ocsp/index_source_test.ts: answers lookups from an IndexFileSource over the memory it is
 * given, as a public thread does, so a test can count the parses several threads share.
 *
 * @example
 * ```ts
 * import { createIndexMemory } from "../../lib/ocsp/index_source.ts";
 * declare const path: string;
 * const memory = createIndexMemory();
 * const url = new URL("../../tests/support/index_source_worker.ts", import.meta.url);
 * const worker = new Worker(url, { type: "module" });
 * worker.postMessage({ path, memory, serial: "0A" });
 * ```
 */
import { IndexFileSource, type IndexMemory } from "../../lib/ocsp/index_source.ts";
import { StaleSnapshotError } from "../../lib/ocsp/index_db.ts";

/** A lookup asked of the Worker. */
export interface IndexWorkerQuestion {
  path: string;
  memory: IndexMemory;
  serial: string;
}

let source: IndexFileSource | undefined;

// deno-lint-ignore no-explicit-any
const scope = self as any;
scope.onmessage = async (e: MessageEvent<IndexWorkerQuestion>) => {
  const { path, memory, serial } = e.data;
  source ??= new IndexFileSource(path, { memory });
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
