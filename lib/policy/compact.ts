/**
 * The grants in one compact block of shared memory: subject → labels without a JS object or string
 * per grant, so a policy of a million grants is a few tens of MB, is built in slices on the event
 * loop, and reaches every request thread by sharing (a SharedArrayBuffer crosses `postMessage`
 * without a copy) instead of a structured clone of a million Map entries.
 *
 * Subjects and labels are each stored once (interned): their bytes in a heap, an open-addressing
 * hash table over them. Grants are grouped by subject, in file order within a subject.
 *
 * Layout of the SharedArrayBuffer ({@link CompactPolicyData}; S subjects, L labels, G grants, the
 * tables a power of two of at least twice the entries they hold):
 *
 * | Int32 section        | what                                                          |
 * | -------------------- | ------------------------------------------------------------- |
 * | subjectTable: sT     | subject number + 1 per slot, 0 = empty                        |
 * | subjectHash: S       | FNV-1a of each subject's bytes                                |
 * | subjectEnd: S        | end offset of each subject in the heap (the first starts at 0) |
 * | grantEnd: S          | end of each subject's grants in grantLabel (the first at 0)   |
 * | labelTable: lT       | label number + 1 per slot, 0 = empty                          |
 * | labelHash: L         | FNV-1a of each label's bytes                                  |
 * | labelEnd: L          | end offset of each label in the heap (after the subjects)     |
 * | labelFirstLine: L    | line of the label's first grant                               |
 * | grantLabel: G        | each grant's label number                                     |
 * | grantLine: G         | each grant's line in the file                                 |
 * | then the heap bytes  | subjects, then labels                                         |
 *
 * With one label per subject (most policies), a grant costs its subject's bytes plus about 28–36
 * bytes (lib/policy/README.md has the measured figure).
 *
 * @example
 * ```ts
 * const b = new CompactPolicyBuilder();
 * b.add(new TextEncoder().encode("CN=a\tk"), 0, 4, 5, 6, 1);
 * new CompactPolicy(b.finish()).allows("CN=a", "k"); // → true
 * ```
 */

/** A built policy as plain data: one SharedArrayBuffer and the counts that lay it out. */
export interface CompactPolicyData {
  buffer: SharedArrayBuffer;
  subjects: number;
  labels: number;
  grants: number;
  subjectTableSize: number;
  labelTableSize: number;
}

/** FNV-1a over `text`'s chars `[start, end)` (latin1: one char per byte, as {@link hashBytes}). */
function hashChars(text: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** FNV-1a over `bytes[start, end)`. */
function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h | 0;
}

/** Table size for `n` entries: a power of two, at least 2n, at least 16. */
function tableSizeFor(n: number): number {
  let size = 16;
  while (size < 2 * n) size *= 2;
  return size;
}

/** A growable Int32Array. */
class Int32List {
  a: Int32Array;
  length = 0;
  constructor(capacity = 1024) {
    this.a = new Int32Array(Math.max(16, capacity));
  }
  push(v: number): void {
    if (this.length === this.a.length) this.#grow(this.length + 1);
    this.a[this.length++] = v;
  }
  #grow(min: number): void {
    const next = new Int32Array(Math.max(min, this.a.length * 2));
    next.set(this.a);
    this.a = next;
  }
}

/**
 * Byte strings stored once each: a heap, their hashes and an open-addressing table over them. A
 * table slot holds the entry number + 1 and its hash side by side, so a probe reads one cache line.
 */
class InternTable {
  heap: Uint8Array;
  heapUsed = 0;
  hashes: Int32List;
  ends: Int32List;
  /** Slot pairs: entry + 1 (0 = empty), hash. */
  table: Int32Array;

  /** Sized for `entries` of `heapBytes` in all, so that many need no growth (a pause each). */
  constructor(entries: number, heapBytes: number) {
    this.heap = new Uint8Array(Math.max(1 << 12, heapBytes));
    this.hashes = new Int32List(entries);
    this.ends = new Int32List(entries);
    this.table = new Int32Array(2 * tableSizeFor(entries));
  }

  get count(): number {
    return this.ends.length;
  }

