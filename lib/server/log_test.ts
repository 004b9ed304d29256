import assert from "node:assert/strict";
import { clientText, DaemonLog, listenerEventText, safeLine } from "./log.ts";

/** A DaemonLog on a hand-moved clock whose timers run only when the test says so. */
function testLog(perSecond = 3) {
  const lines: string[] = [];
  const timers: Array<{ at: number; fn: () => void }> = [];
  let now = 0;
  const log = new DaemonLog({
    perSecond,
    write: (line) => lines.push(line),
    now: () => now,
    later: (fn, ms) => timers.push({ at: now + ms, fn }),
  });
  const advance = (to: number) => {
    now = to;
    for (const t of timers.splice(0)) {
      if (t.at <= now) t.fn();
      else timers.push(t);
    }
  };
  return { log, lines, timers, advance };
}

Deno.test("log: at most perSecond lines of a kind per second, then one line with the count", () => {
  const { log, lines, advance } = testLog(3);
  for (let i = 0; i < 100; i++) log.line("parse_error", `bad request ${i}`);
  log.line("queue_full", "full"); // another kind has its own budget
  assert.deepEqual(lines, [
    "svcd: bad request 0",
    "svcd: bad request 1",
    "svcd: bad request 2",
    "svcd: full",
  ]);
  advance(999);
  assert.equal(lines.length, 4, "no summary before the window ends");
  advance(1000);
  assert.deepEqual(lines.slice(4), [
    "svcd: parse_error: suppressed 97 similar message(s) within one second",
  ]);
  log.line("parse_error", "again");
  assert.equal(lines.at(-1), "svcd: again", "a new window writes again");
});

Deno.test("log: a line after the window summarises it first; flush writes what is pending", () => {
  const { log, lines, advance } = testLog(1);
  log.line("k", "one");
  log.line("k", "two");
  log.line("k", "three");
  advance(2500); // the timer fires at 1000 and summarises
  log.line("k", "four");
  log.line("k", "five");
  log.flush();
  assert.deepEqual(lines, [
    "svcd: one",
    "svcd: k: suppressed 2 similar message(s) within one second",
    "svcd: four",
    "svcd: k: suppressed 1 similar message(s) within one second",
  ]);
  log.flush();
  assert.equal(lines.length, 4, "nothing is counted twice");
});

Deno.test("log: the count of written and suppressed lines is every line logged", () => {
  const { log, lines, advance } = testLog(5);
  let t = 0;
  for (let i = 0; i < 10_000; i++) {
    if (i % 37 === 0) advance(t += 113);
    log.line("deadline", "x");
  }
  log.flush();
  const written = lines.filter((l) => l === "svcd: x").length;
  const suppressed = lines
    .map((l) => /suppressed (\d+)/.exec(l)?.[1])
    .reduce((sum, n) => sum + (n ? Number(n) : 0), 0);
  assert.equal(written + suppressed, 10_000);
  assert.ok(written <= 5 * Math.ceil(t / 1000 + 1), `${written} lines in ${t} ms`);
});

Deno.test("clientText: quotes, and escapes C0, DEL, C1, non-ASCII bytes, quotes and backslashes", () => {
  assert.equal(clientText("/sign"), '"/sign"');
  assert.equal(clientText('a"b\\c'), '"a\\"b\\\\c"');
  assert.equal(clientText("\x00\x1b[31m\r\n\x7f"), '"\\x00\\x1b[31m\\x0d\\x0a\\x7f"');
  assert.equal(clientText("\x80\x85\x9b\xa0\xc3\xa9\xff"), '"\\x80\\x85\\x9b\\xa0\\xc3\\xa9\\xff"');
  assert.equal(clientText("\u2028\ud800"), '"\\u2028\\ud800"');
  for (let c = 0; c < 0x800; c++) {
    const out = clientText(String.fromCharCode(c));
    assert.match(out, /^"[\x20-\x7e]+"$/, `U+${c.toString(16)} → ${out}`);
  }
});

Deno.test("safeLine: no control character or lone surrogate survives; readable text does", () => {
  assert.equal(safeLine("a\nb\rc\td"), "a\\u000ab\\u000dc\\u0009d");
  assert.equal(safeLine("\x7f\x80\x85\x9f"), "\\u007f\\u0080\\u0085\\u009f");
  assert.equal(safeLine("\u2028\u2029"), "\\u2028\\u2029");
  assert.equal(safeLine("x\ud800y\udc00z"), "x\\ud800y\\udc00z");
  assert.equal(safeLine("é — ✓ 😀 \xa0"), "é — ✓ 😀 \xa0");
});

Deno.test("a log line never holds a control character, whatever the message", () => {
  const { log, lines } = testLog(1000);
  for (let c = 0; c < 0x100; c++) log.line("k", `x${String.fromCharCode(c)}y`);
  // deno-lint-ignore no-control-regex
  for (const line of lines) assert.doesNotMatch(line, /[\x00-\x1f\x7f-\x9f]/);
});

Deno.test("listenerEventText: numbers as they are, strings quoted and escaped", () => {
  assert.equal(
    listenerEventText({ kind: "parse_error", status: 400, detail: 'got "GET /\x85 HTTP/1.1"' }),
    'listener parse_error: status=400 detail="got \\"GET /\\x85 HTTP/1.1\\""',
  );
  assert.equal(
    listenerEventText({ kind: "deadline", phase: "first_byte", ms: 1000 }),
    'listener deadline: phase="first_byte" ms=1000',
  );
});
