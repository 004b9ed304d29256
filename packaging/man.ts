/**
 * Writes the man pages, generated from the option tables `--help` prints: svcd(8) and
 * svcd-serve(8), svcd-token(8), svcd-ca(8), svcd-audit(8), svcd-client(8), into OUT (default
 * build/man). `make man` and packaging/build-deb.sh run it; the package installs them gzipped.
 * With `--docs FILE` it rewrites instead the generated part of the operator's guide: the options
 * of `svcd serve` (`make man` does both).
 *
 * @example
 * ```sh
 * deno run -A packaging/man.ts build/man
 * deno run -A packaging/man.ts --docs docs/operations.md
 * ```
 */
import { COMMANDS } from "../main.ts";
import { manPage, topManPage } from "../lib/cli/man.ts";
import { GENERATED_END, GENERATED_START, markdownOptions } from "../lib/cli/markdown.ts";
import { SERVE_COMMAND } from "../lib/server/daemon/serve_options.ts";
import { TOKEN_COMMAND } from "../lib/token_admin/cli.ts";
import { CA_COMMAND } from "../lib/ca/cli.ts";
import { AUDIT_COMMAND } from "../lib/audit/cli.ts";
import { CLIENT_COMMAND } from "../lib/client/cli.ts";
import pkg from "../package.json" with { type: "json" };

/** Every page: file name and its roff text. */
export function manPages(): Array<{ file: string; text: string }> {
  const groups = [SERVE_COMMAND, TOKEN_COMMAND, CA_COMMAND, AUDIT_COMMAND, CLIENT_COMMAND];
  return [
    { file: "svcd.8", text: topManPage(COMMANDS, pkg.version) },
    ...groups.map((g) => ({ file: `svcd-${g.name}.8`, text: manPage(g, pkg.version) })),
  ];
}

/**
 * The generated part of `page` (the lines between the markers) and the page with it replaced by
 * `svcd serve`'s options as the table gives them now; throws when the page has no such part.
 */
export function guideOptions(page: string): { current: string; regenerated: string } {
  const start = page.indexOf(`${GENERATED_START}\n`);
  const end = page.indexOf(`${GENERATED_END}\n`, start);
  if (start < 0 || end < 0) {
    throw new Error(`no generated part: '${GENERATED_START}' … '${GENERATED_END}' lines`);
  }
  const from = start + GENERATED_START.length + 1;
  return {
    current: page.slice(from, end),
    regenerated: `${page.slice(0, from)}\n${markdownOptions(SERVE_COMMAND)}\n${page.slice(end)}`,
  };
}

if (import.meta.main) {
  if (Deno.args[0] === "--docs") {
    const file = Deno.args[1];
    if (!file) throw new Error("--docs needs the guide's file (docs/operations.md)");
    Deno.writeTextFileSync(file, guideOptions(Deno.readTextFileSync(file)).regenerated);
    console.log(`man: the options of svcd serve in ${file}`);
  } else {
    const out = Deno.args[0] ?? new URL("../build/man", import.meta.url).pathname;
    Deno.mkdirSync(out, { recursive: true });
    for (const page of manPages()) {
      Deno.writeTextFileSync(`${out}/${page.file}`, page.text);
      console.log(`man: ${out}/${page.file}`);
    }
  }
}
