/**
 * Checkpoints kept off the host: a real rsyslogd (its own config, pid file and socket in a temp
 * folder, never the system's /dev/log) collects the daemon's checkpoint copies (`--syslog-socket`)
 * into a file; `svcd audit verify --checkpoints FILE` passes an intact log and finds the newest
 * audit file cut at a line boundary, or removed — which the log alone cannot show — naming the
 * checkpoint.
 */
import assert from "node:assert/strict";
import { startDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { makeTestToken } from "./support/token.ts";
import { moduleTempDir } from "./support/temp_dir.ts";
import { runDeno } from "./support/command.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../deno.json", import.meta.url).pathname;

/** Starts rsyslogd on `dir/log`, writing lines of identifier svcd-audit to `dir/checkpoints.log`. */
async function startRsyslog(
  dir: string,
): Promise<{ socket: string; collected: string; stop(): Promise<void> }> {
  const socket = `${dir}/log`;
  const collected = `${dir}/checkpoints.log`;
  await Deno.writeTextFile(
    `${dir}/rsyslog.conf`,
    `global(workDirectory="${dir}" maxMessageSize="16k")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="${socket}" RateLimit.Interval="0")
template(name="raw" type="string" string="%TIMESTAMP% %HOSTNAME% %syslogtag%%msg%\\n")
if $programname == "svcd-audit" then action(type="omfile" file="${collected}" template="raw")
`,
  );
  const child = new Deno.Command("rsyslogd", {
    args: ["-n", "-f", `${dir}/rsyslog.conf`, "-i", `${dir}/rsyslogd.pid`],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // Ready when its socket exists (it creates it before reading from it).
  for (;;) {
    try {
      await Deno.stat(socket);
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return {
    socket,
    collected,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await child.stderr.cancel();
    },
  };
}

/** The checkpoint lines of an audit folder, in order. */
async function checkpointLines(auditDir: string): Promise<string[]> {
  const out: string[] = [];
  const names = [...Deno.readDirSync(auditDir)].map((e) => e.name).sort();
  for (const n of names) {
    const text = await Deno.readTextFile(`${auditDir}/${n}`);
    out.push(...text.split("\n").filter((l) => l.startsWith('{"event":"checkpoint"')));
  }
  return out;
}

/** Waits until rsyslog has written every checkpoint line of the folder to the collected file. */
async function collectedAll(collected: string, auditDir: string): Promise<void> {
  const want = await checkpointLines(auditDir);
  for (let i = 0; i < 500; i++) {
    const have = await Deno.readTextFile(collected).catch(() => "");
    if (want.every((l) => have.includes(l))) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`rsyslog did not collect all ${want.length} checkpoint lines within 10 s`);
}

function verify(
  token: { env: Record<string, string>; modulePath: string; tokenLabel: string },
  args: string[],
) {
  return runDeno(
    [
      "--config",
      CONFIG,
      MAIN,
      "audit",
      "verify",
      "--module",
      token.modulePath,
      "--token",
      token.tokenLabel,
      ...args,
    ],
    { env: { ...token.env, NO_COLOR: "1" } },
  );
}

Deno.test({
  name:
    "syslog checkpoints: rsyslog collects them; verify --checkpoints finds a cut or removed newest file",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const rsyslog = await startRsyslog(moduleTempDir("svcd-rsyslog-"));
    const workDir = moduleTempDir("svcd-syslog-");
    try {
      for (let run = 0; run < 2; run++) {
        const d = await startDaemon({
          token,
          workDir,
          policy: `${ALICE}\tk\n`,
          args: ["--syslog-socket", rsyslog.socket, "--checkpoint-every", "5"],
        });
        for (let i = 0; i < 12; i++) {
          const r = await request(d.socket, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k"]],
            body: `m${i}`,
          });
          assert.equal(r.status, 200);
        }
        assert.equal(await d.stop(), 0);
      }
      const auditDir = `${workDir}/audit`;
      await collectedAll(rsyslog.collected, auditDir);
      const intact = await verify(token, [
        "--audit-dir",
        auditDir,
        "--checkpoints",
        rsyslog.collected,
      ]);
      assert.equal(intact.code, 0, intact.text);
      assert.match(intact.text, /checkpoints: all \d+ collected checkpoint\(s\) are in the log/);

      const names = [...Deno.readDirSync(auditDir)].map((e) => e.name).sort();
      const newest = `${auditDir}/${names.at(-1)}`;
      const original = await Deno.readTextFile(newest);
      // Cut at the last sealed line before the final checkpoint: the log alone still verifies.
      const lines = original.split("\n").slice(0, -1);
      const lastCheckpoint = lines.findLastIndex((l) => l.startsWith('{"event":"checkpoint"'));
      const keep = lines.slice(0, lastCheckpoint).findLastIndex((l) => l.includes('"seal":'));
      await Deno.writeTextFile(newest, lines.slice(0, keep + 1).map((l) => l + "\n").join(""));
      const alone = await verify(token, ["--audit-dir", auditDir]);
      assert.equal(alone.code, 0, `the cut is invisible to the log alone: ${alone.text}`);
      const cut = await verify(token, [
        "--audit-dir",
        auditDir,
        "--checkpoints",
        rsyslog.collected,
      ]);
      assert.equal(cut.code, 1, cut.text);
      const seq = JSON.parse(lines[lastCheckpoint]).seq;
      assert.match(
        cut.text,
        new RegExp(`FAILED: checkpoint seq ${seq} \\(${names.at(-1)},.*ends at seq`),
      );

      await Deno.remove(newest);
      const removed = await verify(token, [
        "--audit-dir",
        auditDir,
        "--checkpoints",
        rsyslog.collected,
      ]);
      assert.equal(removed.code, 1, removed.text);
      assert.match(removed.text, new RegExp(`FAILED: checkpoint seq \\d+ \\(${names.at(-1)},`));
      await Deno.writeTextFile(newest, original);
      const restored = await verify(token, [
        "--audit-dir",
        auditDir,
        "--checkpoints",
        rsyslog.collected,
      ]);
      assert.equal(restored.code, 0, restored.text);
    } finally {
      await rsyslog.stop();
      await token.cleanup();
    }
  },
});
