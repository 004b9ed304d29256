/**
 * `make binary` (packaging/build-binary.sh): it refuses a DENORT_BIN that is not a denort — unset,
 * not executable, any executable, and the deno CLI (which would give a program that starts the
 * REPL) — and compiles only the bundle: the daemon's svcd.js and the listeners' Workers (public,
 * request threads), never node_modules.
 *
 * No denort is reachable here (design notes), so the last step uses a stand-in: the deno CLI with
 * the runtime's start-up message appended, which is what the script checks for. deno compile
 * accepts it and lists what it embedded; the resulting file is never run.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { runCommand } from "./support/command.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const DENORT_MARKER = "Could not find standalone binary section.";

function makeBinary(env: Record<string, string>) {
  return runCommand("bash", ["packaging/build-binary.sh"], {
    cwd: ROOT,
    env: { NO_COLOR: "1", ...env },
  });
}

Deno.test({
  name: "binary: a non-denort DENORT_BIN is refused; a denort gets only the bundle embedded",
  sanitizeResources: false,
  fn: async (t) => {
    const dir = moduleTempDir("svcd-binary-");
    try {
      await t.step(
        "unset, not executable, any executable, the deno CLI: exit 2, nothing built",
        async () => {
          await Deno.writeTextFile(`${dir}/plain`, DENORT_MARKER);
          const cases: Array<[Record<string, string>, RegExp]> = [
            [{}, /set DENORT_BIN to a denort/],
            [{ DENORT_BIN: `${dir}/plain` }, /is not an executable file/],
            [{ DENORT_BIN: "/bin/true" }, /is not a denort/],
            [{ DENORT_BIN: Deno.execPath() }, /is not a denort .*the deno CLI is not a denort/],
          ];
          for (const [env, message] of cases) {
            const r = await makeBinary({ ...env, SVCD_BUILD_DIR: `${dir}/out` });
            assert.equal(r.code, 2, r.text);
            assert.match(r.stderr, message);
            await Deno.stat(`${dir}/out/svcd`).then(
              () => assert.fail("a binary was built"),
              () => {},
            );
          }
        },
      );

      await t.step(
        "a denort: the executable embeds svcd.js and its Worker, nothing else",
        async () => {
          const standIn = `${dir}/denort`;
          await Deno.copyFile(Deno.execPath(), standIn);
          await Deno.writeTextFile(standIn, DENORT_MARKER, { append: true });
          await Deno.chmod(standIn, 0o755);
          const r = await makeBinary({ DENORT_BIN: standIn, SVCD_BUILD_DIR: `${dir}/out` });
          assert.equal(r.code, 0, r.text);
          const embedded = r.text.slice(r.text.indexOf("Embedded Files"));
          const files = [...embedded.matchAll(/[├└]── (\S+)/g)].map((m) => m[1]).sort();
          assert.deepEqual(
            files,
            ["svcd-public-worker.js", "svcd-request-worker.js", "svcd.js"],
            embedded,
          );
          assert.doesNotMatch(r.text, /node_modules/);
          assert.ok((await Deno.stat(`${dir}/out/svcd`)).isFile);
        },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
