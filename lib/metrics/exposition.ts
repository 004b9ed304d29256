/**
 * The Prometheus text exposition format (version 0.0.4) of a {@link MetricsRegistry}: `# HELP`
 * and `# TYPE` per family, then one line per series; a histogram as cumulative `_bucket{le=…}`
 * series, `_sum` and `_count`. Series of labelled families that never counted are left out (a
 * labelled family with no series keeps its HELP and TYPE); unlabelled ones are always shown.
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * const r = new MetricsRegistry();
 * r.counter("x_total", "Things.");
 * exposition(r); // "# HELP x_total Things.\n# TYPE x_total counter\nx_total 0\n"
 * ```
 */
import type { Family, MetricsRegistry } from "./registry.ts";

/** The Content-Type of {@link exposition}'s text. */
export const EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/**
 * Renders every family of `registry` (values summed over isolates).
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * const text = exposition(new MetricsRegistry());
 * ```
 */
export function exposition(registry: MetricsRegistry): string {
  const values = registry.totals();
  const out: string[] = [];
  for (const f of registry.families) {
    out.push(`# HELP ${f.name} ${escapeHelp(f.help)}`, `# TYPE ${f.name} ${f.type}`);
    if (f.read) {
      out.push(`${f.name} ${number(readOrNaN(f.read))}`);
      continue;
    }
    for (const { labels, at } of seriesOf(f)) {
      if (f.type === "histogram") histogramLines(f, labels, values, at, out);
      else if (f.labelNames.length === 0 || values[at] !== 0) {
        out.push(`${f.name}${labelText(labels)} ${number(values[at])}`);
      }
    }
  }
  return out.join("\n") + "\n";
}

function histogramLines(
  f: Family,
  labels: [string, string][],
  values: Float64Array,
  at: number,
  out: string[],
): void {
  let count = 0;
  for (let i = 0; i <= f.buckets.length; i++) count += values[at + i];
  if (count === 0 && f.labelNames.length > 0) return;
  let cumulative = 0;
  for (let i = 0; i <= f.buckets.length; i++) {
    cumulative += values[at + i];
    const le = i < f.buckets.length ? number(f.buckets[i]) : "+Inf";
    out.push(`${f.name}_bucket${labelText([...labels, ["le", le]])} ${number(cumulative)}`);
  }
  out.push(`${f.name}_sum${labelText(labels)} ${number(values[at + f.buckets.length + 1])}`);
  out.push(`${f.name}_count${labelText(labels)} ${number(count)}`);
}

/** Every series of a family: its label pairs and first slot. */
function* seriesOf(f: Family): Generator<{ labels: [string, string][]; at: number }> {
  const n = f.labelValues.reduce((k, v) => k * v.length, 1);
  for (let s = 0; s < n; s++) {
    const labels: [string, string][] = [];
    let rest = s;
    for (let i = f.labelValues.length - 1; i >= 0; i--) {
      const values = f.labelValues[i];
      labels.unshift([f.labelNames[i], values[rest % values.length]]);
      rest = Math.floor(rest / values.length);
    }
    yield { labels, at: f.base + s * f.width };
  }
}

function labelText(labels: [string, string][]): string {
  if (labels.length === 0) return "";
  return `{${labels.map(([n, v]) => `${n}="${escapeLabel(v)}"`).join(",")}}`;
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

function number(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "+Inf";
  if (x === -Infinity) return "-Inf";
  return String(x);
}

/** A value that cannot be read (e.g. /proc unreadable) is NaN, never a failed scrape. */
function readOrNaN(read: () => number): number {
  try {
    return read();
  } catch {
    return NaN;
  }
}
