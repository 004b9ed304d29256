import assert from "node:assert/strict";
import {
  cliOption,
  cliOptions,
  OptionReader,
  type OptionTable,
  optionTable,
} from "./option_table.ts";
import { SHARED_OPTIONS, type SharedFlag, type SharedPlace, sharedSpec } from "./shared_options.ts";

/** A shared option as --help lists it in a group. */
function listed(flag: SharedFlag, place: SharedPlace) {
  return cliOption(flag, sharedSpec(flag, place));
}

const TABLE = {
  socket: { kind: "path", group: "g", value: "PATH", fallback: "/run/s.sock", help: "the socket" },
  uid: { kind: "count", group: "g", value: "UID", required: true, min: 0, max: 10, help: "a uid" },
  workers: {
    kind: "count",
    group: "g",
    value: "N",
    fallback: 16,
    min: 1,
    max: 64,
    help: "workers",
  },
  label: { kind: "text", group: "g", value: "LABEL", help: "a label" },
  weak: { kind: "switch", group: "g", help: "allow it" },
  shown: { kind: "count", group: "g", shownDefault: "the --uid", help: "follows --uid" },
} as const satisfies OptionTable;

class Mistake extends Error {
  constructor(readonly flag: string, message: string) {
    super(message);
  }
}

function reader(values: Record<string, string | boolean>) {
  return new OptionReader(TABLE, values, (flag, message) => new Mistake(flag, message));
}

function refused(values: Record<string, string | boolean>, read: keyof typeof TABLE, re: RegExp) {
  assert.throws(
    () => reader(values).get(read),
    (e) => e instanceof Mistake && e.flag === read && re.test(e.message),
    `${read} of ${JSON.stringify(values)}`,
  );
}

Deno.test("option table: each value is read as its option declares, or its fallback", () => {
  const given = reader({ uid: "7", workers: "64", label: "k", weak: true });
  const uid: number = given.get("uid");
  const workers: number = given.get("workers");
  const label: string | undefined = given.get("label");
  const weak: boolean = given.get("weak");
  assert.deepEqual([uid, workers, label, weak], [7, 64, "k", true]);
  const defaults = reader({ uid: "0" });
  const socket: string = defaults.get("socket");
  assert.equal(socket, "/run/s.sock");
  assert.equal(defaults.get("workers"), 16);
  assert.equal(defaults.get("label"), undefined);
  assert.equal(defaults.get("weak"), false);
  assert.equal(defaults.get("shown"), undefined);
  assert.equal(given.isGiven("workers"), true);
  assert.equal(defaults.isGiven("workers"), false, "a fallback is not given");
});

Deno.test("option table: a value that breaks its declaration names the option and what to give", () => {
  refused({}, "uid", /^--uid is required: a uid$/);
  refused({ label: "" }, "label", /^--label is empty: give a label$/);
  for (const bad of ["0", "65", "-1", "1.5", "0x10", "x", "99999999999", " 3"]) {
    refused({ workers: bad }, "workers", /^--workers must be a whole number from 1 to 64 \(got '/);
  }
  refused({ uid: "11" }, "uid", /from 0 to 10/);
  // Read when asked: a bad value of an option nobody reads refuses nothing.
  assert.equal(reader({ uid: "1", workers: "0" }).get("uid"), 1);
});

Deno.test("option table: the table's keys type the accessor", () => {
  const options = reader({ uid: "1" });
  // @ts-expect-error a misspelt flag does not compile
  assert.throws(() => options.get("wokers"));
  // @ts-expect-error a count is a number, never text
  const text: string = options.get("workers");
  // @ts-expect-error an option without a fallback may be undefined
  const label: string = options.get("label");
  assert.deepEqual([text, label], [16, undefined]);
});

Deno.test("option table: --help's view of an option: placeholder, shown default, no value for a switch", () => {
  const listed = cliOptions(TABLE);
  assert.deepEqual(listed.map((o) => o.flag), Object.keys(TABLE));
  assert.deepEqual(cliOption("socket", TABLE.socket), {
    flag: "socket",
    group: "g",
    value: "PATH",
    help: "the socket",
    default: "/run/s.sock",
  });
  assert.equal(cliOption("workers", TABLE.workers).default, "16");
  assert.equal(cliOption("uid", TABLE.uid).required, true);
  assert.equal(cliOption("weak", TABLE.weak).value, undefined);
  assert.equal(cliOption("shown", TABLE.shown).default, "the --uid");
  assert.equal(cliOption("shown", TABLE.shown).value, "COUNT", "a placeholder from the kind");
});

Deno.test("shared options: a group lists the declared option under its heading, with its note", () => {
  const token = listed("token", { group: "keys", note: "the new token's label" });
  assert.deepEqual(token, {
    flag: "token",
    group: "keys",
    value: "LABEL",
    help: `${SHARED_OPTIONS.token.help}; the new token's label`,
    default: SHARED_OPTIONS.token.fallback,
  });
  const dirs = listed("audit-dir", { group: "log", multiple: true, commands: ["verify"] });
  assert.equal(dirs.multiple, true);
  assert.deepEqual(dirs.commands, ["verify"]);
  assert.equal(dirs.help, SHARED_OPTIONS["audit-dir"].help);
  assert.equal(listed("credential", { group: "g" }).default, undefined);
});

Deno.test("option table: an option given more than once is read as every value, in order", () => {
  const table = {
    dir: { kind: "path", group: "g", multiple: true, fallback: "/var/log/x", help: "a folder" },
    label: { kind: "text", group: "g", multiple: true, help: "a label" },
    module: sharedSpec("module", { group: "g" }),
  } as const satisfies OptionTable;
  const read = (values: Record<string, string | string[]>) =>
    new OptionReader(table, values, (flag, message) => new Mistake(flag, message));
  const given = read({ dir: ["/a", "/b"], label: "one" });
  const dirs: string[] = given.get("dir");
  assert.deepEqual(dirs, ["/a", "/b"]);
  assert.deepEqual(given.get("label"), ["one"]);
  assert.deepEqual(read({}).get("dir"), ["/var/log/x"], "its fallback alone when none is given");
  assert.deepEqual(read({}).get("label"), [], "none, without a fallback");
  assert.equal(read({}).get("module"), SHARED_OPTIONS.module.fallback);
  assert.throws(
    () => read({ label: ["one", ""] }).get("label"),
    (e) => e instanceof Mistake && e.flag === "label" && /empty/.test(e.message),
  );
});

Deno.test("option table: an option under a heading its group does not have does not compile", () => {
  const headings = [{ id: "log", title: "what is checked" }] as const;
  const table = optionTable(headings, {
    checkpoints: { kind: "path", group: "log", help: "collected checkpoints" },
  });
  assert.equal(table.checkpoints.group, "log");
  // @ts-expect-error: "keys" is not a heading of this group
  optionTable(headings, { module: { kind: "path", group: "keys", help: "a module" } });
});
