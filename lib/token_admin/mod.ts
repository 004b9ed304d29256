/**
 * Operator administration of the token: `svcd token` (cli.ts), key pairs, the audit MAC key and
 * the user PIN (admin.ts, keygen.ts), a fresh token with its PIN credential (provision.ts), token
 * work as the daemon's user (run_as.ts), and checking a signature without the token
 * (independent_verify.ts: `svcd token selftest`, and `svcd ca` for a request's signature), and a
 * key's certificate object on the token (certificate_object.ts: `svcd ca certify`). The daemon
 * never loads this folder; it uses the token through lib/token.
 *
 * @example
 * ```ts
 * import { Token } from "../token/mod.ts";
 * import { TokenAdmin } from "./mod.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * const key = await new TokenAdmin(token).generateKeyPair("web-signing", "ed25519");
 * ```
 */
export { TokenAdmin } from "./admin.ts";
export { generateKey, generateKeyPair } from "./keygen.ts";
export { type Common, openLoggedIn, runTokenCommand, TOKEN_COMMAND } from "./cli.ts";
export { asUser, callsAsUser, isRoot, RunAsError } from "./run_as.ts";
export {
  compositeMessage,
  type IndependentResult,
  verifyIndependently,
} from "./independent_verify.ts";
export { CertificateRefused, storeKeyCertificate } from "./certificate_object.ts";
