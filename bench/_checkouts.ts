/**
 * Checkouts of this repository named on a bench's command line (`NAME=DIR`, e.g. `before=/tmp/before
 * after=.`), for the benches that measure each one's code in turn (a before/after on a shared
 * machine).
 *
 * @example
 * ```ts
 * import { checkouts } from "./_checkouts.ts";
 * const trees = checkouts(["before=/tmp/before", "after=."], (problem) => {
 *   throw new Error(problem);
 * });
 * ```
 */

/** One checkout: its name in the output and its folder (a real path). */
export interface Checkout {
  name: string;
  dir: string;
}

/** The checkouts `NAME=DIR` of `args`; `fail` is called with what is wrong with one. */
export function checkouts(args: string[], fail: (problem: string) => never): Checkout[] {
  return args.map((arg) => {
    const at = arg.indexOf("=");
    if (at < 1) fail(`'${arg}': name each checkout, e.g. before=/tmp/before`);
    const dir = arg.slice(at + 1);
    if (!isCheckout(dir)) {
      fail(`'${arg}': ${dir} is not a checkout of this repository (no main.ts)`);
    }
    return { name: arg.slice(0, at), dir: Deno.realPathSync(dir) };
  });
}

function isCheckout(dir: string): boolean {
  try {
    return Deno.statSync(`${dir}/main.ts`).isFile;
  } catch {
    return false;
  }
}
