import assert from "node:assert/strict";
import {
  canonicalSerial,
  formatIndexLine,
  type IndexEntry,
  parseIndex,
  REASON_NAME,
} from "./index_db.ts";
import { CompactIndex, createIndexMemory, loadIndex, loadIndexBytes } from "./index_compact.ts";
import { ChunkedReader, type IndexReader } from "./_index_reader.ts";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";

/** A seeded generator, so a failure names a case that can be run again. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const HOLDS = ["holdInstruction,holdInstructionReject", "HOLDINSTRUCTION,1.2.840.10040.2.2"];
const TIMED = ["keyTime,20251231000000Z", "CAkeyTime,19991231235959Z"];
const SUBJECTS = ["/CN=a", "/C=DE/O=Müller GmbH/CN=ü", "", "/CN=with space\u0001", "/CN=日本"];

/** A valid index of `lines` lines: every status, reason form, serial length and time form. */
function generate(random: () => number, lines: number): string {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)];
  const used = new Set<string>();
  const out: string[] = [];
  for (let i = 0; i < lines; i++) {
    if (random() < 0.05) {
      out.push(`#${pick(SUBJECTS)}\n`);
      continue;
    }
    let serial: string;
    do {
      const zeros = "0".repeat(Math.floor(random() * 3));
      const digits = Math.floor(random() * (random() < 0.1 ? 60 : 40)) + 1;
      serial = zeros +
        Array.from({ length: digits }, () => "0123456789ABCDEF"[Math.floor(random() * 16)])
          .join("");
    } while (used.has(canonicalSerial(serial)));
    used.add(canonicalSerial(serial));
    const status = pick(["V", "R", "E"] as const);
    const expires = random() < 0.2 ? Date.UTC(2050 + Math.floor(random() * 100), 1, 28) : Date.UTC(
      1950 + Math.floor(random() * 100),
      Math.floor(random() * 12),
      1 + Math.floor(random() * 28),
      23,
      59,
      59,
    );
    const subject = pick(SUBJECTS);
    if (status !== "R") {
      out.push(formatIndexLine({ status, expires, serial, subject }));
      continue;
    }
    const revokedAt = Date.UTC(
      1950 + Math.floor(random() * 100),
      1,
      29 - (random() < 0.5 ? 0 : 1),
      12,
    );
    const safeRevokedAt = new Date(revokedAt).getUTCMonth() === 1
      ? revokedAt
      : revokedAt - 86400_000;
    const line = formatIndexLine({ status, expires, revokedAt: safeRevokedAt, serial, subject });
    const r = random();
    const reason = r < 0.3
      ? ""
      : r < 0.8
      ? `,${pick(Object.values(REASON_NAME))}`
      : r < 0.9
      ? `,${pick(HOLDS)}`
      : `,${pick(TIMED)}`;
    const fields = line.split("\t");
    fields[2] += random() < 0.2 ? reason.replace(/^,\w+/, (name) => name.toUpperCase()) : reason;
    out.push(fields.join("\t"));
  }
  return out.join("");
}

type Outcome = { error: string } | { entries: Map<string, unknown> };

function reference(text: string): Outcome {
  let entries: IndexEntry[];
  try {
    entries = parseIndex(text);
  } catch (e) {
    return { error: (e as Error).message };
  }
  return {
    entries: new Map(entries.map((e) => [canonicalSerial(e.serial), summary(e)])),
  };
}

function summary(e: { status: string; revokedAt?: number; reason?: number }): unknown {
  return e.status === "R"
    ? { status: e.status, revokedAt: e.revokedAt, reason: e.reason }
    : { status: e.status };
}

const memory = createIndexMemory(2000);

const FILE = `${moduleTempDir("svcd-index-compact-")}/index.txt`;

/**
 * Chunk sizes for a ChunkedReader: shorter than most lines (each such line is read whole), a few
 * lines, many lines; each gives lines that straddle two chunks.
 */
const CHUNKS = [64, 256, 4096];

