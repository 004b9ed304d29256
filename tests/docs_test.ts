/**
 * The documentation keeps its shape and stays true to the code: the README stays short, no line
 * of prose is wider than the code's, no page tells development history, every link resolves (in a
 * checkout, and for docs/ in the installed package too), every figure says when, where, on which
 * version and with which command it was measured, and docs/api.md names every route, status and
 * problem type the code serves. Routes and statuses are read from the source (the route tables and
 * the calls that make answers), found by walking lib/, so a new route or status fails here until
 * docs/api.md has it. Every exit code a page names is one of the code's, with the same cause, and
 * the source (lib/, ffi/, main.ts, pkcs11-module/, pkcs11-common/) names no outside specification:
 * it says the rule.
 */
import assert from "node:assert/strict";
import { helpInvocations } from "./support/help.ts";
import { EXIT_CODES } from "../lib/cli/exit.ts";

const REPO = new URL("..", import.meta.url).pathname;
const README_MAX_BYTES = 10 * 1024;
const MAX_COLUMNS = 100;

function read(path: string): string {
  return Deno.readTextFileSync(`${REPO}${path}`);
}

function docsPages(): string[] {
  return [...Deno.readDirSync(`${REPO}docs`)]
    .filter((e) => e.isFile && e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`)
    .sort();
}

/** README.md and every docs/*.md, the pages a reader of the project or the package sees. */
function pages(): string[] {
  return ["README.md", ...docsPages()];
}

/** Lines outside fenced code blocks, with their line numbers. */
function proseLines(text: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let fenced = false;
  text.split("\n").forEach((line, i) => {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      return;
    }
    if (!fenced) out.push([i + 1, line]);
  });
  return out;
}

/** The text of a `## heading` section, up to the next heading of the same or a higher level. */
function section(text: string, heading: string): string {
  const start = text.indexOf(`\n## ${heading}`);
  assert.ok(start >= 0, `no section '## ${heading}'`);
  const rest = text.slice(start + 1);
  const end = rest.slice(3).search(/\n## /);
  return end < 0 ? rest : rest.slice(0, end + 3);
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchorOf(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, "").replace(/ /g, "-");
}

function anchors(text: string): Set<string> {
  return new Set(
    proseLines(text).filter(([, l]) => /^#{1,6} /.test(l)).map(([, l]) =>
      anchorOf(l.replace(/^#+ /, ""))
    ),
  );
}

/** Relative links `[text](target)` in prose (not URLs, not mail). */
function links(text: string): string[] {
  const out: string[] = [];
  for (const [, line] of proseLines(text)) {
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/i.test(m[1])) out.push(m[1]);
    }
  }
  return out;
}

function resolve(from: string, target: string): { file: string; anchor?: string } {
  const [path, anchor] = target.split("#");
  if (path === "") return { file: from, anchor };
  const base = from.includes("/") ? from.slice(0, from.lastIndexOf("/") + 1) : "";
  const parts: string[] = [];
  for (const part of `${base}${path}`.split("/")) {
    if (part === "..") parts.pop();
    else if (part !== "." && part !== "") parts.push(part);
  }
  return { file: parts.join("/"), anchor };
}

function exists(path: string): boolean {
  try {
    Deno.statSync(`${REPO}${path}`);
    return true;
  } catch {
    return false;
  }
}

/** Non-test TypeScript files under a folder, recursively (lib/ is reorganised into subfolders). */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${REPO}${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...sourceFiles(path));
    else if (
      e.name.endsWith(".ts") && !e.name.endsWith("_test.ts") && !e.name.startsWith("testing")
    ) out.push(path);
  }
  return out.sort();
}

/** The source without comment lines (JSDoc, `//`), so examples in comments are not read as code. */
function code(path: string): string {
  return read(path).split("\n").filter((l) => !/^\s*(\*|\/\*|\/\/)/.test(l)).join("\n");
}

interface RouteTable {
  file: string;
  socket: "authenticated" | "public";
  routes: string[]; // "POST /sign"
}

/**
 * Every `const ROUTES … = { "/path": { METHOD: handler, … }, … }` table under lib/. A table in a
 * file whose path names "public" is the public socket's, any other the authenticated socket's.
 */
function routeTables(): RouteTable[] {
  const tables: RouteTable[] = [];
  for (const file of sourceFiles("lib")) {
    const text = code(file);
    for (const m of text.matchAll(/const ROUTES\b[^=]*=\s*\{([\s\S]*?)\n\};/g)) {
      const routes: string[] = [];
      for (const r of m[1].matchAll(/"(\/[^"]*)":\s*\{([^}]*)\}/g)) {
        for (const method of r[2].matchAll(/\b([A-Z]+)\s*:/g)) routes.push(`${method[1]} ${r[1]}`);
      }
      tables.push({ file, socket: /public/.test(file) ? "public" : "authenticated", routes });
    }
  }
  return tables;
}

