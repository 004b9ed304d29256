import assert from "node:assert/strict";
import { withTempDir } from "../../tests/support/ocsp.ts";
import { formatIndexLine } from "./index_db.ts";
import { IndexFileSource } from "./index_source.ts";
import { createIndexMemory, H, type IndexMemory } from "./index_compact.ts";
import type { IndexWorkerQuestion } from "../../tests/support/index_source_worker.ts";
import { IndexCounts } from "../../tests/support/index_counts.ts";

const EXP = Date.UTC(2035, 5, 30, 12, 0, 0);
const REV = Date.UTC(2026, 0, 2, 3, 4, 5);

const withDir = (fn: (dir: string) => Promise<void> | void) => withTempDir("ocsp-idx-", fn);

for (const coarseTimes of [false, true]) {
  const times = coarseTimes ? "Deno's millisecond times" : "statx's nanosecond times";
  Deno.test(`index source (${times}): a same-size rewrite in the same instant is seen next`, () =>
    sameInstantRewrite(coarseTimes));
}

Deno.test("index source: queries after a change do not read the file again", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    const line = (status: "V" | "R") =>
      formatIndexLine({
        status,
        expires: EXP,
        ...(status === "R" ? { revokedAt: REV } : {}),
        serial: "0C",
        subject: "/CN=a",
      });
    Deno.writeTextFileSync(path, line("V"));
    const counts = new IndexCounts();
    const source = new IndexFileSource(path, { observer: counts });
    assert.equal((await source.current())!.lookup("C")!.status, "V");
    // A revocation as `openssl ca` writes it (a new file renamed over the old), then queries
    // at once, while the file is younger than any window in which a rewrite could hide.
    Deno.writeTextFileSync(`${path}.new`, line("R"));
    Deno.renameSync(`${path}.new`, path);
    const reads = counts.reads;
    const revoked = (await source.current())!;
    assert.equal(revoked.lookup("C")!.status, "R");
    for (let i = 0; i < 50; i++) assert.equal(await source.current(), revoked);
    assert.equal(counts.reads, reads + 1, "the change was read once");
    assert.equal(counts.parses, 2);
  }));

function sameInstantRewrite(coarseTimes: boolean) {
  return withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    const v = formatIndexLine({ status: "V", expires: EXP, serial: "01", subject: "/CN=a" });
    const r = formatIndexLine({
      status: "R",
      expires: EXP,
      revokedAt: REV,
      serial: "01",
      subject: "/CN=a",
    });
    Deno.writeTextFileSync(path, v);
    const counts = new IndexCounts();
    const source = new IndexFileSource(path, { coarseTimes, observer: counts });
    const first = (await source.current())!;
    assert.equal(first.lookup("1")!.status, "V");
    // Same inode, same size (revocation field replaces nothing: pad V's line to R's length),
    // written back at once: mtime (ms) and ctime (s) can be unchanged.
    const padded = v.replace("/CN=a", "/CN=a" + " ".repeat(r.length - v.length));
    Deno.writeTextFileSync(path, padded);
    const second = (await source.current())!;
    assert.notEqual(second.version, first.version);
    const before = Deno.statSync(path);
    const f = Deno.openSync(path, { write: true });
    f.writeSync(new TextEncoder().encode(r));
    f.close();
    // Put mtime back: only the content (and a ctime Deno reports in whole seconds) differ.
    Deno.utimeSync(path, before.atime!, before.mtime!);
    const after = Deno.statSync(path);
    assert.deepEqual([after.ino, after.size, after.mtime], [before.ino, before.size, before.mtime]);
    const third = (await source.current())!;
    assert.equal(third.lookup("01")!.status, "R");
    assert.equal(third.lookup("0001")!.revokedAt, REV);
    // Unchanged: same snapshot, no re-parse.
    const parses = counts.parses;
    assert.equal((await source.current())!.version, third.version);
    assert.equal(counts.parses, parses);
  });
}

Deno.test("index source: a check begun after a query arrived answers for it", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    Deno.writeTextFileSync(
      path,
      formatIndexLine({ status: "V", expires: EXP, serial: "0D", subject: "/CN=a" }),
    );
    // Changed "in the future": with coarse times every query needs a content check.
    const later = new Date(Date.now() + 600_000);
    Deno.utimeSync(path, later, later);
    const memory = createIndexMemory(10);
    const counts = new IndexCounts();
    const [a, b] = [0, 1].map(() =>
      new IndexFileSource(path, { memory, coarseTimes: true, observer: counts })
    );
    assert.equal((await a.current())!.lookup("D")!.status, "V");
    const i32 = new Int32Array(memory.buffer, 0, 16);
    Atomics.store(i32, H.state, 1); // as if another thread were checking the file
    const waiting = b.current();
    assert.ok(waiting instanceof Promise, "waits for the check under way");
    Atomics.store(i32, H.state, 0);
    Atomics.notify(i32, H.state);
    // Before b's wait ends, a check begins (and ends) after b's query arrived.
    const reads = counts.reads;
    assert.equal((await a.current())!.lookup("D")!.status, "V");
    assert.equal(counts.reads, reads + 1, "a's query checked the content");
    // Deno does not count a pending Atomics.waitAsync as work: a timer keeps the loop running.
    const alive = setInterval(() => {}, 1000);
    try {
      assert.equal((await waiting)!.lookup("D")!.status, "V");
    } finally {
      clearInterval(alive);
    }
    assert.equal(counts.reads, reads + 1, "b's query was answered by a's check");
    // A query arriving now needs a check of its own.
    await b.current();
    assert.equal(counts.reads, reads + 2);
  }));