/** The outcome of loading `bytes`, the same whether loaded whole or from a file in chunks. */
function compact(bytes: Uint8Array, serials: Iterable<string>): Outcome {
  const asked = [...serials];
  const whole = outcomeOf(() => loadIndexBytes(memory, bytes), asked);
  Deno.writeFileSync(FILE, bytes);
  let longest = 0;
  for (let at = 0, next; at < bytes.length; at = next) {
    next = bytes.indexOf(0x0a, at) + 1 || bytes.length;
    longest = Math.max(longest, next - at);
  }
  for (const chunk of CHUNKS) {
    let readWhole = 0;
    const read = outcomeOf(() => {
      using file = Deno.openSync(FILE);
      const reader = new CountedReader(file, chunk);
      try {
        return loadIndex(memory, reader);
      } finally {
        readWhole = reader.wholeReads;
      }
    }, asked);
    assert.deepEqual(read, whole, `the file read in chunks of ${chunk} bytes`);
    // Read again whole only for an error's message, or for a line longer than a chunk.
    if ("entries" in whole && longest <= chunk) assert.equal(readWhole, 0, `chunks of ${chunk}`);
    if ("error" in whole) assert.equal(readWhole, 1, `chunks of ${chunk}`);
  }
  return whole;
}

/** A file read in chunks that counts the loader's asking for it whole. */
class CountedReader implements IndexReader {
  wholeReads = 0;
  readonly #chunks: ChunkedReader;

  constructor(file: Deno.FsFile, chunkBytes: number) {
    this.#chunks = new ChunkedReader(file, chunkBytes);
  }

  next(): Uint8Array | null {
    return this.#chunks.next();
  }

  whole(): Uint8Array {
    this.wholeReads++;
    return this.#chunks.whole();
  }
}

function outcomeOf(load: () => number, serials: string[]): Outcome {
  try {
    load();
  } catch (e) {
    return { error: (e as Error).message };
  }
  const index = new CompactIndex(memory);
  const entries = new Map<string, unknown>();
  for (const s of serials) {
    const found = index.find(s);
    if (found) entries.set(s, summary(found));
  }
  assert.equal(index.size, entries.size, "every entry found by its canonical serial");
  return { entries };
}

function same(text: string, bytes = new TextEncoder().encode(text), label = ""): void {
  const want = reference(new TextDecoderOrError().decode(bytes));
  const serials = "entries" in want ? want.entries.keys() : [];
  const got = compact(bytes, serials);
  assert.deepEqual(got, want, label);
}

/** The line-by-line reader's whole-file UTF-8 check, as IndexFileSource reports it. */
class TextDecoderOrError {
  decode(bytes: Uint8Array): string {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      return "\u0000not utf-8";
    }
  }
}

Deno.test("compact index: answers exactly as the line-by-line reader over generated files", () => {
  for (let seed = 1; seed <= 40; seed++) {
    const text = generate(rng(seed), 200);
    same(text, undefined, `seed ${seed}`);
    const outcome = reference(text);
    assert.ok("entries" in outcome, JSON.stringify(outcome));
    const entries = outcome.entries;
    const index = new CompactIndex(memory);
    // Serials asked with leading zeros, in lower case, and ones not in the file.
    for (const serial of [...entries.keys()].slice(0, 20)) {
      assert.deepEqual(summary(index.find(`000${serial.toLowerCase()}`)!), entries.get(serial));
    }
    for (const absent of ["FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF", "0", "zz", ""]) {
      if (!entries.has(canonicalSerial(absent))) assert.equal(index.find(absent), undefined);
    }
  }
});

const DAMAGE: Array<(line: string, random: () => number) => string> = [
  (l, r) => {
    const at = Math.floor(r() * (l.length - 1));
    return l.slice(0, at) + "\t" + l.slice(at);
  },
  (l, r) => {
    const at = Math.floor(r() * (l.length - 1));
    return l.slice(0, at) + l.slice(at + 1);
  },
  (l, r) => {
    const at = Math.floor(r() * (l.length - 1));
    const chars = "0aZ9,:x\r#  GR1";
    return l.slice(0, at) + chars[Math.floor(r() * chars.length)] + l.slice(at + 1);
  },
  (l) => l.replace(/\t([0-9A-F]+)\t/, (_, s: string) => `\t${s.toLowerCase()}\t`),
  (l) => l.replace(/Z/, "9Z"),
  (l) => l.replace(/\d\dZ/, "60Z"),
  (l) => l.replace(/^(\w\t\d\d)\d\d/, "$102"),
  () => "\n",
  (l) => l.slice(0, -1) + "\tmore\n",
];

