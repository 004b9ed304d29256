/**
 * A child process for tests/both_modules/module_exit_test.ts. It opens the test token given as JSON
 * in SVCD_TEST_TOKEN and signs SVCD_TEST_SIGNATURES messages at once on the thread pool (so the
 * runtime starts many threads that call into the module). Then it closes the token and ends by
 * itself, without Deno.exit, as `deno test` does: the runtime's threads end while exit runs.
 *
 * @example
 * ```ts
 * new Deno.Command(Deno.execPath(), { args: ["run", "-A", "tests/support/sign_then_exit.ts"] });
 * ```
 */
import { openTestToken, type TestToken, testTokenPin } from "./token.ts";

const made: TestToken = JSON.parse(Deno.env.get("SVCD_TEST_TOKEN")!);
const count = Number(Deno.env.get("SVCD_TEST_SIGNATURES"));
const token = openTestToken(made, { inlineSignLimitUs: 0 });
await token.login(testTokenPin(made));
const key = (await token.key(made.keys[0]))!;
const message = new TextEncoder().encode("exit");
await Promise.all(Array.from({ length: count }, () => token.sign(key, message)));
token.close();
