/**
 * Run by tests/ocsp_index_unreadable_test.ts as an unprivileged user (for whom a file of mode 000
 * cannot be opened): an index file read once, then rewritten with its certificate revoked and
 * made unreadable, then readable again. Prints what each query saw, as one JSON line.
 *
 * @example
 * ```sh
 * setpriv --reuid=65534 --regid=65534 --clear-groups deno run --allow-read --allow-write \
 *   --allow-ffi tests/support/index_unreadable_child.ts /tmp/dir-of-that-user
 * ```
 */
import { IndexFileSource } from "../../lib/ocsp/index_source.ts";
import { formatIndexLine } from "../../lib/ocsp/index_db.ts";

const dir = Deno.args[0];
const path = `${dir}/index.txt`;
const line = (status: "V" | "R") =>
  formatIndexLine({
    status,
    expires: Date.UTC(2035, 5, 30),
    serial: "0B",
    subject: "/CN=b",
    ...(status === "R" ? { revokedAt: Date.UTC(2026, 0, 2), reason: 1 } : {}),
  });

Deno.writeTextFileSync(path, line("V"), { mode: 0o644 });
const source = new IndexFileSource(path);
const before = (await source.current())?.lookup("B")?.status ?? null;
Deno.writeTextFileSync(path, line("R"));
Deno.chmodSync(path, 0o000);
const unreadable = (await source.current())?.lookup("B")?.status ?? null;
const error = source.lastError;
const again = (await source.current())?.lookup("B")?.status ?? null;
Deno.chmodSync(path, 0o644);
const readable = (await source.current())?.lookup("B")?.status ?? null;
console.log(JSON.stringify({ before, unreadable, again, error, readable }));
