/**
 * `make binary` (packaging/build-binary.sh): it refuses a DENORT_BIN that is not a denort — unset,
 * not executable, any executable, and the deno CLI (which would give a program that starts the
 * REPL) — and compiles only the bundle: the daemon's svcd.js and the listeners' Workers (public,
 * request threads), never node_modules; and svcd-client, the same bundle with the client's
 * permissions (the daemon's binary keeps no network access) and its `client` argument built in.
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

/** The file names a deno compile report lists as embedded, sorted. */
function embeddedFiles(report: string): string[] {
  return [...report.matchAll(/[├└]── (\S+)/g)].map((m) => m[1]).sort();
}

interface CompiledMetadata {
  argv: string[];
  permissions: Record<string, string[] | null>;
}

/** The argv and permissions deno compile wrote into an executable (its metadata, JSON). */
async function metadata(path: string): Promise<CompiledMetadata> {
  const bytes = await Deno.readFile(path);
  const text = new TextDecoder("latin1").decode(bytes);
  const argv = text.match(/"argv":(\[[^\]]*\])/);
  const permissions = text.match(/"permissions":(\{[^}]*\})/);
  assert.ok(argv && permissions, `${path}: no metadata`);
  return { argv: JSON.parse(argv[1]), permissions: JSON.parse(permissions[1]) };
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
        "a denort: svcd embeds the bundle and its Workers with the daemon's permissions; " +
          "svcd-client the bundle alone, with the client's permissions and `client` built in",
        async () => {
          const standIn = `${dir}/denort`;
          await Deno.copyFile(Deno.execPath(), standIn);
          await Deno.writeTextFile(standIn, DENORT_MARKER, { append: true });
          await Deno.chmod(standIn, 0o755);
          const r = await makeBinary({ DENORT_BIN: standIn, SVCD_BUILD_DIR: `${dir}/out` });
          assert.equal(r.code, 0, r.text);
          // deno compile's two reports, in the order the script compiles: svcd, then svcd-client.
          const [, daemonPart, clientPart] = r.stderr.split("Embedded Files");
          assert.ok(clientPart, r.text);
          assert.deepEqual(embeddedFiles(daemonPart), [
            "svcd-policy-worker.js",
            "svcd-public-worker.js",
            "svcd-request-worker.js",
            "svcd-sign-worker.js",
            "svcd.js",
          ]);
          assert.deepEqual(embeddedFiles(clientPart), ["svcd.js"]);
          assert.doesNotMatch(r.text, /node_modules/);

          const daemon = await metadata(`${dir}/out/svcd`);
          assert.deepEqual(daemon.argv, []);
          assert.equal(daemon.permissions.allow_net, null, "the daemon has no network");
          assert.deepEqual(daemon.permissions.allow_ffi, []);
          assert.deepEqual(daemon.permissions.allow_env, [
            "CREDENTIALS_DIRECTORY",
            "NOTIFY_SOCKET",
          ]);
          const client = await metadata(`${dir}/out/svcd-client`);
          assert.deepEqual(client.argv, ["client"]);
          assert.deepEqual(client.permissions.allow_net, []);
          assert.equal(client.permissions.allow_ffi, null, "the client loads no library");
          assert.equal(client.permissions.allow_run, null, "the client runs no program");
          assert.deepEqual(client.permissions.allow_env, [
            "SVCD_ADDR",
            "SVCD_CACERT",
            "SVCD_CLIENT_CERT",
            "SVCD_CLIENT_KEY",
          ]);
        },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
