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

/** The source files (tests not counted) of every folder under `dir`, by folder. */
function sourceFiles(dir: string, out = new Map<string, string[]>()): Map<string, string[]> {
  for (const e of Deno.readDirSync(`${REPO}${dir}`)) {
    if (e.isDirectory) sourceFiles(`${dir}${e.name}/`, out);
    else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) {
      out.set(dir, [...(out.get(dir) ?? []), `${dir}${e.name}`]);
    }
  }
  return out;
}

/** The relative specifiers a file imports (comments, where examples live, left out). */
function importsOf(path: string): string[] {
  const code = Deno.readTextFileSync(`${REPO}${path}`).replace(/\/\*[\s\S]*?\*\//g, "");
  return [...code.matchAll(/(?:from|import\()\s*"(\.[^"]+\.ts)"/g)].map((m) => m[1]);
}

/** `spec` as imported from `path`, relative to the repository. */
function resolved(path: string, spec: string): string {
  return new URL(spec, `file://${REPO}${path}`).pathname.slice(REPO.length);
}

/**
 * Files and folders of lib/ over the limits today, which other changes split; the list may only
 * shrink.
 */
const OVER_LIMITS = new Set<string>([]);

Deno.test("lib/: a folder has at most 12 source files, a source file at most 600 lines", () => {
  const over: string[] = [];
  for (const [folder, files] of sourceFiles("lib/")) {
    if (files.length > 12 && !OVER_LIMITS.has(folder)) {
      over.push(`${folder}: ${files.length} files`);
    }
    for (const file of files) {
      const lines = Deno.readTextFileSync(`${REPO}${file}`).split("\n").length - 1;
      if (lines > 600 && !OVER_LIMITS.has(file)) over.push(`${file}: ${lines} lines`);
    }
  }
  assert.deepEqual(over, []);
});

/**
 * Imports around a mod.ts that other changes convert (importing folder → imported folder); a
 * part's `cli.ts` is a program of its own, which main.ts and the man pages may name.
 */
const AROUND_MOD = new Set<string>([]);

Deno.test("lib/: a part with a mod.ts is imported only through it; an `_x.ts` file only inside", () => {
  const parts = [...sourceFiles("lib/").keys(), ...sourceFiles("ffi/").keys()]
    .filter((folder) => existsFile(`${folder}mod.ts`));
  const importers = [
    "main.ts",
    ...[...sourceFiles("lib/").values()].flat(),
    ...[...sourceFiles("tests/").values()].flat(),
    ...[...sourceFiles("bench/").values()].flat(),
  ];
  const around: string[] = [];
  for (const importer of importers) {
    const from = importer.slice(0, importer.lastIndexOf("/") + 1);
    for (const target of importsOf(importer).map((spec) => resolved(importer, spec))) {
      const folder = target.slice(0, target.lastIndexOf("/") + 1);
      const name = target.slice(folder.length);
      if (from.startsWith(folder)) continue;
      if (name.startsWith("_")) {
        around.push(`${importer} → ${target}`);
        continue;
      }
      const part = parts.find((p) => folder === p);
      if (!part || !importer.startsWith("lib/") && importer !== "main.ts") continue;
      if (name === "mod.ts" || name === "cli.ts") continue;
      if (AROUND_MOD.has(`${from.split("/").slice(0, 2).join("/")}/ → ${part}`)) continue;
      around.push(`${importer} → ${target}`);
    }
  }
  assert.deepEqual(around, []);
});

function existsFile(path: string): boolean {
  try {
    return Deno.statSync(`${REPO}${path}`).isFile;
  } catch {
    return false;
  }
}
