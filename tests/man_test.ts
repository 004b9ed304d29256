/**
 * The man pages packaging/man.ts generates from the option tables: each renders with man -l and
 * groff without a single warning, and lists every option of its group's table.
 */
import assert from "node:assert/strict";
import { runCommand } from "./support/command.ts";
import { manPages } from "../packaging/man.ts";
import { GROUPS } from "./support/help.ts";

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
