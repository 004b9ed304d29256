/**
 * Counting PKCS#11 calls in tests: the first count asked for a module path wraps that module's
 * function table (ffi/pkcs11/module.ts's wrapFunctionTable seam) with counters, so every call made
 * through it in this isolate from then on — by a Token, the CLI or the daemon running in-process —
 * is counted. A nonblocking variant counts as its function (`C_LoginAsync` as `C_Login`). Counts
 * start when the first one is asked for: tests compare a count before and after what they test.
 *
 * @example
 * ```ts
 * import { callCount } from "./pkcs11_calls.ts";
 * const before = callCount("/usr/lib/softhsm/libsofthsm2.so", "C_Login");
 * // … log in …
 * callCount("/usr/lib/softhsm/libsofthsm2.so", "C_Login") - before; // → 1
 * ```
 */
import { loadModule, type TableEntry, wrapFunctionTable } from "../../ffi/pkcs11/mod.ts";

const counters = new Map<string, Map<string, number>>();

/** Calls of PKCS#11 function `fn` made in this isolate through the module at `modulePath`. */
export function callCount(modulePath: string, fn: string): number {
  return countersFor(modulePath).get(fn) ?? 0;
}

function countersFor(modulePath: string): Map<string, number> {
  const mod = loadModule(modulePath);
  let counts = counters.get(mod.path);
  if (!counts) {
    const made = new Map<string, number>();
    wrapFunctionTable(mod, (name, entry) => counting(made, name.replace(/Async$/, ""), entry));
    counters.set(mod.path, made);
    counts = made;
  }
  return counts;
}

function counting(counts: Map<string, number>, fn: string, entry: TableEntry): TableEntry {
  return (...args) => {
    counts.set(fn, (counts.get(fn) ?? 0) + 1);
    return entry(...args);
  };
}
