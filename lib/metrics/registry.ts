/**
 * Counters, gauges and histograms whose values live in one Float64Array, in slots fixed when the
 * metric is declared: every isolate loads this module and declares the same metrics in the same
 * order, so a slot means the same series everywhere. An increment is one array write.
 *
 * Request Workers are separate isolates. Each writes only its own region of a SharedArrayBuffer
 * (region 0: the main isolate; then one per Worker, {@link attachMetricsBuffer}); the main isolate
 * sums the regions when scraped. So counting needs no message between isolates and no atomic
 * read-modify-write (one writer per region); a scrape may see a count one increment behind. This is
 * cheaper than reporting each event to the main isolate (a postMessage per request) and than a
 * shared slot (Atomics.add, contended across cores).
 *
 * Label values are declared up front (closed sets): a value outside its set counts under `other`.
 * So no label can carry what a client sent (a subject, a key label): the cardinality is fixed.
 *
 * @example
 * ```ts
 * const registry = new MetricsRegistry();
 * const requests = registry.counter("x_requests_total", "Requests.", { status: ["200", "500"] });
 * requests.inc(requests.slot("200"));
 * ```
 */

/** Label name → its allowed values (an `other` value is added to each). */
export type LabelSets = Record<string, readonly string[]>;

/** The kind of a metric family, as the exposition format names it. */
export type MetricType = "counter" | "gauge" | "histogram";

/** One declared metric family. */
export interface Family {
  name: string;
  help: string;
  type: MetricType;
  labelNames: string[];
  labelValues: string[][];
  /** Histogram upper bounds (ascending, without +Inf). */
  buckets: number[];
  /** First slot of the family. */
  base: number;
  /** Slots per series: 1, or buckets + 1 (+Inf) + 1 (sum) for a histogram. */
  width: number;
  /** Gauges whose value is read when scraped (main isolate), instead of slots. */
  read?: () => number;
}

const OTHER = "other";

/**
 * The metrics of one program: declare once at module load, count anywhere.
 *
 * @example
 * ```ts
 * const r = new MetricsRegistry();
 * const h = r.histogram("x_seconds", "Latency.", [0.001, 0.01], {});
 * h.observe(h.slot(), 0.004);
 * ```
 */
export class MetricsRegistry {
  readonly families: Family[] = [];
  #slots = 0;
  /** The slots this isolate writes: a private array until attached to a shared buffer. */
  cells: Float64Array = new Float64Array(0);
  #shared: { buffer: SharedArrayBuffer; regions: number } | undefined;

  /** Slots per region. */
  get slots(): number {
    return this.#slots;
  }

  counter(name: string, help: string, labels: LabelSets = {}): Metric {
    return this.#declare(name, help, "counter", labels, []);
  }

  gauge(name: string, help: string, labels: LabelSets = {}): Metric {
    return this.#declare(name, help, "gauge", labels, []);
  }

  /** A value read when scraped, in the isolate that scrapes (the main one). */
  readAtScrape(name: string, help: string, type: "gauge" | "counter", read: () => number): void {
    checkName(name);
    this.families.push({
      name,
      help,
      type,
      labelNames: [],
      labelValues: [],
      buckets: [],
      base: -1,
      width: 0,
      read,
    });
  }

  histogram(name: string, help: string, buckets: number[], labels: LabelSets = {}): Metric {
    return this.#declare(name, help, "histogram", labels, buckets);
  }

  #declare(
    name: string,
    help: string,
    type: MetricType,
    labels: LabelSets,
    buckets: number[],
  ): Metric {
    checkName(name);
    if (this.families.some((f) => f.name === name)) throw new Error(`metric ${name} twice`);
    const labelNames = Object.keys(labels);
    const labelValues = labelNames.map((n) => [...labels[n], OTHER]);
    const width = type === "histogram" ? buckets.length + 2 : 1;
    const series = labelValues.reduce((n, values) => n * values.length, 1);
    const family: Family = {
      name,
      help,
      type,
      labelNames,
      labelValues,
      buckets,
      base: this.#slots,
      width,
    };
    this.#slots += series * width;
    const grown = new Float64Array(this.#slots);
    grown.set(this.cells);
    this.cells = grown;
    this.families.push(family);
    return new Metric(this, family);
  }

  /**
   * A shared buffer with `regions` regions, this isolate's counts so far moved into region 0
   * (the main isolate calls it once, before starting Workers).
   */
  share(regions: number): SharedArrayBuffer {
    const buffer = new SharedArrayBuffer(8 * this.#slots * regions);
    const region0 = new Float64Array(buffer, 0, this.#slots);
    region0.set(this.cells);
    this.cells = region0;
    this.#shared = { buffer, regions };
    return buffer;
  }

  /** In a Worker: count into `region` of the main isolate's buffer from now on. */
  attach(buffer: SharedArrayBuffer, region: number): void {
    const regions = buffer.byteLength / (8 * this.#slots);
    if (!Number.isInteger(regions) || region < 1 || region >= regions) {
      throw new Error(`metrics buffer of ${buffer.byteLength} bytes has no region ${region}`);
    }
    this.cells = new Float64Array(buffer, 8 * this.#slots * region, this.#slots);
  }

  /** Slot values summed over every region (the main isolate's view). */
  totals(): Float64Array {
    if (!this.#shared) return this.cells.slice();
    const all = new Float64Array(this.#shared.buffer);
    const out = new Float64Array(this.#slots);
    for (let r = 0; r < this.#shared.regions; r++) {
      for (let i = 0, at = r * this.#slots; i < this.#slots; i++, at++) out[i] += all[at];
    }
    return out;
  }
}

/**
 * One declared family: `slot(...values)` finds a series (do it once, outside the hot path, when
 * the values are constant), `inc`/`set`/`observe` write it.
 *
 * @example
 * ```ts
 * declare const m: Metric;
 * const s = m.slot("authenticated");
 * m.inc(s);
 * ```
 */
export class Metric {
  readonly #index: Map<string, number>[];
  constructor(private readonly registry: MetricsRegistry, readonly family: Family) {
    this.#index = family.labelValues.map((values) => new Map(values.map((v, i) => [v, i])));
  }

  /** The first slot of the series with these label values (in declaration order). */
  slot(...values: string[]): number {
    const f = this.family;
    let series = 0;
    for (let i = 0; i < f.labelValues.length; i++) {
      const at = this.#index[i].get(values[i]) ?? f.labelValues[i].length - 1;
      series = series * f.labelValues[i].length + at;
    }
    return f.base + series * f.width;
  }

  inc(slot: number, by = 1): void {
    this.registry.cells[slot] += by;
  }

  set(slot: number, value: number): void {
    this.registry.cells[slot] = value;
  }

  /** Counts `value` into its bucket (the first bound ≥ value, else +Inf) and adds it to the sum. */
  observe(slot: number, value: number): void {
    const b = this.family.buckets;
    let i = 0;
    while (i < b.length && value > b[i]) i++;
    const cells = this.registry.cells;
    cells[slot + i]++;
    cells[slot + b.length + 1] += value;
  }
}

/** Prometheus' metric name rule, and units spelled out: a `_total` only on counters. */
function checkName(name: string): void {
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(name)) throw new Error(`bad metric name ${name}`);
}