  /** The number of `bytes[start, end)` if it is stored already, else `~number` of the new entry. */
  intern(bytes: Uint8Array, start: number, end: number): number {
    const hash = hashBytes(bytes, start, end);
    const table = this.table;
    const mask = (table.length >> 1) - 1;
    let slot = hash & mask;
    for (let entry; (entry = table[2 * slot]) !== 0; slot = (slot + 1) & mask) {
      if (table[2 * slot + 1] === hash && this.#equals(entry - 1, bytes, start, end)) {
        return entry - 1;
      }
    }
    const index = this.count;
    const length = end - start;
    if (this.heapUsed + length > this.heap.length) {
      const next = new Uint8Array(Math.max(this.heapUsed + length, this.heap.length * 2));
      next.set(this.heap.subarray(0, this.heapUsed));
      this.heap = next;
    }
    this.heap.set(bytes.subarray(start, end), this.heapUsed);
    this.heapUsed += length;
    this.hashes.push(hash);
    this.ends.push(this.heapUsed);
    if (4 * (index + 1) > table.length) this.#rehash(table.length * 2);
    else {
      table[2 * slot] = index + 1;
      table[2 * slot + 1] = hash;
    }
    return ~index;
  }

  #equals(index: number, bytes: Uint8Array, start: number, end: number): boolean {
    const from = index === 0 ? 0 : this.ends.a[index - 1];
    if (this.ends.a[index] - from !== end - start) return false;
    for (let i = start, at = from; i < end; i++, at++) {
      if (this.heap[at] !== bytes[i]) return false;
    }
    return true;
  }

  #rehash(size: number): void {
    const table = this.table = new Int32Array(size);
    const mask = (size >> 1) - 1;
    for (let i = 0; i < this.count; i++) {
      const hash = this.hashes.a[i];
      let slot = hash & mask;
      while (table[2 * slot] !== 0) slot = (slot + 1) & mask;
      table[2 * slot] = i + 1;
      table[2 * slot + 1] = hash;
    }
  }
}

/** A policy line's usual length: a distinguished name, a TAB, a label. */
const BYTES_PER_LINE_GUESS = 40;

/**
 * Collects grants as the parser finds them (ranges of the file's bytes, so the usual line
 * makes no string), then lays them out in one SharedArrayBuffer.
 *
 * @example
 * ```ts
 * const b = new CompactPolicyBuilder();
 * const line = new TextEncoder().encode("CN=a\tk");
 * b.add(line, 0, 4, 5, 6, 1); // → 0 (a new grant)
 * b.add(line, 0, 4, 5, 6, 2); // → 1 (the line it duplicates)
 * ```
 */
export class CompactPolicyBuilder {
  #subjects: InternTable;
  #labels: InternTable;
  #labelFirstLine = new Int32List();
  #grantSubject: Int32List;
  #grantLabel: Int32List;
  #grantLine: Int32List;
  /** Each subject's first grant; its second and later grants are found in #pairs. */
  #firstGrant: Int32List;
  /** Whether the subject has more than one grant (then all of them are in #pairs). */
  #several: Uint8Array;
  /** (subject, label) pairs of subjects with several grants: grant number + 1 per slot. */
  #pairs = new Int32Array(16);
  #pairCount = 0;

  /**
   * Sized for a file of `fileBytes`: about one grant per {@link BYTES_PER_LINE_GUESS} bytes, so a
   * usual file never grows a table (each growth is a pause of the event loop) while it is parsed.
   */
  constructor(fileBytes = 0) {
    const grants = Math.ceil(fileBytes / BYTES_PER_LINE_GUESS);
    this.#subjects = new InternTable(grants, fileBytes);
    this.#labels = new InternTable(16, 1 << 12);
    this.#grantSubject = new Int32List(grants);
    this.#grantLabel = new Int32List(grants);
    this.#grantLine = new Int32List(grants);
    this.#firstGrant = new Int32List(grants);
    this.#several = new Uint8Array(Math.max(1024, grants));
  }

  /** Grants added (duplicates are not). */
  get grants(): number {
    return this.#grantLine.length;
  }

