/**
 * The scheduling priority (nice value) of the calling thread. Linux applies setpriority(2) with a
 * thread id to that one thread, so a Worker isolate can lower its own priority without touching
 * the rest of the process: the public listener's Workers run at a higher nice value than the
 * authenticated side, so an anonymous flood takes the cores only when the signing side leaves
 * them idle.
 *
 * @example
 * ```ts
 * import { threadNice } from "./priority.ts";
 * console.log(threadNice()); // 0 for a thread started at the default priority
 * ```
 */
import { errno, libc, PRIO_PROCESS } from "../../../ffi/libc.ts";

/**
 * Sets the calling thread's nice value (a thread may always raise it; lowering it needs
 * CAP_SYS_NICE). Throws with the errno when the kernel refuses.
 */
export function setThreadNice(nice: number): void {
  const c = libc();
  if (c.setpriority(PRIO_PROCESS, c.gettid(), nice) !== 0) {
    throw new Error(`setpriority(thread, ${nice}) failed with errno ${errno()}`);
  }
}

/**
 * The calling thread's nice value.
 */
export function threadNice(): number {
  const c = libc();
  return c.getpriority(PRIO_PROCESS, c.gettid()); // −20…19 (glibc undoes the kernel's 40 − nice)
}
