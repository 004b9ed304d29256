/**
 * A Worker that runs ./key_lookups.ts's lookups in a Token of its own, then answers with what
 * they saw ({@link LookupReport}). It opens the module the test's isolate initialised and logged
 * in (login state belongs to the process), with the options it is given.
 *
 * Message in: {@link LookupOrder}. Answer: {@link LookupReport}.
 */
import { Token, type TokenOptions } from "../../lib/token/mod.ts";
import { lookUpAgainAndAgain, type LookupReport } from "./key_lookups.ts";

export type { LookupReport } from "./key_lookups.ts";

/** What the Worker is told to do. */
export interface LookupOrder {
  token: TokenOptions;
  label: string;
  rounds: number;
}

// deno-lint-ignore no-explicit-any
const scope = self as any;

scope.onmessage = async (e: MessageEvent<LookupOrder>) => {
  const order = e.data;
  const token = Token.open(order.token);
  let seen: LookupReport;
  try {
    seen = await lookUpAgainAndAgain(token, order.label, order.rounds);
  } finally {
    token.close();
  }
  scope.postMessage(seen);
};
