/**
 * The top-level command line: `svcd --help` names every command (pubkey and ca included) and the
 * exit codes an operator scripts against (keygen's 3 among them); `svcd --version` is the package's.
 */
import assert from "node:assert/strict";
import { runDeno } from "./support/command.ts";
import pkg from "../package.json" with { type: "json" };

const MAIN = new URL("../main.ts", import.meta.url).pathname;

Deno.test("cli: --help lists every command and the exit codes; --version is package.json's", async () => {
  const help = await runDeno([MAIN, "--help"]);
  assert.equal(help.code, 0, help.text);
  for (const word of ["serve", "--check-config", "pubkey", "selftest", "audit verify", "ca init"]) {
    assert.ok(help.stdout.includes(word), `help lacks '${word}':\n${help.stdout}`);
  }
  assert.match(help.stdout, /^ {2}3 +svcd token keygen: a requested key type is not offered/m);
  assert.match(help.stdout, /^ {2}70 +svcd serve: a listener's thread failed/m);
  assert.match(help.stdout, /^ {2}75 +svcd serve: the token died/m);
  const version = await runDeno([MAIN, "--version"]);
  assert.equal(version.code, 0);
  assert.equal(version.stdout.trim(), `svcd ${pkg.version} (deno ${Deno.version.deno})`);
  const none = await runDeno([MAIN]);
  assert.equal(none.code, 2, "no command is a usage error");
  assert.equal(none.stdout, "", "a usage error goes to stderr");
  assert.match(none.stderr, /^usage: svcd COMMAND/m);
});
