/**
 * The token layer's seams for tests, in one place. The daemon uses none of them:
 * - `sessionUseStats(token)`: whether any pooled session served two operations at once;
 * - `TokenOptions.fakeSessionCap`: a module that refuses sessions past a count.
 * PKCS#11 calls are counted by wrapping the module's function table (tests/support/pkcs11_calls.ts).
 *
 * @example
 * ```ts
 * import { Token } from "./token.ts";
 * import { sessionUseStats } from "./testing.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * sessionUseStats(token).overlaps; // → 0
 * ```
 */
import type { SessionUseStats } from "./pool.ts";
import { type Token, tokenParts } from "./token.ts";

export type { SessionUseStats } from "./pool.ts";

/** Evidence that no session of `token`'s pool served two operations at once. */
export function sessionUseStats(token: Token): SessionUseStats {
  return tokenParts(token).pool.useStats();
}
