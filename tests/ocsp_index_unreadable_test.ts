/**
 * The revocation database read as a user who may stat the file but not open it (mode 000 after a
 * rewrite): no answer (the responder says tryLater), never the database read before the rewrite,
 * and the file is read as soon as it can be.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { denoAnyUserCanRun, sourceAnyUserCanRead } from "./support/any_user.ts";

const CHILD = "tests/support/index_unreadable_child.ts";
const NOBODY = 65534;
const canDropPrivileges = Deno.uid() === 0 &&
  await new Deno.Command("setpriv", { args: ["--version"], stdout: "null", stderr: "null" })
    .output().then((r) => r.success, () => false);

Deno.test({
  name: "index source: a rewritten file that cannot be opened gets no answer, not the old one",
  ignore: !canDropPrivileges,
  fn: async () => {
    const dir = moduleTempDir("svcd-index-unreadable-");
    Deno.chownSync(dir, NOBODY, NOBODY);
    Deno.chmodSync(dir, 0o755);
    // The child's user may not read this checkout: it runs copies from the test's own folder.
    const deno = denoAnyUserCanRun(dir);
    const src = sourceAnyUserCanRead(dir, ["lib", "ffi", CHILD]);
    const run = await new Deno.Command("setpriv", {
      args: [
        `--reuid=${NOBODY}`,
        `--regid=${NOBODY}`,
        "--clear-groups",
        deno,
        "run",
        "--allow-read",
        "--allow-write",
        "--allow-ffi",
        `${src}/${CHILD}`,
        dir,
      ],
      env: { DENO_DIR: `${dir}/deno`, HOME: dir, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(run.stderr);
    assert.equal(run.code, 0, err);
    const seen = JSON.parse(new TextDecoder().decode(run.stdout));
    assert.equal(seen.before, "V");
    assert.equal(seen.unreadable, null, "the database read before the rewrite answered");
    assert.match(seen.error, /cannot read .*index\.txt/);
    assert.equal(seen.again, null);
    assert.equal(seen.readable, "R", "read again once it could be");
  },
});
