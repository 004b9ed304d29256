/**
 * The bundle the package and the binary ship (packaging/lib.sh `bundle_svcd`: svcd.js and the
 * listeners' Workers beside it) serves with request threads: `svcd.js serve --threads 2` finds
 * svcd-request-worker.js beside itself (lib/server/threads/thread_group.ts `threadModule()`), where no
 * source file is, and signs; with the main thread serving, it finds svcd-sign-worker.js likewise.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { makeTestToken } from "./support/token.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const SUBJECT = "CN=alice,O=Example";

Deno.test({
  name: "bundle: svcd.js serves /sign from the bundled request Worker and sign thread",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = moduleTempDir("svcd-bundle-");
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    try {
      const bundled = await new Deno.Command("bash", {
        args: ["-c", `. packaging/lib.sh && bundle_svcd "$1"`, "bundle", dir],
        cwd: ROOT,
        env: { DENO: Deno.execPath() },
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(bundled.code, 0, new TextDecoder().decode(bundled.stderr));
      const files = [...Deno.readDirSync(dir)].map((e) => e.name).sort();
      assert.deepEqual(files, [
        "svcd-policy-worker.js",
        "svcd-public-worker.js",
        "svcd-request-worker.js",
        "svcd-sign-worker.js",
        "svcd.js",
      ]);

      // Request threads, and the main thread with its sign thread: each from its own Worker file.
      // The sign thread runs only with a second core; 8 requests at once (under the cap) keep it busy.
      const variants: [string[], RegExp][] = [[["--threads", "2"], /2 threads, 16 workers/]];
      if (navigator.hardwareConcurrency > 1) variants.push([[], /sign thread/]);
      for (const [args, served] of variants) {
        const d = await startDaemon({
          token,
          policy: `${SUBJECT}\tk\n`,
          command: [Deno.execPath(), "run", "-A", `${dir}/svcd.js`, "serve"],
          args,
        });
        try {
          assert.match(d.stderr(), served);
          const answers = await Promise.all(Array.from({ length: 8 }, () =>
            request(d.socket, {
              method: "POST",
              path: "/sign",
              headers: [["X-SVC-Client-Subject", SUBJECT], ["X-SVC-Key", "k"]],
              body: "bundled",
            })));
          for (const res of answers) assert.equal(res.status, 200, res.text());
        } finally {
          assert.equal(await d.stop(), 0, d.stderr());
        }
      }
      if (navigator.hardwareConcurrency > 1) {
        // Without its Worker file the daemon does not start on the main thread alone: it says why.
        await Deno.remove(`${dir}/svcd-sign-worker.js`);
        await assert.rejects(
          startDaemon({
            token,
            policy: `${SUBJECT}\tk\n`,
            command: [Deno.execPath(), "run", "-A", `${dir}/svcd.js`, "serve"],
          }),
          /sign thread.s module is missing.*reinstall the package/,
        );
      }
    } finally {
      await token.cleanup();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