/** Paths the authenticated socket refuses with a Link to the public listener (`PUBLIC_ONLY`). */
function publicOnlyPaths(): string[] {
  const paths: string[] = [];
  for (const file of sourceFiles("lib")) {
    const m = /const PUBLIC_ONLY\b[^=]*=\s*new Set\(\[([^\]]*)\]/.exec(code(file));
    if (m) paths.push(...[...m[1].matchAll(/"(\/[^"]*)"/g)].map((p) => p[1]));
  }
  return paths;
}

/**
 * Every status the code answers with: the first argument of the calls that make an answer
 * (`problem`, `typedProblem`, `refuse`, `json`) and `status: NNN` in object literals.
 */
function statuses(): Map<number, string> {
  const found = new Map<number, string>();
  const add = (n: string, file: string) => {
    const status = Number(n);
    if (status >= 100 && status < 600 && !found.has(status)) found.set(status, file);
  };
  for (const file of sourceFiles("lib")) {
    const text = code(file);
    for (const m of text.matchAll(/\b(?:problem|typedProblem|refuse|json)\(\s*([^,"'`]*),/g)) {
      for (const n of m[1].matchAll(/\b([1-5]\d\d)\b/g)) add(n[1], file);
    }
    for (const m of text.matchAll(/\bstatus:\s*([1-5]\d\d)\b/g)) add(m[1], file);
  }
  return found;
}

/** svcd's own problem types: `typedProblem(status, "slug", …)` → `urn:svcd:problem:slug`. */
function problemTypes(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles("lib")) {
    for (const m of code(file).matchAll(/\btypedProblem\(\s*[^,]+,\s*"([a-z0-9-]+)"/g)) {
      found.set(`urn:svcd:problem:${m[1]}`, file);
    }
    for (const m of code(file).matchAll(/"urn:svcd:problem:([a-z0-9-]+)"/g)) {
      found.set(`urn:svcd:problem:${m[1]}`, file);
    }
  }
  return found;
}

Deno.test("README.md is at most 10 KB", () => {
  const size = Deno.statSync(`${REPO}README.md`).size;
  assert.ok(size <= README_MAX_BYTES, `README.md is ${size} bytes, more than ${README_MAX_BYTES}`);
});

Deno.test("README.md and docs/*.md: no prose line wider than 100 columns", () => {
  const wide: string[] = [];
  for (const page of pages()) {
    for (const [n, line] of proseLines(read(page))) {
      const width = [...line].length;
      if (width > MAX_COLUMNS) wide.push(`${page}:${n} (${width} columns)`);
    }
  }
  assert.deepEqual(wide, [], "lines wider than 100 columns outside code blocks");
});

Deno.test("README.md, docs/*.md and every --help tell no development history and point nowhere outside", () => {
  const banned: Array<[RegExp, string]> = [
    [/\bsessions? \d+/i, "a work session ('session N')"],
    [/\b(?:this|that|an earlier|the last|the next) session\b/i, "a work session"],
    [/\bissues? ?[-#]?\d+/i, "an issue number"],
    [/\bthis VM\b/i, "'this VM' (name the machine and the date instead)"],
    [/\.\.\/shared\b/, "a path outside the repository"],
    [/\bspec §/i, "the spec's sections (say the rule in the project's words)"],
  ];
  const found: string[] = [];
  const texts: Array<[string, string]> = [
    ...pages().map((page): [string, string] => [page, read(page)]),
    // The command line's help texts, which the man pages are made from, are read the same way.
    ...helpInvocations().map((h): [string, string] => [`svcd ${h.args.join(" ")}`, h.text]),
  ];
  for (const [page, text] of texts) {
    text.split("\n").forEach((line, i) => {
      for (const [re, what] of banned) {
        if (re.test(line)) found.push(`${page}:${i + 1}: ${what}: ${line.trim().slice(0, 80)}`);
      }
    });
  }
  assert.deepEqual(found, []);
});

/** Files under a folder, recursively, whose names end with one of `endings` (build output left out). */
function filesUnder(dir: string, endings: string[]): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${REPO}${dir}`)) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) {
      if (e.name !== "build" && e.name !== "node_modules") out.push(...filesUnder(path, endings));
    } else if (endings.some((end) => e.name.endsWith(end))) out.push(path);
  }
  return out.sort();
}

Deno.test("the source names no outside specification: comments and strings say the rule", () => {
  const banned: Array<[RegExp, string]> = [
    [/\bthe spec\b/i, "'the spec'"],
    [/\bspec's\b/i, "'spec's'"],
    [/\bspec §/i, "a spec section"],
    [/interface-specification/i, "the specification's file"],
    [/\.\.\/shared\b/, "a path outside the repository"],
  ];
  const files = [
    ...["lib", "ffi", "pkcs11-module", "pkcs11-common"].flatMap((d) =>
      filesUnder(d, [".ts", ".c", ".h", "README.md"])
    ),
    "main.ts",
  ];
  assert.ok(files.length > 100, `only ${files.length} source files found`);
  const found: string[] = [];
  for (const file of files) {
    read(file).split("\n").forEach((line, i) => {
      for (const [re, what] of banned) {
        if (re.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim().slice(0, 80)}`);
      }
    });
  }
  assert.deepEqual(found, [], "say the rule in the project's words (or point to docs/)");
});

