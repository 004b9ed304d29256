/**
 * Writes the man pages, generated from the option tables `--help` prints: svcd(8) and
 * svcd-serve(8), svcd-token(8), svcd-ca(8), svcd-audit(8), svcd-client(8), into OUT (default
 * build/man). `make man` and packaging/build-deb.sh run it; the package installs them gzipped.
 *
 * @example
 * ```sh
 * deno run -A packaging/man.ts build/man
 * ```
 */
import { COMMANDS } from "../main.ts";
import { manPage, topManPage } from "../lib/cli/man.ts";
import { SERVE_COMMAND } from "../lib/server/daemon/config.ts";
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

if (import.meta.main) {
  const out = Deno.args[0] ?? new URL("../build/man", import.meta.url).pathname;
  Deno.mkdirSync(out, { recursive: true });
  for (const page of manPages()) {
    Deno.writeTextFileSync(`${out}/${page.file}`, page.text);
    console.log(`man: ${out}/${page.file}`);
  }
}
