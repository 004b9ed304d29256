/**
 * CPU time of a process and of its main thread so far, read from /proc: what the benches divide by
 * the requests they served.
 *
 * @example
 * ```ts ignore
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
 * ```ts ignore
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
 * ```ts ignore
 * const { all, main } = await daemonCpu(daemon.pid);
 * ```
 */
export async function daemonCpu(pid: number): Promise<{ all: number; main: number }> {
  return {
    all: await cpuSeconds(`/proc/${pid}/stat`),
    main: await cpuSeconds(`/proc/${pid}/task/${pid}/stat`),
  };
}
