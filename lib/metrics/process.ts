/**
 * The standard `process_*` metrics of the Prometheus client libraries, read from /proc/self when
 * scraped: resident and virtual memory, open and maximum file descriptors, CPU seconds, start time.
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * declareProcessMetrics(new MetricsRegistry());
 * ```
 */
import type { MetricsRegistry } from "./registry.ts";

/** Clock ticks per second of /proc/self/stat (USER_HZ, 100 on Linux). */
const USER_HZ = 100;
const PAGE_SIZE = 4096;

/**
 * Declares the process metrics on `registry`.
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * declareProcessMetrics(new MetricsRegistry());
 * ```
 */
export function declareProcessMetrics(registry: MetricsRegistry): void {
  registry.readAtScrape(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
    "counter",
    () => {
      const f = statFields();
      return (Number(f[11]) + Number(f[12])) / USER_HZ;
    },
  );
  registry.readAtScrape(
    "process_resident_memory_bytes",
    "Resident memory size in bytes.",
    "gauge",
    () => Number(statFields()[21]) * PAGE_SIZE,
  );
  registry.readAtScrape(
    "process_virtual_memory_bytes",
    "Virtual memory size in bytes.",
    "gauge",
    () => Number(statFields()[20]),
  );
  registry.readAtScrape(
    "process_open_fds",
    "Number of open file descriptors.",
    "gauge",
    () => [...Deno.readDirSync("/proc/self/fd")].length,
  );
  registry.readAtScrape(
    "process_max_fds",
    "Maximum number of open file descriptors.",
    "gauge",
    () => Number(/^Max open files\s+(\d+)/m.exec(Deno.readTextFileSync("/proc/self/limits"))?.[1]),
  );
  // The isolate's time origin is the process start within milliseconds, and needs no /proc/stat.
  const startTime = Math.floor(performance.timeOrigin) / 1000;
  registry.readAtScrape(
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
    "gauge",
    () => startTime,
  );
}

/** The fields of /proc/self/stat after `(comm)`, from `state` (index 0 = field 3). */
function statFields(): string[] {
  const text = Deno.readTextFileSync("/proc/self/stat");
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}
