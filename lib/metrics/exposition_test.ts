// The text exposition of a registry: label values and help text escaped, series that never
// counted left out only when labelled, histograms cumulative with +Inf equal to _count, a value
// that cannot be read rendered as NaN (never a failed scrape), and `promtool check metrics`
// content with all of it.
import assert from "node:assert/strict";
import { MetricsRegistry } from "./registry.ts";
import { exposition } from "./exposition.ts";
import { assertPromtoolAccepts } from "../../tests/support/metrics.ts";

/** The value of one series line (`name{labels}` exactly); undefined when absent. */
function sample(text: string, series: string): string | undefined {
  const line = text.split("\n").find((l) => l.startsWith(series + " "));
  return line?.slice(series.length + 1);
}

Deno.test("exposition: backslash, quote and newline in a label value and in help are escaped", async () => {
  const r = new MetricsRegistry();
  const odd = r.counter("t_odd_total", "Help with a \\ and a\nnewline.", {
    v: ["back\\slash", 'qu"ote', "new\nline", 'all\\"\n'],
  });
  for (const v of ["back\\slash", 'qu"ote', "new\nline", 'all\\"\n']) odd.inc(odd.slot(v));
  const text = exposition(r);
  assert.ok(text.includes("# HELP t_odd_total Help with a \\\\ and a\\nnewline.\n"), text);
  assert.equal(sample(text, 't_odd_total{v="back\\\\slash"}'), "1", text);
  assert.equal(sample(text, 't_odd_total{v="qu\\"ote"}'), "1", text);
  assert.equal(sample(text, 't_odd_total{v="new\\nline"}'), "1", text);
  assert.equal(sample(text, 't_odd_total{v="all\\\\\\"\\n"}'), "1", text);
  // Every line is one line: no raw newline got through.
  assert.equal(text.split("\n").length, 2 + 4 + 1, text);
  await assertPromtoolAccepts(text);
});

Deno.test("exposition: labelled series that never counted are left out, unlabelled ones shown at 0", () => {
  const r = new MetricsRegistry();
  const labelled = r.counter("t_labelled_total", "Labelled.", { result: ["ok", "failed"] });
  r.counter("t_plain_total", "Unlabelled.");
  r.gauge("t_level", "A gauge.");
  r.histogram("t_empty_seconds", "Unlabelled histogram.", [1]);
  r.histogram("t_labelled_seconds", "Labelled histogram.", [1], { route: ["/a"] });
  let text = exposition(r);
  assert.equal(
    text,
    [
      "# HELP t_labelled_total Labelled.",
      "# TYPE t_labelled_total counter",
      "# HELP t_plain_total Unlabelled.",
      "# TYPE t_plain_total counter",
      "t_plain_total 0",
      "# HELP t_level A gauge.",
      "# TYPE t_level gauge",
      "t_level 0",
      "# HELP t_empty_seconds Unlabelled histogram.",
      "# TYPE t_empty_seconds histogram",
      't_empty_seconds_bucket{le="1"} 0',
      't_empty_seconds_bucket{le="+Inf"} 0',
      "t_empty_seconds_sum 0",
      "t_empty_seconds_count 0",
      "# HELP t_labelled_seconds Labelled histogram.",
      "# TYPE t_labelled_seconds histogram",
      "",
    ].join("\n"),
  );
  labelled.inc(labelled.slot("failed"));
  text = exposition(r);
  assert.equal(sample(text, 't_labelled_total{result="failed"}'), "1");
  assert.equal(sample(text, 't_labelled_total{result="ok"}'), undefined);
  assert.equal(sample(text, 't_labelled_total{result="other"}'), undefined);
});

Deno.test("exposition: histogram buckets are cumulative, +Inf equals _count, _sum the total", async () => {
  const r = new MetricsRegistry();
  const h = r.histogram("t_seconds", "Latency.", [0.001, 0.01, 0.1], { route: ["/a", "/b"] });
  const values = [0.0005, 0.001, 0.005, 0.005, 0.05, 0.2, 3];
  for (const v of values) h.observe(h.slot("/a"), v);
  h.observe(h.slot("/zz"), 0.01);
  const text = exposition(r);
  const bucket = (route: string, le: string) =>
    Number(sample(text, `t_seconds_bucket{route="${route}",le="${le}"}`));
  assert.deepEqual(
    ["0.001", "0.01", "0.1", "+Inf"].map((le) => bucket("/a", le)),
    [2, 4, 5, 7],
  );
  assert.equal(bucket("/a", "+Inf"), Number(sample(text, 't_seconds_count{route="/a"}')));
  assert.equal(
    Number(sample(text, 't_seconds_sum{route="/a"}')),
    values.reduce((a, b) => a + b, 0),
  );
  // The value outside the route set: its own series, under other; /b never observed: left out.
  assert.deepEqual(
    ["0.001", "0.01", "0.1", "+Inf"].map((le) => bucket("other", le)),
    [0, 1, 1, 1],
  );
  assert.equal(sample(text, 't_seconds_count{route="other"}'), "1");
  assert.ok(!text.includes('route="/b"'), text);
  await assertPromtoolAccepts(text, { silent: false });
});

Deno.test("exposition: a reading that fails, is NaN or is not a number is NaN; infinities are ±Inf", async () => {
  const r = new MetricsRegistry();
  r.readAtScrape("t_throws", "Throws.", "gauge", () => {
    throw new Error("/proc unreadable");
  });
  r.readAtScrape("t_nan", "NaN.", "gauge", () => NaN);
  // As process_max_fds reads it when /proc/self/limits has no such line.
  r.readAtScrape("t_undefined", "Undefined.", "gauge", () => Number(undefined));
  r.readAtScrape("t_inf", "Infinite.", "gauge", () => Infinity);
  r.readAtScrape("t_minus_inf", "Minus infinite.", "gauge", () => -Infinity);
  r.readAtScrape("t_read_total", "A counter read.", "counter", () => 7);
  const g = r.gauge("t_set", "Set to NaN.", { k: ["x"] });
  g.set(g.slot("x"), NaN);
  const text = exposition(r);
  assert.equal(sample(text, "t_throws"), "NaN");
  assert.equal(sample(text, "t_nan"), "NaN");
  assert.equal(sample(text, "t_undefined"), "NaN");
  assert.equal(sample(text, "t_inf"), "+Inf");
  assert.equal(sample(text, "t_minus_inf"), "-Inf");
  assert.equal(sample(text, "t_read_total"), "7");
  assert.equal(sample(text, 't_set{k="x"}'), "NaN");
  // Every value is one the format knows (JavaScript's "undefined" or "Infinity" are not).
  for (const line of text.trimEnd().split("\n").filter((l) => !l.startsWith("#"))) {
    assert.match(line, / (NaN|[+-]Inf|-?\d+(\.\d+)?(e[+-]\d+)?)$/, line);
  }
  await assertPromtoolAccepts(text);
});
