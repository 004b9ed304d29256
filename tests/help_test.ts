/**
 * Every `--help` of the command line, run as an operator runs it: at most 80 columns, every option
 * of the code's tables listed exactly once (and nothing else listed as an option), a placeholder
 * on every option that takes a value, real defaults, and the one exit code table. Usage mistakes
 * go to stderr with exit 2, in every command.
 */
import assert from "node:assert/strict";
import { type CommandResult, runDeno } from "./support/command.ts";
import { GROUPS, helpInvocations } from "./support/help.ts";
import { optionTerm } from "../lib/cli/options.ts";
import { EXIT_CODES } from "../lib/cli/exit.ts";
import { SERVE_OPTIONS } from "../lib/server/daemon/serve_options.ts";
import { optionEntries } from "../lib/cli/option_table.ts";
import { SHARED_OPTIONS, type SharedFlag } from "../lib/cli/shared_options.ts";
import { COMMANDS } from "../main.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const PLACEHOLDER = /^[A-Z][A-Z0-9_]*$/;

/** The option lines of a help text: "  --flag …" at the start of a line, by flag. */
function listedOptions(text: string): string[] {
  return [...text.matchAll(/^ {2}--([a-z0-9-]+)/gm)].map((m) => m[1]);
}

Deno.test("help: every --help fits 80 columns and lists each option of its table once, with a placeholder", async () => {
  const invocations = helpInvocations();
  // The real command line, a few at a time (each is a process).
  const results: CommandResult[] = [];
  for (let i = 0; i < invocations.length; i += 4) {
    results.push(
      ...await Promise.all(invocations.slice(i, i + 4).map((h) => runDeno([MAIN, ...h.args]))),
    );
  }
  for (const [i, h] of invocations.entries()) {
    const run = results[i];
    const name = `svcd ${h.args.join(" ")}`;
    assert.equal(run.code, 0, `${name}: ${run.text}`);
    assert.equal(run.stderr, "", `${name} wrote to stderr`);
    assert.equal(run.stdout.trimEnd(), h.text.trimEnd(), `${name} prints the table's help`);
    run.stdout.split("\n").forEach((line, n) => {
      assert.ok([...line].length <= 80, `${name} line ${n + 1} is ${line.length} columns: ${line}`);
    });
    if (h.args[0] === "--help") continue;
    const listed = listedOptions(run.stdout);
    const expected = h.options.map((o) => o.flag);
    assert.deepEqual([...listed].sort(), [...expected].sort(), `${name}: options listed`);
    for (const o of h.options) {
      const line = run.stdout.split("\n").find((l) =>
        /^ {2}--([a-z0-9-]+)/.exec(l)?.[1] === o.flag
      )!;
      assert.match(line, new RegExp(`^  ${optionTerm(o)}( |$)`), `${name}: ${line}`);
      if (o.value !== undefined) {
        assert.match(o.value, PLACEHOLDER, `${name}: --${o.flag} has placeholder '${o.value}'`);
      }
    }
  }
});

Deno.test("help: the parser takes a value exactly for the options the help shows a placeholder for", () => {
  for (const [flag, o] of optionEntries(SERVE_OPTIONS)) {
    if (o.kind === "switch") assert.equal(o.value, undefined, `--${flag} is a switch`);
    else assert.match(o.value ?? "", PLACEHOLDER, `serve --${flag} needs a placeholder`);
  }
  for (const group of GROUPS) {
    for (const o of group.options) {
      if (o.value !== undefined) assert.match(o.value, PLACEHOLDER, `${group.name} --${o.flag}`);
    }
  }
});

Deno.test("help: serve's defaults are the values the parser uses, never a pointer elsewhere", async () => {
  const help = (await runDeno([MAIN, "serve", "--help"])).stdout.replace(/\n {28}/g, " ");
  for (const [flag, o] of optionEntries(SERVE_OPTIONS)) {
    if (o.fallback === undefined || o.shownDefault !== undefined) continue;
    const line = help.split("\n").find((l) => l.startsWith(`  --${flag} `))!;
    assert.ok(line.endsWith(`(default ${o.fallback})`), `--${flag}: ${line}`);
  }
  assert.doesNotMatch(help, /default:? (?:see|lib\/)/);
  const groups = [...help.matchAll(/^([a-z][^:\n]*):$/gm)].map((m) => m[1]);
  assert.deepEqual(groups, [
    "sockets",
    "token",
    "policy and audit",
    "limits",
    "public listener (certificates, OCSP and CRLs)",
    "threads",
    "metrics",
    "checkpoints",
  ]);
});

Deno.test("help: svcd --help lists the exit codes of lib/cli/exit.ts, one per cause", async () => {
  const help = (await runDeno([MAIN, "--help"])).stdout;
  const listed = [...help.matchAll(/^ {2}(\d+) +/gm)].map((m) => Number(m[1]));
  assert.deepEqual(listed, EXIT_CODES.map((e) => e.code));
  assert.equal(new Set(listed).size, listed.length);
});

Deno.test("usage mistakes: stderr, exit 2, nothing on stdout, in every command", async () => {
  const cases = [
    [],
    ["bogus"],
    ["serve", "--bogus"],
    ["--check-config", "--workers"],
    ["token"],
    ["token", "keygen", "--bogus"],
    ["token", "list", "--key-type", "ed25519"],
    ["ca"],
    ["ca", "revoke", "--days", "3"],
    ["audit"],
    ["audit", "verify", "--dir", "/tmp"],
    ["client"],
    ["client", "keys", "--key-label", "x"],
  ];
  const runs = await Promise.all(cases.map((args) => runDeno([MAIN, ...args])));
  for (const [i, run] of runs.entries()) {
    const name = `svcd ${cases[i].join(" ")}`;
    assert.equal(run.code, 2, `${name}: ${run.text}`);
    assert.equal(run.stdout, "", `${name} printed to stdout`);
    assert.notEqual(run.stderr, "", `${name} said nothing`);
  }
});

Deno.test("help: a shared option reads the same in every group that takes it", () => {
  let listed = 0;
  for (const group of GROUPS) {
    for (const o of group.options) {
      if (!(o.flag in SHARED_OPTIONS)) continue;
      const shared = SHARED_OPTIONS[o.flag as SharedFlag];
      const fallback = "fallback" in shared ? String(shared.fallback) : undefined;
      const name = `svcd ${group.name} --${o.flag}`;
      assert.equal(o.value, shared.value, name);
      assert.equal(o.default, fallback, name);
      assert.ok(o.help.startsWith(shared.help), `${name}: ${o.help}`);
      listed++;
    }
  }
  // module and token in four groups, credential and user in three, audit-dir in two.
  assert.equal(listed, 16);
});

Deno.test("help: svcd --help names every command of each group", () => {
  for (const group of GROUPS) {
    const entry = COMMANDS.find((c) => c.names[0] === group.name);
    assert.ok(entry, `svcd --help lacks ${group.name}`);
    const words = group.commands.map((c) => c.name).join("|");
    assert.equal(entry.synopsis, `${[group.name, words].filter((w) => w).join(" ")} [options]`);
  }
});
