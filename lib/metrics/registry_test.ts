// The registry's slots: closed label sets (a value outside counts under `other`), histogram
// buckets (a bound is inclusive), declaration checks, and one shared buffer whose regions are
// written by separate registries (as Workers do) and summed by the one that shared it.
import assert from "node:assert/strict";
import { MetricsRegistry } from "./registry.ts";

/** The same declarations in every registry, as every isolate loads lib/metrics/svcd.ts. */
function declare(r: MetricsRegistry) {
  return {
    requests: r.counter("t_requests_total", "Requests.", {
      listener: ["a", "b"],
      status: ["200", "403"],
    }),
    plain: r.counter("t_plain_total", "Unlabelled."),
    seconds: r.histogram("t_seconds", "Latency.", [0.1, 1]),
  };
}

Deno.test("registry: a label value outside its set counts under other", () => {
  const r = new MetricsRegistry();
  const { requests } = declare(r);
  assert.deepEqual(requests.family.labelValues, [["a", "b", "other"], ["200", "403", "other"]]);
  const other = requests.slot("other", "other");
  for (
    const odd of ["c", "", "A", "a ", '"', "\n", "\\", "\u00e4", "\u2028", "other\n"]
  ) {
    assert.equal(requests.slot(odd, odd), other, JSON.stringify(odd));
  }
  assert.equal(requests.slot("a", "teapot"), requests.slot("a", "other"));
  assert.equal(requests.slot("zz", "403"), requests.slot("other", "403"));
  // A value missing altogether is outside the set too.
  assert.equal(requests.slot("b"), requests.slot("b", "other"));
  // Every series has its own slot, all inside the family.
  const slots = new Set<number>();
  for (const l of ["a", "b", "other"]) {
    for (const s of ["200", "403", "other"]) {
      slots.add(requests.slot(l, s));
    }
  }
  assert.equal(slots.size, 9);
  for (const s of slots) assert.ok(s >= requests.family.base && s < requests.family.base + 9);
});

Deno.test("registry: an observation goes to the first bound ≥ it (bounds inclusive), else +Inf", () => {
  const r = new MetricsRegistry();
  const { seconds } = declare(r);
  const at = seconds.slot();
  for (const v of [0.05, 0.1, 0.5, 1, 1.5, 100]) seconds.observe(at, v);
  // Buckets ≤0.1, ≤1, +Inf (not cumulative in the slots), then the sum.
  assert.deepEqual([...r.cells.subarray(at, at + 4)], [2, 2, 2, 0.05 + 0.1 + 0.5 + 1 + 1.5 + 100]);
});

Deno.test("registry: a bad or repeated metric name is refused when declared", () => {
  const r = new MetricsRegistry();
  declare(r);
  assert.throws(() => r.counter("t_plain_total", "Again."), /t_plain_total twice/);
  for (const bad of ["1x", "x-y", "x y", "", "x\n", "é"]) {
    assert.throws(() => r.gauge(bad, "Bad."), /bad metric name/, JSON.stringify(bad));
    assert.throws(() => r.readAtScrape(bad, "Bad.", "gauge", () => 1), /bad metric name/);
  }
});

Deno.test("registry: Workers' regions of one shared buffer are summed; counts before share stay", () => {
  const main = new MetricsRegistry();
  const m = declare(main);
  m.plain.inc(m.plain.slot(), 5);
  const buffer = main.share(3);
  assert.equal(buffer.byteLength, 8 * main.slots * 3);
  const workers = [1, 2].map((region) => {
    const w = new MetricsRegistry();
    const metrics = declare(w);
    w.attach(buffer, region);
    return metrics;
  });
  m.plain.inc(m.plain.slot());
  workers[0].plain.inc(workers[0].plain.slot(), 10);
  workers[1].plain.inc(workers[1].plain.slot(), 100);
  workers[1].requests.inc(workers[1].requests.slot("b", "403"));
  workers[0].seconds.observe(workers[0].seconds.slot(), 0.5);
  workers[1].seconds.observe(workers[1].seconds.slot(), 0.5);

  // A Worker writes its region only: the main isolate's own cells are untouched.
  assert.equal(main.cells[m.plain.slot()], 6);
  assert.equal(main.cells[m.requests.slot("b", "403")], 0);
  const totals = main.totals();
  assert.equal(totals[m.plain.slot()], 116);
  assert.equal(totals[m.requests.slot("b", "403")], 1);
  const h = m.seconds.slot();
  assert.deepEqual([...totals.subarray(h, h + 4)], [0, 2, 0, 1]);
});

Deno.test("registry: attach refuses region 0, a region past the buffer and a buffer of other slots", () => {
  const main = new MetricsRegistry();
  declare(main);
  const buffer = main.share(3);
  const w = new MetricsRegistry();
  declare(w);
  assert.throws(() => w.attach(buffer, 0), /has no region 0/);
  assert.throws(() => w.attach(buffer, 3), /has no region 3/);
  assert.throws(() => w.attach(buffer, -1), /has no region -1/);
  // A registry that declared something more: its slots do not tile the buffer.
  const other = new MetricsRegistry();
  declare(other);
  other.counter("t_extra_total", "One more slot.");
  assert.throws(() => other.attach(buffer, 1), /has no region 1/);
  // A failed attach leaves the registry counting privately.
  const before = w.cells;
  assert.throws(() => w.attach(buffer, 3));
  assert.equal(w.cells, before);
});

Deno.test("registry: totals without a shared buffer is a copy of this isolate's cells", () => {
  const r = new MetricsRegistry();
  const { plain } = declare(r);
  plain.inc(plain.slot(), 2);
  const totals = r.totals();
  assert.equal(totals[plain.slot()], 2);
  totals[plain.slot()] = 99;
  assert.equal(r.cells[plain.slot()], 2);
});
