/**
 * A Worker that looks one key up again and again in its own Token, as a request thread does after
 * each SIGHUP: every round drops the key's working copy (refreshKeys) and finds and copies it
 * anew (key). It runs `rounds` rounds, or until told "stop", then answers with what it saw: how
 * many lookups, and the messages of those that failed. It opens the module the test's isolate
 * initialised and logged in (login state belongs to the process), with the options it is given.
 *
 * Message in: `{ token: TokenOptions, label, rounds }`, later perhaps `"stop"`.
 * Answer: `{ lookups, failures: string[] }`.
 */
import { Token, type TokenOptions } from "../../lib/token/mod.ts";

/** What the Worker is told to do. */
export interface LookupOrder {
  token: TokenOptions;
  label: string;
  rounds: number;
}

/** What it answers once it ends. */
export interface LookupReport {
  lookups: number;
  failures: string[];
}

// deno-lint-ignore no-explicit-any
const scope = self as any;
let stopped = false;

scope.onmessage = async (e: MessageEvent<LookupOrder | "stop">) => {
  if (e.data === "stop") {
    stopped = true;
    return;
  }
  scope.postMessage(await lookUpAgainAndAgain(e.data));
};

async function lookUpAgainAndAgain(order: LookupOrder): Promise<LookupReport> {
  const token = Token.open(order.token);
  const seen: LookupReport = { lookups: 0, failures: [] };
  try {
    for (let i = 0; i < order.rounds && !stopped; i++) {
      token.refreshKeys();
      try {
        if (!await token.key(order.label)) seen.failures.push(`'${order.label}' not found`);
      } catch (err) {
        seen.failures.push((err as Error).message);
      }
      seen.lookups++;
    }
  } finally {
    token.close();
  }
  return seen;
}
