import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { writeFileAtomic } from "./atomic.ts";

const isRoot = Deno.uid() === 0;

async function withDir(fn: (dir: string) => Promise<void>) {
  const dir = moduleTempDir("ca-atomic-");
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("writeFileAtomic: replaces the content, keeps the mode, leaves no temporary file", () =>
  withDir(async (dir) => {
    const path = `${dir}/index.txt`;
    await writeFileAtomic(path, new TextEncoder().encode("one\n"), 0o600);
    assert.equal((await Deno.stat(path)).mode! & 0o7777, 0o600);
    await Deno.chmod(path, 0o640);
    await writeFileAtomic(path, new TextEncoder().encode("two\n"));
    assert.equal(await Deno.readTextFile(path), "two\n");
    assert.equal((await Deno.stat(path)).mode! & 0o7777, 0o640);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["index.txt"]);
  }));

Deno.test({
  name: "writeFileAtomic: run as root on a 0640 file of another owner and group, keeps both",
  ignore: !isRoot,
  fn: () =>
    withDir(async (dir) => {
      // Ids that name no account: what matters is that they are not root's.
      const [uid, gid] = [64_321, 64_322];
      const path = `${dir}/index.txt`;
      await Deno.writeTextFile(path, "old\n", { mode: 0o640 });
      await Deno.chown(path, uid, gid);
      await Deno.chmod(path, 0o2640); // chown clears set-id bits; the mode must still come back
      await writeFileAtomic(path, new TextEncoder().encode("new\n"));
      const st = await Deno.stat(path);
      assert.deepEqual([st.uid, st.gid, st.mode! & 0o7777], [uid, gid, 0o2640]);
      assert.equal(await Deno.readTextFile(path), "new\n");
    }),
});