Deno.test("index source: corrupt or missing → unavailable; restored → answers again", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    const good = formatIndexLine({ status: "V", expires: EXP, serial: "0B", subject: "/CN=a" });
    const reasons: string[] = [];
    const source = new IndexFileSource(path, { onUnavailable: (why) => reasons.push(why) });
    assert.equal(await source.current(), null);
    assert.match(source.lastError!, /cannot stat/);
    Deno.writeTextFileSync(path, good);
    assert.equal((await source.current())!.lookup("B")!.status, "V");
    Deno.writeTextFileSync(path, good + "garbage\n");
    assert.equal(await source.current(), null, "never answers from a file that stopped parsing");
    assert.equal(await source.current(), null);
    assert.match(source.lastError!, /line 2/);
    Deno.writeTextFileSync(path, good);
    assert.equal((await source.current())!.lookup("B")!.status, "V");
    Deno.writeFileSync(path, Uint8Array.of(0xff, 0xfe, 0x0a));
    assert.equal(await source.current(), null);
    assert.match(source.lastError!, /not UTF-8/);
    assert.equal(reasons.length, 3, reasons.join("\n")); // once per change of state
  }));

Deno.test("index source: more certificates than the limit → unavailable, saying so", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    const line = (serial: string) =>
      formatIndexLine({ status: "V", expires: EXP, serial, subject: "/CN=a" });
    Deno.writeTextFileSync(path, "# two certificates\n" + line("01") + line("02"));
    const fits = new IndexFileSource(path, { maxEntries: 2 });
    assert.equal((await fits.current())!.size, 2);
    assert.equal(fits.overLimit, false);
    const small = new IndexFileSource(path, { maxEntries: 1 });
    assert.equal(await small.current(), null);
    assert.equal(small.overLimit, true);
    assert.match(small.lastError!, /more than 1 certificates, the most --ocsp-max-entries allows/);
    // Serials longer than 20 bytes take more than an entry's share of the memory.
    Deno.writeTextFileSync(path, line("1".repeat(45)));
    const long = new IndexFileSource(path, { maxEntries: 1 });
    assert.equal(await long.current(), null);
    assert.match(long.lastError!, /serials longer than 20 bytes/);
    Deno.writeTextFileSync(path, line("1".repeat(45)) + line("2".repeat(30)));
    const room = new IndexFileSource(path, { maxEntries: 4 });
    assert.equal((await room.current())!.lookup("1".repeat(45))!.status, "V");
  }));

/** Asks a lookup of `worker`; resolves with its answer. */
function ask(worker: Worker, question: IndexWorkerQuestion): Promise<string> {
  return new Promise((resolve, reject) => {
    worker.onmessage = (e) => resolve(e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      reject(new Error(e.message));
    };
    worker.postMessage(question);
  });
}

Deno.test("index source: threads sharing a memory parse each version of the file once", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    const lines = Array.from(
      { length: 20_000 },
      (_, i) =>
        formatIndexLine({
          status: "V",
          expires: EXP,
          serial: (i + 1).toString(16),
          subject: "/CN=a",
        }),
    );
    Deno.writeTextFileSync(path, lines.join(""));
    const memory: IndexMemory = createIndexMemory(100_000);
    const workers = Array.from(
      { length: 2 },
      () =>
        new Worker(new URL("../../tests/support/index_source_worker.ts", import.meta.url), {
          type: "module",
        }),
    );
    const counts = new IndexCounts();
    const here = new IndexFileSource(path, { memory, observer: counts });
    try {
      const all = (serial: string) =>
        Promise.all(workers.map((w) => ask(w, { path, memory, counts: counts.buffer, serial })));
      assert.deepEqual(await all("4E20"), ["V", "V"]);
      assert.equal(counts.parses, 1);
      // A revocation written: the next queries, arriving together, share one re-read.
      lines[19_999] = formatIndexLine({
        status: "R",
        expires: EXP,
        revokedAt: REV,
        serial: "4E20",
        subject: "/CN=a",
      });
      Deno.writeTextFileSync(`${path}.new`, lines.join(""));
      Deno.renameSync(`${path}.new`, path);
      assert.deepEqual(await all("4E20"), ["R", "R"]);
      assert.equal((await here.current())!.lookup("4E20")!.status, "R");
      assert.equal(counts.parses, 2);
    } finally {
      for (const w of workers) w.terminate();
    }
  }));