Deno.test("compact index: a damaged line anywhere is refused as the line-by-line reader refuses it", () => {
  let refused = 0;
  for (let seed = 1; seed <= 300; seed++) {
    const random = rng(seed);
    const lines = generate(random, 60).split(/(?<=\n)/);
    const at = Math.floor(random() * lines.length);
    const damage = DAMAGE[seed % DAMAGE.length];
    lines[at] = damage(lines[at], random);
    // Sometimes also a duplicate serial before or after the damage.
    if (seed % 5 === 0) {
      const from = lines[Math.floor(random() * lines.length)].split("\t")[3];
      const into = Math.floor(random() * lines.length);
      if (from && lines[into].split("\t").length === 6) {
        const f = lines[into].split("\t");
        f[3] = `0${from}`;
        lines[into] = f.join("\t");
      }
    }
    const text = lines.join("");
    same(text, undefined, `seed ${seed}: ${JSON.stringify(lines[at])}`);
    if ("error" in reference(text)) refused++;
  }
  assert.ok(refused > 200, `${refused} of 300 damaged files refused`);
});

Deno.test("compact index: whole-file faults as the line-by-line reader has them", () => {
  const good = "V\t350630120000Z\t\t01\tunknown\t/CN=a\n";
  same(good + good.slice(0, -1));
  same(good.slice(0, -1));
  same("");
  same("# only a comment\n");
  same(good + "#\n" + good.replace("01", "001"));
  same(good.replace("01", "0"));
  same(good.replace("01", "00"));
  same(good.replace("/CN=a", "/CN=a\r"));
  const bad = (bytes: number[]) => Uint8Array.from([...new TextEncoder().encode(good), ...bytes]);
  for (const tail of [[0xff, 0x0a], [0x23, 0xc3, 0x0a], [0x56, 0x09, 0xe2, 0x82, 0x0a]]) {
    const bytes = bad(tail);
    const got = compact(bytes, []);
    assert.deepEqual(got, { error: "not UTF-8 text" });
  }
  // Every time form at its bounds: leap days, GeneralizedTime years below 100 read as 19YY.
  for (
    const expiry of [
      "000229000000Z",
      "040229000000Z",
      "500229000000Z",
      "00000229000000Z",
      "00040229000000Z",
      "20000229000000Z",
      "21000229000000Z",
      "491231235959Z",
      "991301000000Z",
      "990100000000Z",
      "990131240000Z",
      "990131236000Z",
      "990131235960Z",
    ]
  ) {
    same(good.replace("350630120000Z", expiry), undefined, expiry);
    same(`R\t350630120000Z\t${expiry}\t01\tunknown\t/CN=a\n`, undefined, `revoked ${expiry}`);
  }
});

Deno.test("compact index: a reload with the same serials keeps its table; any other is placed anew", () => {
  const line = (status: string, serial: string, revoked = "") =>
    `${status}\t350630120000Z\t${revoked}\t${serial}\tunknown\t/CN=${serial}\n`;
  const serials = ["0A", "0B1", "C2", "D3"];
  const valid = serials.map((s) => line("V", s)).join("");
  const memory = createIndexMemory(100);
  const index = new CompactIndex(memory);
  const loads = [
    (text: string) => loadIndexBytes(memory, new TextEncoder().encode(text)),
    (text: string) => {
      Deno.writeFileSync(FILE, new TextEncoder().encode(text));
      using file = Deno.openSync(FILE);
      return loadIndex(memory, new ChunkedReader(file, 64));
    },
  ];
  for (const load of loads) {
    load(valid);
    // A revocation: one status changes, every serial stays where it was.
    load(valid.replace(line("V", "0B1"), line("R", "0B1", "250101000000Z,keyCompromise")));
    assert.equal(index.find("0B1")?.status, "R");
    assert.equal(index.find("0B1")?.reason, 1);
    for (const s of ["0A", "C2", "D3"]) assert.equal(index.find(s)?.status, "V", s);
    // The same count, one serial another (and one the same digits with a leading digit more).
    load(valid.replace(line("V", "C2"), line("V", "E4")).replace("\t0A\t", "\t10A\t"));
    assert.equal(index.find("C2"), undefined);
    assert.equal(index.find("E4")?.status, "V");
    assert.equal(index.find("0A"), undefined);
    assert.equal(index.find("10A")?.status, "V");
    // Back to the first serials, then a line fewer.
    load(valid);
    for (const s of serials) assert.equal(index.find(s)?.status, "V", s);
    load(valid.replace(line("V", "D3"), ""));
    assert.equal(index.find("D3"), undefined);
    assert.equal(index.size, 3);
  }
});
