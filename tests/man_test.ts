/**
 * The man pages packaging/man.ts generates from the option tables: each renders with man -l and
 * groff without a single warning, and lists every option of its group's table. The operator's
 * guide comes from the same tables: its options of `svcd serve` are generated, every svcd command
 * line it shows gives only options of that command, and its table of the client's environment
 * names the client's options.
 */
import assert from "node:assert/strict";
import { runCommand } from "./support/command.ts";
import { guideOptions, manPages } from "../packaging/man.ts";
import { GROUPS } from "./support/help.ts";
import { type CommandGroup, optionsOf } from "../lib/cli/options.ts";
import { CLIENT_COMMAND } from "../lib/client/cli.ts";
import { ENVIRONMENT } from "../lib/client/settings.ts";

const GUIDE = new URL("../docs/operations.md", import.meta.url).pathname;

Deno.test("man: svcd(8) and svcd-GROUP(8) render without warnings and list every option", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "svcd-man-" });
  try {
    const pages = manPages();
    assert.deepEqual(
      pages.map((p) => p.file).sort(),
      [
        "svcd.8",
        ...GROUPS.map((g) => `svcd-${g.name}.8`),
      ].sort(),
    );
    for (const page of pages) {
      const path = `${dir}/${page.file}`;
      Deno.writeTextFileSync(path, page.text);
      const groff = await runCommand("groff", ["-man", "-ww", "-z", path]);
      assert.equal(groff.code, 0, groff.text);
      assert.equal(groff.stderr, "", `groff warns about ${page.file}:\n${groff.stderr}`);
      const man = await runCommand("man", ["--warnings", "-l", path], {
        env: { MANWIDTH: "80", LANG: "C.UTF-8" },
      });
      assert.equal(man.code, 0, man.text);
      assert.equal(man.stderr, "", `man warns about ${page.file}:\n${man.stderr}`);
      for (const line of man.stdout.split("\n")) {
        assert.ok([...line].length <= 80, `${page.file}: ${line}`);
      }
      const group = GROUPS.find((g) => page.file === `svcd-${g.name}.8`);
      for (const o of group?.options ?? []) {
        const term = o.value === undefined ? `--${o.flag}` : `--${o.flag} ${o.value}`;
        const count = man.stdout.split("\n").filter((l) => l.trim() === term).length;
        assert.equal(count, 1, `${page.file} lists ${term} ${count} times`);
      }
      assert.match(man.stdout, /^EXIT STATUS$/m);
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("docs/operations.md: the options of svcd serve are the table's, as make man writes them", () => {
  const page = Deno.readTextFileSync(GUIDE);
  const { current, regenerated } = guideOptions(page);
  for (const o of GROUPS.find((g) => g.name === "serve")!.options) {
    assert.ok(current.includes(`\`--${o.flag}`), `the guide lacks --${o.flag}`);
  }
  assert.ok(regenerated === page, "docs/operations.md's options of svcd serve are stale: make man");
});

/** The guide's prose (paragraphs joined into lines) and its code (continued lines joined). */
function guideText(): { prose: string; code: string } {
  const prose: string[] = [], code: string[] = [];
  let fenced = false;
  for (const line of Deno.readTextFileSync(GUIDE).split("\n")) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else (fenced ? code : prose).push(line);
  }
  return {
    prose: prose.join(" "),
    code: code.join("\n").replace(/\\\n/g, " ").replace(/(^|\s)#.*$/gm, ""),
  };
}

/** The group and command of `svcd WORD [COMMAND] …`, and the options the rest gives. */
function commandLine(words: string): { group: CommandGroup; command?: string; flags: string[] } {
  const [name, next, ...rest] = words.trim().split(/\s+/);
  const group = GROUPS.find((g) => g.name === (name === "--check-config" ? "serve" : name))!;
  const command = group.commands.some((c) => c.name === next) ? next : undefined;
  const tail = command === undefined ? [next, ...rest] : rest;
  const flags = tail.flatMap((w) => /^--([a-z][a-z0-9-]*)/.exec(w ?? "")?.[1] ?? []);
  return { group, command, flags };
}

Deno.test("docs/operations.md: every svcd command line it shows gives only that command's options", () => {
  const { prose, code } = guideText();
  const groups = "serve|--check-config|token|ca|audit|client";
  const lines = [
    ...[...code.matchAll(new RegExp(`\\bsvcd ((?:${groups})\\b[^|;&#)\\n]*)`, "g"))],
    ...[...prose.matchAll(new RegExp(`\`svcd ((?:${groups})\\b[^\`]*)\``, "g"))],
  ].map((m) => m[1]);
  assert.ok(lines.length > 30, `only ${lines.length} svcd command lines found`);
  const wrong: string[] = [];
  for (const line of lines) {
    const { group, command, flags } = commandLine(line);
    const takes = new Set(["help", ...optionsOf(group, command).map((o) => o.flag)]);
    for (const flag of flags) if (!takes.has(flag)) wrong.push(`--${flag} in 'svcd ${line}'`);
  }
  // An option named alone is one of some command's.
  const every = new Set([
    ...GROUPS.flatMap((g) => g.options.map((o) => o.flag)),
    "help",
    "version",
  ]);
  for (const m of prose.matchAll(/`--([a-z][a-z0-9-]*)[^`]*`/g)) {
    if (m[1] !== "check-config" && !every.has(m[1])) wrong.push(`${m[0]} is no option`);
  }
  assert.deepEqual(wrong, []);
});

Deno.test("docs/operations.md: the client's environment table pairs each variable with its option", () => {
  const rows = Deno.readTextFileSync(GUIDE).matchAll(
    /^\| `(SVCD_[A-Z_]+)` +\| `(--[a-z-]+)` +\|/gm,
  );
  assert.deepEqual(Object.fromEntries([...rows].map((m) => [m[1], m[2]])), ENVIRONMENT);
  const flags = new Set(CLIENT_COMMAND.options.map((o) => `--${o.flag}`));
  for (const flag of Object.values(ENVIRONMENT)) assert.ok(flags.has(flag), flag);
});
