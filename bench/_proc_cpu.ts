/**
 * CPU time of a process and of its main thread so far, read from /proc: what the benches divide by
 * the requests they served.
 *
 * @example
 * ```ts
 * declare const pid: number, requests: number;
 * const before = await daemonCpu(pid);
 * // … load …
 * const usPerRequest = ((await daemonCpu(pid)).all - before.all) * 1e6 / requests;
 * ```
 */

/**
 * CPU seconds (user + system) a process or one of its threads has used so far, from a /proc stat
 * file.
 *
 * @example
 * ```ts
 * declare const pid: number;
 * await cpuSeconds(`/proc/${pid}/stat`);
 * ```
 */
export async function cpuSeconds(statPath: string): Promise<number> {
  const stat = await Deno.readTextFile(statPath);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticksPerSecond = 100; // USER_HZ on Linux
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/**
 * The daemon's CPU so far: all threads, and its main thread alone. The main thread runs every line
 * of JavaScript and every synchronous FFI call, so its µs per request caps the request rate
 * (1 s ÷ main µs) however many cores there are; the rest is the thread pool (nonblocking C_Sign,
 * fdatasync) and V8's helpers.
 *
 * @example
 * ```ts
 * declare const daemon: { pid: number };
 * const { all, main } = await daemonCpu(daemon.pid);
 * ```
 */
export async function daemonCpu(pid: number): Promise<{ all: number; main: number }> {
  return {
    all: await cpuSeconds(`/proc/${pid}/stat`),
    main: await cpuSeconds(`/proc/${pid}/task/${pid}/stat`),
  };
}

/**
 * CPU seconds so far of each thread of a process, summed by thread name (`comm` of each task in `/proc/<pid>/task`:
 * the main thread is keyed `main`, a Worker's thread is `worker-N` in Deno 2.9 whatever its
 * `name`, Tokio's blocking pool (nonblocking FFI calls, file I/O) `tokio-runtime-w`, V8's helpers
 * `V8 DefaultWorke`). A thread that ended is no longer counted.
 *
 * @example
 * ```ts
 * declare const daemon: { pid: number };
 * const byName = await threadCpu(daemon.pid); // Map { "deno" => 1.2, "svcd-req-0" => 3.4, … }
 * ```
 */
export async function threadCpu(pid: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const name = (await Deno.readTextFile(`/proc/${pid}/task/${task.name}/comm`)).trim();
      const key = task.name === String(pid) ? "main" : name;
      out.set(key, (out.get(key) ?? 0) + await cpuSeconds(`/proc/${pid}/task/${task.name}/stat`));
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * Context switches (voluntary and not) of a process so far, all threads: each hand-over between
 * threads (a message, a wake-up, a thread-pool hop) costs at least one, with kernel time around it.
 *
 * @example
 * ```ts
 * declare const pid: number;
 * const before = await contextSwitches(pid); // … load … (await contextSwitches(pid)) - before
 * ```
 */
export async function contextSwitches(pid: number): Promise<number> {
  let sum = 0;
  for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
    try {
      const status = await Deno.readTextFile(`/proc/${pid}/task/${task.name}/status`);
      for (const m of status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)$/gm)) {
        sum += Number(m[1]);
      }
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return sum;
}

/** Ticks of each core so far from /proc/stat: all of them, and those spent idle (idle + iowait). */
export interface CoreTicks {
  total: number[];
  idle: number[];
}

/**
 * Every core's ticks so far (`cpuN` lines of /proc/stat): two readings give how busy each core
 * was between them ({@link coresBusy}), whatever process kept it busy.
 *
 * @example
 * ```ts
 * const before = await coreTicks();
 * // … load …
 * const busy = coresBusy(before, await coreTicks()); // [0.91, 0.88]
 * ```
 */
export async function coreTicks(): Promise<CoreTicks> {
  const total: number[] = [];
  const idle: number[] = [];
  for (const line of (await Deno.readTextFile("/proc/stat")).split("\n")) {
    if (!/^cpu\d+ /.test(line)) continue;
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    total.push(f.slice(0, 8).reduce((a, b) => a + b, 0));
    idle.push(f[3] + f[4]);
  }
  return { total, idle };
}

/**
 * The share of its time each core was busy between two {@link coreTicks} readings, 0–1.
 *
 * @example
 * ```ts
 * declare const before: CoreTicks, after: CoreTicks;
 * coresBusy(before, after).map((b) => `${(b * 100).toFixed(0)} %`);
 * ```
 */
export function coresBusy(before: CoreTicks, after: CoreTicks): number[] {
  return after.total.map((t, i) => {
    const dt = t - before.total[i];
    return dt > 0 ? 1 - (after.idle[i] - before.idle[i]) / dt : 0;
  });
}
