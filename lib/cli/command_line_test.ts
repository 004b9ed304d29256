import assert from "node:assert/strict";
import { type CommandLine, parseCommandLine } from "./command_line.ts";
import type { CommandGroup } from "./options.ts";
import { EXIT } from "./exit.ts";

const SERVE_LIKE: CommandGroup = {
  name: "serve",
  summary: "a group without command words",
  usage: ["svcd serve [options]"],
  commands: [],
  options: [
    { flag: "socket", value: "PATH", help: "the socket" },
    { flag: "weak", help: "allow it" },
  ],
  groups: [],
};

const WITH_COMMANDS: CommandGroup = {
  ...SERVE_LIKE,
  name: "token",
  usage: ["svcd token COMMAND [options]"],
  commands: [{ name: "list", synopsis: "", summary: "list" }, {
    name: "init",
    synopsis: "",
    summary: "init",
  }],
  options: [...SERVE_LIKE.options, { flag: "out", value: "FILE", help: "x", commands: ["init"] }],
};

/** The line, what went to stdout, and the usage mistakes reported. */
function parse(group: CommandGroup, args: string[]) {
  const printed: string[] = [];
  const mistakes: string[] = [];
  const log = console.log;
  console.log = (text: string) => printed.push(text);
  try {
    const line: CommandLine = parseCommandLine(group, args, {
      allowPositionals: false,
      usageError: (message) => (mistakes.push(message), EXIT.usage),
    });
    return { line, printed, mistakes };
  } finally {
    console.log = log;
  }
}

Deno.test("command line: a group without command words takes its options after its name", () => {
  const { line, mistakes } = parse(SERVE_LIKE, ["--socket", "/s", "--weak"]);
  assert.deepEqual(mistakes, []);
  assert.ok(!("exit" in line));
  assert.equal(line.command, "serve");
  assert.deepEqual({ ...line.values }, { socket: "/s", weak: true });
  const empty = parse(SERVE_LIKE, []).line;
  assert.ok(!("exit" in empty));
  assert.deepEqual([{ ...empty.values }, empty.positionals], [{}, []]);
});

Deno.test("command line: --help of a group without commands is answered wherever it stands", () => {
  for (const args of [["--help"], ["-h"], ["--socket", "/s", "--help"], ["--bogus", "-h"]]) {
    const { line, printed, mistakes } = parse(SERVE_LIKE, args);
    assert.deepEqual(line, { exit: EXIT.ok }, args.join(" "));
    assert.equal(printed.length, 1);
    assert.match(printed[0], /^usage: svcd serve \[options\]/);
    assert.deepEqual(mistakes, []);
  }
});

Deno.test("command line: a mistake in a group without commands is a usage error naming the option", () => {
  for (const [args, option] of [[["--bogus"], "--bogus"], [["--socket"], "--socket"]] as const) {
    const { line, mistakes } = parse(SERVE_LIKE, [...args]);
    assert.deepEqual(line, { exit: EXIT.usage });
    assert.equal(mistakes.length, 1);
    assert.ok(mistakes[0].includes(option), mistakes[0]);
  }
  assert.deepEqual(parse(SERVE_LIKE, ["stray"]).line, { exit: EXIT.usage }, "no positionals");
});

Deno.test("command line: a group with commands still needs one, and refuses another's option", () => {
  assert.deepEqual(parse(WITH_COMMANDS, []).mistakes, ["no command"]);
  assert.deepEqual(parse(WITH_COMMANDS, ["--socket", "/s"]).mistakes, [
    "unknown command '--socket'",
  ]);
  assert.deepEqual(parse(WITH_COMMANDS, ["list", "--out", "f"]).mistakes, [
    "--out does not apply to 'list'",
  ]);
  const { line } = parse(WITH_COMMANDS, ["init", "--out", "f"]);
  assert.ok(!("exit" in line) && line.command === "init" && line.values.out === "f");
  const help = parse(WITH_COMMANDS, ["init", "--help"]);
  assert.deepEqual(help.line, { exit: EXIT.ok });
  assert.match(help.printed[0], /^usage: svcd token init/);
});
