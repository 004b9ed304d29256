/**
 * The C folders keep their shape. Each folder's README has a file map that names every file of the
 * folder and no other. No C file depends on another that depends back on it, neither through
 * `#include "…"` nor through the symbols its object file takes from another's (foo.h and foo.c
 * count as one unit, foo): a module's entry points delegate down, and nothing below calls back up.
 */
import assert from "node:assert/strict";
import { runCommand } from "./support/command.ts";

const REPO = new URL("..", import.meta.url).pathname;

/**
 * Each C folder: where its README is, the source folders compiled into its library or program, and
 * folders it takes only headers from.
 */
const FOLDERS: { dir: string; sources: string[]; headers?: string[] }[] = [
  { dir: "pkcs11-common", sources: ["pkcs11-common"] },
  { dir: "pkcs11-module", sources: ["pkcs11-module/src", "pkcs11-common"] },
  { dir: "tests/module", sources: ["tests/module/src", "pkcs11-common"] },
  { dir: "bench/limit", sources: ["bench/limit"], headers: ["pkcs11-common"] },
];

/** Files of a folder the map must name: not the README itself, dot files or build output. */
function filesOf(dir: string, under = ""): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${REPO}${dir}/${under}`)) {
    if (e.name.startsWith(".") || e.name === "build") continue;
    const path = `${under}${e.name}`;
    if (e.isDirectory) out.push(...filesOf(dir, `${path}/`));
    else if (path !== "README.md") out.push(path);
  }
  return out.sort();
}

/** The paths in the first column of the table under the README's "## Files" heading. */
function mappedFiles(readme: string): string[] {
  const start = readme.search(/^## Files/m);
  assert.ok(start >= 0, "no '## Files' section");
  const section = readme.slice(start).split(/\n## /)[0];
  const rows = [...section.matchAll(/^\| ([^|]+)\|/gm)].map((m) => m[1]);
  return rows.flatMap((cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1])).sort();
}

for (const { dir } of FOLDERS) {
  Deno.test(`${dir}/README.md maps every file of the folder, one row each, and no other`, () => {
    const mapped = mappedFiles(Deno.readTextFileSync(`${REPO}${dir}/README.md`));
    assert.deepEqual(mapped, filesOf(dir));
  });
}

type Graph = Map<string, Set<string>>;

const unitOf = (path: string) => path.replace(/^.*\//, "").replace(/\.[ch]$/, "");

function addEdge(graph: Graph, from: string, to: string) {
  if (from === to) return;
  if (!graph.has(from)) graph.set(from, new Set());
  graph.get(from)!.add(to);
}

/** One cycle of the graph as "a -> b -> a", or undefined when it has none. */
function findCycle(graph: Graph): string | undefined {
  const state = new Map<string, "open" | "done">();
  const visit = (node: string, path: string[]): string | undefined => {
    state.set(node, "open");
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === "open") {
        return [...path.slice(path.indexOf(next)), next].join(" -> ");
      }
      if (!state.has(next)) {
        const found = visit(next, [...path, next]);
        if (found) return found;
      }
    }
    state.set(node, "done");
    return undefined;
  };
  for (const node of graph.keys()) {
    if (state.has(node)) continue;
    const found = visit(node, [node]);
    if (found) return found;
  }
  return undefined;
}

function sourceFiles(folders: string[]): string[] {
  return folders.flatMap((dir) =>
    [...Deno.readDirSync(`${REPO}${dir}`)]
      .filter((e) => e.isFile && /\.[ch]$/.test(e.name))
      .map((e) => `${dir}/${e.name}`)
  );
}

function includeGraph(files: string[]): Graph {
  const units = new Set(files.map(unitOf));
  const graph: Graph = new Map();
  for (const file of files) {
    for (const m of Deno.readTextFileSync(`${REPO}${file}`).matchAll(/^#include "([^"]+)"/gm)) {
      if (units.has(unitOf(m[1]))) addEdge(graph, unitOf(file), unitOf(m[1]));
    }
  }
  return graph;
}

/** Which unit's object file defines each symbol another unit's object file takes. */
async function symbolGraph(files: string[], includes: string[], tmp: string): Promise<Graph> {
  const defines = new Map<string, string>();
  const takes = new Map<string, string[]>();
  for (const file of files.filter((f) => f.endsWith(".c"))) {
    const object = `${tmp}/${unitOf(file)}.o`;
    const cc = await runCommand("gcc", [
      "-c",
      "-std=c11",
      "-D_GNU_SOURCE",
      "-pthread",
      ...includes.map((dir) => `-I${REPO}${dir}`),
      "-o",
      object,
      `${REPO}${file}`,
    ]);
    assert.equal(cc.code, 0, cc.text);
    const nm = await runCommand("nm", [object]);
    assert.equal(nm.code, 0, nm.text);
    for (const line of nm.stdout.split("\n")) {
      const [a, b, c] = line.trim().split(/\s+/);
      if (a === "U") takes.set(unitOf(file), [...takes.get(unitOf(file)) ?? [], b]);
      else if (c !== undefined && "TDBR".includes(b)) defines.set(c, unitOf(file));
    }
  }
  const graph: Graph = new Map();
  for (const [unit, symbols] of takes) {
    for (const symbol of symbols) {
      const owner = defines.get(symbol);
      if (owner !== undefined) addEdge(graph, unit, owner);
    }
  }
  return graph;
}

for (const { dir, sources, headers = [] } of FOLDERS.slice(1)) {
  Deno.test(`${dir}: no dependency cycle between its C files, by include or by symbol`, async () => {
    const files = sourceFiles(sources);
    const tmp = await Deno.makeTempDir({ prefix: "svcd-c-layout-" });
    try {
      assert.equal(findCycle(includeGraph(files)), undefined, "an #include cycle");
      const symbols = await symbolGraph(files, [...sources, ...headers], tmp);
      assert.ok(symbols.size > 5, `only ${symbols.size} units take symbols from others`);
      assert.equal(findCycle(symbols), undefined, "a cycle of object files taking symbols");
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  });
}

Deno.test("findCycle names a cycle and passes a graph without one", () => {
  const graph: Graph = new Map();
  addEdge(graph, "p11_sign", "operation");
  addEdge(graph, "operation", "slot");
  assert.equal(findCycle(graph), undefined);
  addEdge(graph, "slot", "p11_sign");
  assert.equal(findCycle(graph), "p11_sign -> operation -> slot -> p11_sign");
});