  /**
   * Adds the grant of subject `bytes[subjectStart, subjectEnd)` and label `bytes[labelStart,
   * labelEnd)` on `line`; 0 when it is new, else the line of the same grant seen before.
   */
  add(
    bytes: Uint8Array,
    subjectStart: number,
    subjectEnd: number,
    labelStart: number,
    labelEnd: number,
    line: number,
  ): number {
    let subject = this.#subjects.intern(bytes, subjectStart, subjectEnd);
    let label = this.#labels.intern(bytes, labelStart, labelEnd);
    if (label < 0) {
      label = ~label;
      this.#labelFirstLine.push(line);
    }
    const grant = this.grants;
    if (subject < 0) {
      // A new subject: its first grant cannot be a duplicate, and needs no pair entry yet.
      subject = ~subject;
      this.#firstGrant.push(grant);
      if (subject >= this.#several.length) {
        const next = new Uint8Array(this.#several.length * 2);
        next.set(this.#several);
        this.#several = next;
      }
    } else if (this.#several[subject] === 0) {
      const first = this.#firstGrant.a[subject];
      if (this.#grantLabel.a[first] === label) return this.#grantLine.a[first];
      this.#several[subject] = 1;
      this.#addPair(first);
    } else {
      const mask = this.#pairs.length - 1;
      let slot = pairHash(subject, label) & mask;
      for (let entry; (entry = this.#pairs[slot]) !== 0; slot = (slot + 1) & mask) {
        if (
          this.#grantSubject.a[entry - 1] === subject && this.#grantLabel.a[entry - 1] === label
        ) return this.#grantLine.a[entry - 1];
      }
    }
    this.#grantSubject.push(subject);
    this.#grantLabel.push(label);
    this.#grantLine.push(line);
    if (this.#several[subject] === 1) this.#addPair(grant);
    return 0;
  }

  #addPair(grant: number): void {
    if (2 * (this.#pairCount + 1) > this.#pairs.length) this.#rehashPairs(this.#pairs.length * 2);
    this.#placePair(grant);
    this.#pairCount++;
  }

  #placePair(grant: number): void {
    const mask = this.#pairs.length - 1;
    let slot = pairHash(this.#grantSubject.a[grant], this.#grantLabel.a[grant]) & mask;
    while (this.#pairs[slot] !== 0) slot = (slot + 1) & mask;
    this.#pairs[slot] = grant + 1;
  }

  #rehashPairs(size: number): void {
    const old = this.#pairs;
    this.#pairs = new Int32Array(size);
    for (const entry of old) if (entry !== 0) this.#placePair(entry - 1);
  }

  /** Lays the grants out in shared memory: the built policy. Call it once, after the last add. */
  finish(): CompactPolicyData {
    this.#pairs = new Int32Array(0);
    const S = this.#subjects.count, L = this.#labels.count, G = this.grants;
    const sT = tableSizeFor(S), lT = tableSizeFor(L);
    const ints = sT + 3 * S + lT + 3 * L + 2 * G;
    const heapBytes = this.#subjects.heapUsed + this.#labels.heapUsed;
    const buffer = new SharedArrayBuffer(4 * ints + heapBytes);
    const data: CompactPolicyData = {
      buffer,
      subjects: S,
      labels: L,
      grants: G,
      subjectTableSize: sT,
      labelTableSize: lT,
    };
    const v = viewsOf(data);
    v.heap.set(this.#subjects.heap.subarray(0, this.#subjects.heapUsed), 0);
    const labelBase = this.#subjects.heapUsed;
    v.heap.set(this.#labels.heap.subarray(0, this.#labels.heapUsed), labelBase);
    v.subjectHash.set(this.#subjects.hashes.a.subarray(0, S));
    v.subjectEnd.set(this.#subjects.ends.a.subarray(0, S));
    v.labelHash.set(this.#labels.hashes.a.subarray(0, L));
    v.labelFirstLine.set(this.#labelFirstLine.a.subarray(0, L));
    for (let l = 0; l < L; l++) v.labelEnd[l] = labelBase + this.#labels.ends.a[l];
    placeAll(v.subjectTable, v.subjectHash);
    placeAll(v.labelTable, v.labelHash);
    // Group the grants by subject, file order kept within a subject (a counting sort).
    const subjectOf = this.#grantSubject.a;
    for (let g = 0; g < G; g++) v.grantEnd[subjectOf[g]]++;
    for (let s = 1; s < S; s++) v.grantEnd[s] += v.grantEnd[s - 1];
    const next = new Int32Array(S);
    for (let s = 1; s < S; s++) next[s] = v.grantEnd[s - 1];
    for (let g = 0; g < G; g++) {
      const at = next[subjectOf[g]]++;
      v.grantLabel[at] = this.#grantLabel.a[g];
      v.grantLine[at] = this.#grantLine.a[g];
    }
    return data;
  }
}

function pairHash(subject: number, label: number): number {
  return Math.imul(subject, 0x9e3779b1) ^ Math.imul(label + 1, 0x85ebca6b);
}

function placeAll(table: Int32Array, hashes: Int32Array): void {
  const mask = table.length - 1;
  for (let i = 0; i < hashes.length; i++) {
    let slot = hashes[i] & mask;
    while (table[slot] !== 0) slot = (slot + 1) & mask;
    table[slot] = i + 1;
  }
}

interface Views {
  subjectTable: Int32Array;
  subjectHash: Int32Array;
  subjectEnd: Int32Array;
  grantEnd: Int32Array;
  labelTable: Int32Array;
  labelHash: Int32Array;
  labelEnd: Int32Array;
  labelFirstLine: Int32Array;
  grantLabel: Int32Array;
  grantLine: Int32Array;
  heap: Uint8Array;
}

function viewsOf(d: CompactPolicyData): Views {
  let at = 0;
  const ints = (n: number) => {
    const view = new Int32Array(d.buffer, at, n);
    at += 4 * n;
    return view;
  };
  const S = d.subjects, L = d.labels, G = d.grants;
  const v = {
    subjectTable: ints(d.subjectTableSize),
    subjectHash: ints(S),
    subjectEnd: ints(S),
    grantEnd: ints(S),
    labelTable: ints(d.labelTableSize),
    labelHash: ints(L),
    labelEnd: ints(L),
    labelFirstLine: ints(L),
    grantLabel: ints(G),
    grantLine: ints(G),
  };
  return { ...v, heap: new Uint8Array(d.buffer, at) };
}

/**
 * Reads a built policy: which labels a subject may use. Never writes; any number of isolates may
 * read the same buffer.
 *
 * @example
 * ```ts
 * declare const data: CompactPolicyData;
 * new CompactPolicy(data).labelsFor("CN=a"); // → ["k"]
 * ```
 */
export class CompactPolicy {
  readonly #v: Views;
  constructor(readonly data: CompactPolicyData) {
    this.#v = viewsOf(data);
  }

  /** Whether `subject` may use `label`, both latin1 strings compared byte for byte. */
  allows(subject: string, label: string): boolean {
    const s = this.#find(subject, this.#v.subjectTable, this.#v.subjectHash, this.#v.subjectEnd, 0);
    if (s < 0) return false;
    const l = this.#find(label, this.#v.labelTable, this.#v.labelHash, this.#v.labelEnd, -1);
    if (l < 0) return false;
    const { grantLabel, grantEnd } = this.#v;
    for (let g = s === 0 ? 0 : grantEnd[s - 1]; g < grantEnd[s]; g++) {
      if (grantLabel[g] === l) return true;
    }
    return false;
  }

  /** The labels granted to `subject`, in file order. */
  labelsFor(subject: string): string[] {
    const s = this.#find(subject, this.#v.subjectTable, this.#v.subjectHash, this.#v.subjectEnd, 0);
    if (s < 0) return [];
    const out: string[] = [];
    for (let g = s === 0 ? 0 : this.#v.grantEnd[s - 1]; g < this.#v.grantEnd[s]; g++) {
      out.push(this.#label(this.#v.grantLabel[g]));
    }
    return out;
  }

  /** Every label once, with the line of its first grant, in file order. */
  grantedLabels(): Array<{ label: string; line: number }> {
    const out: Array<{ label: string; line: number }> = [];
    for (let l = 0; l < this.data.labels; l++) {
      out.push({ label: this.#label(l), line: this.#v.labelFirstLine[l] });
    }
    return out.sort((a, b) => a.line - b.line);
  }

  /** Every grant in file order (for tests and tools; a large policy makes as many objects). */
  grantsInFileOrder(): Array<{ subject: string; label: string; line: number }> {
    const out: Array<{ subject: string; label: string; line: number }> = [];
    const { grantEnd, grantLabel, grantLine } = this.#v;
    for (let s = 0; s < this.data.subjects; s++) {
      const subject = this.#bytes(s === 0 ? 0 : this.#v.subjectEnd[s - 1], this.#v.subjectEnd[s]);
      for (let g = s === 0 ? 0 : grantEnd[s - 1]; g < grantEnd[s]; g++) {
        out.push({ subject, label: this.#label(grantLabel[g]), line: grantLine[g] });
      }
    }
    return out.sort((a, b) => a.line - b.line);
  }

  #label(l: number): string {
    const from = l === 0 ? this.#labelBase() : this.#v.labelEnd[l - 1];
    return this.#bytes(from, this.#v.labelEnd[l]);
  }

  #labelBase(): number {
    return this.data.subjects === 0 ? 0 : this.#v.subjectEnd[this.data.subjects - 1];
  }

  #bytes(from: number, to: number): string {
    let out = "";
    for (let i = from; i < to; i++) out += String.fromCharCode(this.#v.heap[i]);
    return out;
  }

  /** The number of `text` in one of the two interned sets, or -1. */
  #find(
    text: string,
    table: Int32Array,
    hashes: Int32Array,
    ends: Int32Array,
    base: number,
  ): number {
    const hash = hashChars(text, 0, text.length);
    const mask = table.length - 1;
    for (let slot = hash & mask;; slot = (slot + 1) & mask) {
      const entry = table[slot];
      if (entry === 0) return -1;
      const i = entry - 1;
      if (hashes[i] !== hash) continue;
      const from = i === 0 ? (base < 0 ? this.#labelBase() : 0) : ends[i - 1];
      if (ends[i] - from !== text.length) continue;
      let same = true;
      for (let k = 0; k < text.length && same; k++) {
        same = this.#v.heap[from + k] === text.charCodeAt(k);
      }
      if (same) return i;
    }
  }
}