/** The first word of an exit code's cause ("done", "failed", "usage") or the command it is for. */
function causeKey(cause: string): string {
  return cause.replace(/`/g, "").split(/[:;(]/)[0].trim().toLowerCase();
}

Deno.test("every exit code README.md and docs/*.md name is the code's, with its cause", () => {
  const causes = new Map(EXIT_CODES.map(({ code, cause }) => [code, causeKey(cause)]));
  const problems: string[] = [];
  for (const page of pages()) {
    let table: Set<number> | undefined;
    let tableAt = 0;
    const endTable = () => {
      const missing = [...causes.keys()].filter((c) => !table!.has(c));
      if (missing.length > 0) {
        problems.push(`${page}:${tableAt}: the table lacks ${missing.join(", ")}`);
      }
      table = undefined;
    };
    for (const [n, line] of proseLines(read(page))) {
      // An exit-code table: its header's first cell is "exit" or "exit code".
      if (/^\|\s*exit(?: code)?\s*\|/i.test(line)) {
        table = new Set();
        tableAt = n;
        continue;
      }
      if (table && !line.startsWith("|")) endTable();
      if (table) {
        const row = /^\|\s*(\d+)\s*\|\s*([^|]*)\|/.exec(line);
        if (!row) continue; // the separator, or a cause continued on the next row
        const code = Number(row[1]);
        table.add(code);
        const want = causes.get(code);
        if (want === undefined) problems.push(`${page}:${n}: exit ${code} is not a code`);
        else if (causeKey(row[2]) !== want) {
          problems.push(
            `${page}:${n}: exit ${code} is '${want}', the table says '${row[2].trim()}'`,
          );
        }
        continue;
      }
      // "exit 75", "exits 3", "Exits 1 and 2", "Exit 0: …; 1: …; 2: …".
      for (const m of line.matchAll(/\bexit(?:s| codes?:?)? (\d+)((?:(?:,| and| or|;) \d+)*)/gi)) {
        for (const d of `${m[1]}${m[2]}`.matchAll(/\d+/g)) {
          if (!causes.has(Number(d[0]))) problems.push(`${page}:${n}: exit ${d[0]} is not a code`);
        }
      }
      // "0 done", "1 failed", "2 usage": a code named with its cause.
      if (/\bexit/i.test(line)) {
        for (const m of line.matchAll(/\b(\d+) (done|failed|usage)\b/g)) {
          if (causes.get(Number(m[1])) !== m[2]) {
            problems.push(
              `${page}:${n}: exit ${m[1]} is '${causes.get(Number(m[1]))}', not '${m[2]}'`,
            );
          }
        }
      }
    }
    if (table) endTable();
  }
  assert.deepEqual(problems, []);
});

Deno.test("every relative link resolves; docs/ links only within docs/ (installed together)", () => {
  const broken: string[] = [];
  for (const page of pages()) {
    for (const target of links(read(page))) {
      const { file, anchor } = resolve(page, target);
      if (!exists(file)) {
        broken.push(`${page}: ${target} (no ${file})`);
        continue;
      }
      if (page.startsWith("docs/") && !(file.startsWith("docs/") && file.endsWith(".md"))) {
        broken.push(`${page}: ${target} is not installed with the package (outside docs/*.md)`);
        continue;
      }
      if (anchor && file.endsWith(".md") && !anchors(read(file)).has(anchor)) {
        broken.push(`${page}: ${target} (no heading #${anchor} in ${file})`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

Deno.test("the package installs README.md and every docs/*.md where their links expect", () => {
  const build = read("packaging/build-deb.sh");
  assert.match(build, /docs\/\*\.md/, "packaging/build-deb.sh does not install docs/*.md");
  assert.match(build, /\bREADME\.md\b/, "packaging/build-deb.sh does not install README.md");
  // README.md links docs/x.md: the installed folder must have docs/ beside the README.
  assert.match(build, /ln -s \. "\$ROOT\/usr\/share\/doc\/svcd\/docs"/);
});

Deno.test("every figure in docs/performance.md and docs/reliability.md says when, where, how", () => {
  for (const page of ["docs/performance.md", "docs/reliability.md"]) {
    const text = read(page);
    const parts = text.split(/\n### /).slice(1);
    assert.ok(parts.length > 0, `${page}: no '### ' measurement sections`);
    for (const part of parts) {
      const title = part.slice(0, part.indexOf("\n"));
      const measured = /^Measured: (.*)$/m.exec(part)?.[1] ?? "";
      assert.match(measured, /\b20\d\d-\d\d-\d\d\b/, `${page} '${title}': no date`);
      assert.match(measured, /\bmachine\b|\bcores?\b/, `${page} '${title}': no machine`);
      assert.match(measured, /\bsvcd \d+\.\d+\.\d+/, `${page} '${title}': no version`);
      assert.match(part, /`(?:deno|make|nice|for|bash) [^`]+`/, `${page} '${title}': no command`);
    }
  }
});

Deno.test("the route tables are read from the code (the checks below see them)", () => {
  const tables = routeTables();
  assert.ok(tables.some((t) => t.socket === "authenticated" && t.routes.includes("POST /sign")));
  assert.ok(tables.some((t) => t.socket === "public" && t.routes.includes("POST /ocsp")));
  assert.ok(publicOnlyPaths().length > 0, "PUBLIC_ONLY not found");
  const found = statuses();
  for (const s of [200, 400, 403, 404, 405, 413, 422, 429, 503]) assert.ok(found.has(s), `${s}`);
});

Deno.test("docs/api.md names every route of both sockets, under its socket", () => {
  const api = read("docs/api.md");
  const sections = {
    authenticated: section(api, "The authenticated socket"),
    public: section(api, "The public socket"),
  };
  const missing: string[] = [];
  for (const table of routeTables()) {
    for (const route of table.routes) {
      if (!sections[table.socket].includes(`\`${route}\``)) {
        missing.push(`${route} (${table.socket} socket, ${table.file})`);
      }
    }
  }
  for (const path of publicOnlyPaths()) {
    if (!sections.authenticated.includes(`\`${path}\``)) {
      missing.push(`${path} (the authenticated socket's 404 with Link)`);
    }
  }
  assert.deepEqual(missing, [], "routes the code serves that docs/api.md does not name");
});

Deno.test("docs/api.md lists every status and problem type the code answers with", () => {
  const api = read("docs/api.md");
  const listed = section(api, "Statuses");
  const missing: string[] = [];
  for (const [status, file] of statuses()) {
    if (!listed.includes(`\`${status}\``)) missing.push(`${status} (from ${file})`);
  }
  const types = section(api, "Problem types");
  for (const [type, file] of problemTypes()) {
    if (!types.includes(`\`${type}\``)) missing.push(`${type} (from ${file})`);
  }
  assert.deepEqual(missing, [], "statuses or problem types missing from docs/api.md");
});
