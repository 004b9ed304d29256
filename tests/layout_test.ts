/**
 * The README's layout table matches the tree: every path it names exists, and every folder of the
 * repository (top level, lib/ and tests/) has a row, so a newcomer can trust the table. Files stay
 * small enough to read whole: a folder of lib/ has at most 12 source files, a source file at most
 * 600 lines.
 */
import assert from "node:assert/strict";
import { runCommand } from "./support/command.ts";

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
 * Files and folders over the limits today, which other changes split; the list may only shrink.
 */
const OVER_LIMITS = new Set<string>([]);

Deno.test("lib/: a folder has at most 12 source files", () => {
  const over: string[] = [];
  for (const [folder, files] of sourceFiles("lib/")) {
    if (files.length > 12 && !OVER_LIMITS.has(folder)) {
      over.push(`${folder}: ${files.length} files`);
    }
  }
  assert.deepEqual(over, []);
});

/** A test: a Deno test file or a C test program; the line limit leaves them out. */
const isTest = (path: string) => /_test\.(ts|c)$/.test(path);

/**
 * The source files (.ts, .c, .h) of the checkout, tracked or new (what .gitignore leaves out, such
 * as node_modules/ and build output, is not source), tests not counted. Of tests/, only the test
 * module tests/module/ counts: it is a PKCS#11 module like the product's, the rest is tests.
 */
async function sourceFilesEverywhere(): Promise<string[]> {
  const git = await runCommand("git", [
    ...["-C", REPO, "ls-files", "--cached", "--others", "--exclude-standard"],
    ...["--", "*.ts", "*.c", "*.h"],
  ]);
  assert.equal(git.code, 0, git.text);
  return git.stdout.split("\n").filter((path) =>
    path !== "" && existsFile(path) && !isTest(path) &&
    (!path.startsWith("tests/") || path.startsWith("tests/module/"))
  );
}

const lineCount = (path: string) => Deno.readTextFileSync(`${REPO}${path}`).split("\n").length - 1;

Deno.test("every source file has at most 600 lines, tests not counted", async () => {
  const files = await sourceFilesEverywhere();
  assert.ok(files.includes("main.ts"), "main.ts is not among the source files counted");
  const roots = ["lib/", "bench/", "ffi/", "pkcs11-common/", "pkcs11-module/", "tests/module/"];
  for (const root of roots) {
    assert.ok(files.some((f) => f.startsWith(root)), `no source file counted under ${root}`);
  }
  const over = files.filter((f) => !OVER_LIMITS.has(f))
    .map((f) => ({ file: f, lines: lineCount(f) }))
    .filter((f) => f.lines > 600)
    .map((f) => `${f.file}: ${f.lines} lines`);
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
