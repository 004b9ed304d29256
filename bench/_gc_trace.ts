/**
 * V8's `--trace-gc` lines of a daemon, summed up per isolate (the main isolate and each Worker):
 * how often each kind of collection ran, the heap V8 keeps (committed) at most and at the end, and
 * the heap still in use after each full collection (mark-compact) — what the isolate really holds.
 * A leak shows as that figure growing from one mark-compact to the next; a heap that V8 grows to
 * its limits under load shows as committed memory that stops growing while the figure stays flat.
 *
 * @example
 * ```ts
 * const text = "[1:0x55d8f0bd2000]  83521 ms: Mark-Compact 14.1 (41.4) -> 8.7 (40.6) MB, …";
 * for (const line of gcTraceReport(text)) console.log(line);
 * ```
 */

/** One isolate's collections, from the trace. */
export interface IsolateGc {
  /** The isolate's address in the trace (stable for its life; reused later by another isolate). */
  isolate: string;
  scavenges: number;
  markCompacts: number;
  /** Committed heap (MB), most seen and at the last collection. */
  committedMaxMb: number;
  committedLastMb: number;
  /** Heap in use after each mark-compact (MB), in order. */
  liveAfterMarkCompactMb: number[];
  /** Time of the last collection (ms since the isolate started). */
  lastMs: number;
}

// "[pid:0xADDR]   83521 ms: Mark-Compact 14.1 (41.4) -> 8.7 (40.6) MB, …" (also "Scavenge",
// "Incremental Mark-Compact", "Minor Mark-Sweep"): used (committed) before -> after.
const LINE =
  /^\[\d+:(0x[0-9a-f]+)\]\s+(\d+) ms: ([A-Za-z -]+?) ([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB/;

/** Per isolate, in the order each first appears; isolates with no full collection are kept too. */
export function summariseGcTrace(text: string): IsolateGc[] {
  const byIsolate = new Map<string, IsolateGc>();
  /** Isolates seen at each address so far. */
  const seen = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    const [, isolate, ms, kind, , , after, committedAfter] = m;
    let gc = byIsolate.get(isolate);
    // An ended isolate's address is taken again by a new one (a policy reader thread per
    // reload): its clock starts again from 0.
    if (gc && Number(ms) < gc.lastMs) {
      byIsolate.delete(isolate);
      byIsolate.set(`${isolate}#${seen.get(isolate)}`, gc);
      gc = undefined;
    }
    if (!gc) {
      seen.set(isolate, (seen.get(isolate) ?? 0) + 1);
      gc = {
        isolate,
        scavenges: 0,
        markCompacts: 0,
        committedMaxMb: 0,
        committedLastMb: 0,
        liveAfterMarkCompactMb: [],
        lastMs: 0,
      };
      byIsolate.set(isolate, gc);
    }
    const committed = Number(committedAfter);
    gc.committedMaxMb = Math.max(gc.committedMaxMb, committed);
    gc.committedLastMb = committed;
    gc.lastMs = Number(ms);
    if (/Mark-Compact/.test(kind)) {
      gc.markCompacts++;
      gc.liveAfterMarkCompactMb.push(Number(after));
    } else {
      gc.scavenges++;
    }
  }
  return [...byIsolate.values()];
}

/** One line for an isolate: collections, committed heap, heap in use after the first and last full ones. */
export function describeIsolate(gc: IsolateGc): string {
  const live = gc.liveAfterMarkCompactMb;
  const liveText = live.length === 0
    ? "no mark-compact"
    : `in use after mark-compact ${live[0].toFixed(1)} MB (first) … ${
      live.at(-1)!.toFixed(1)
    } MB (last), ${Math.min(...live).toFixed(1)}–${Math.max(...live).toFixed(1)} MB`;
  return `isolate ${gc.isolate}: ${gc.scavenges} scavenges, ${gc.markCompacts} mark-compacts, ` +
    `committed max ${gc.committedMaxMb.toFixed(1)} MB (last ${
      gc.committedLastMb.toFixed(1)
    } MB), ${liveText}`;
}

/** Isolates that lived this long are the daemon's threads; shorter ones read the policy once. */
const LASTING_MS = 10_000;

/**
 * The report of a trace: one line per isolate that lived past {@link LASTING_MS} (the main
 * isolate and the listeners' threads), after a line that counts the short-lived ones left out.
 */
export function gcTraceReport(text: string): string[] {
  const isolates = summariseGcTrace(text);
  const lasting = isolates.filter((i) => i.lastMs >= LASTING_MS);
  return [
    `V8 collections per isolate (${
      isolates.length - lasting.length
    } short-lived isolates left out):`,
    ...lasting.map((isolate) => `  ${describeIsolate(isolate)}`),
  ];
}
