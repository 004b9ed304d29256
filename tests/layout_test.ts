/**
 * The README's layout table matches the tree: every path it names exists, and every folder of the
 * repository (top level, lib/ and tests/) has a row, so a newcomer can trust the table.
 */
import assert from "node:assert/strict";

const REPO = new URL("..", import.meta.url).pathname;

/** Folders a checkout has that are not part of the source (tools, build output, local state). */
const NOT_SOURCE = new Set(["node_modules", "build"]);

function folders(dir: string): string[] {
  return [...Deno.readDirSync(`${REPO}${dir}`)]
    .filter((e) => e.isDirectory && !e.name.startsWith(".") && !NOT_SOURCE.has(e.name))
    .map((e) => `${dir}${e.name}/`)
    .sort();
}

function layoutRows(readme: string): string[] {
  const section = readme.slice(readme.indexOf("## Layout"));
  const table = section.slice(0, section.indexOf("\n## "));
  return [...table.matchAll(/^\| `([^`]+)`/gm)].map((m) => m[1]);
}

Deno.test("README layout table: every row names a path that exists, every folder has a row", () => {
  const rows = layoutRows(Deno.readTextFileSync(`${REPO}README.md`));
  assert.ok(rows.length > 5, "no layout table found under '## Layout'");
  for (const path of rows) {
    assert.doesNotThrow(
      () => Deno.statSync(`${REPO}${path}`),
      `README names ${path}, not in the tree`,
    );
  }
  const tree = [...folders(""), ...folders("lib/"), ...folders("tests/")]
    .filter((f) => f !== "lib/" && f !== "tests/support/"); // lib/ has no row of its own
  const missing = tree.filter((f) => !rows.includes(f));
  assert.deepEqual(missing, [], "folders without a row in the README's layout table");
});
