/**
 * One key looked up again and again, as a request thread does after each SIGHUP: every round drops
 * the key's working copy (refreshKeys) and finds and copies it anew (key). Run in this isolate or
 * in a Worker (./key_lookup_worker.ts), so that several threads of one process do it at once.
 *
 * @example
 * ```ts
 * import type { Token } from "../../lib/token/mod.ts";
 * declare const token: Token;
 * const seen = await lookUpAgainAndAgain(token, "k1", 100); // { lookups: 100, failures: [] }
 * ```
 */
import type { Token } from "../../lib/token/mod.ts";

/** What the lookups saw: how many ran, and the messages of those that failed. */
export interface LookupReport {
  lookups: number;
  failures: string[];
}

/** `rounds` rounds of refreshKeys() and key(label) on `token`. */
export async function lookUpAgainAndAgain(
  token: Token,
  label: string,
  rounds: number,
): Promise<LookupReport> {
  const seen: LookupReport = { lookups: 0, failures: [] };
  for (let i = 0; i < rounds; i++) {
    token.refreshKeys();
    try {
      if (!await token.key(label)) seen.failures.push(`'${label}' not found`);
    } catch (err) {
      seen.failures.push((err as Error).message);
    }
    seen.lookups++;
  }
  return seen;
}
