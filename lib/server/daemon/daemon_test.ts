/**
 * The daemon's start-up against a real token: a step that fails or is interrupted closes what the
 * steps before it opened (the refusal state, the login), and a SIGTERM at any moment after the
 * process started is a clean stop.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";
import { RefusalBudget } from "../../throttle/mod.ts";
import { callCount } from "../../../tests/support/pkcs11_calls.ts";
import { makeTestToken, type TestToken } from "../../../tests/support/token.ts";
import { readAuditLines } from "../../../tests/support/audit.ts";
import { serveArgs } from "../../../tests/support/daemon.ts";
import { parseServeArgs, type ServeConfig } from "./config.ts";
import { runDaemon } from "./daemon.ts";

async function inProcess(
  fn: (token: TestToken, config: (extra?: string[]) => ServeConfig, dir: string) => Promise<void>,
): Promise<void> {
  const token = await makeTestToken({ keys: {} });
  const dir = moduleTempDir("svcd-daemon-");
  for (const [k, v] of Object.entries(token.module.env)) Deno.env.set(k, v);
  try {
    await Deno.writeTextFile(`${dir}/policy`, "");
    const env = {
      get: (n: string) => n === "CREDENTIALS_DIRECTORY" ? token.credentialsDir : undefined,
    };
    await fn(
      token,
      (extra) => parseServeArgs([...serveArgs(token, dir, Deno.uid()), ...(extra ?? [])], env),
      dir,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
    await token.cleanup();
  }
}

Deno.test({
  name:
    "daemon: a token that cannot be opened leaves the refusal state closed (not held exclusive)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    inProcess(async (_token, config, dir) => {
      await assert.rejects(runDaemon(config(["--token", "no-such-token"])), /no-such-token/);
      RefusalBudget.open({ stateDir: `${dir}/state` }).close(); // throws "locked" while held
    }),
});

Deno.test({
  name: "daemon: an audit log that cannot be opened leaves the token logged out and finalised",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    inProcess(async (token, config, dir) => {
      const finalized = callCount(token.modulePath, "C_Finalize");
      await assert.rejects(
        runDaemon(config(), { openAudit: () => Promise.reject(new Error("no audit today")) }),
        /no audit today/,
      );
      assert.equal(callCount(token.modulePath, "C_Finalize"), finalized + 1);
      RefusalBudget.open({ stateDir: `${dir}/state` }).close();
    }),
});

Deno.test({
  name:
    "daemon: SIGTERM between the login and the audit opening stops cleanly: exit 0, shutdown line",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    const dir = moduleTempDir("svcd-daemon-");
    try {
      await Deno.writeTextFile(`${dir}/policy`, "");
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          new URL("../../../tests/support/daemon_held_audit.ts", import.meta.url).pathname,
          ...serveArgs(token, dir, Deno.uid()),
        ],
        env: { ...token.env, NO_COLOR: "1" },
        stdin: "piped",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const stdin = child.stdin.getWriter();
      let log = "";
      const decoder = new TextDecoder();
      const stderr = child.stderr.getReader();
      while (!log.includes("audit opening held")) {
        const { value, done } = await stderr.read();
        if (done) break;
        log += decoder.decode(value, { stream: true });
      }
      assert.match(log, /logged in to token/);
      child.kill("SIGTERM");
      // The signal is delivered before the audit opening is let go: without a listener by then,
      // the process is already dead (143) and the write below fails or is never read.
      while (!log.includes("stopping: signal")) {
        const { value, done } = await stderr.read();
        if (done) break;
        log += decoder.decode(value, { stream: true });
      }
      await stdin.write(new TextEncoder().encode("go\n")).catch(() => {});
      await stdin.close().catch(() => {});
      for (let r = await stderr.read(); !r.done; r = await stderr.read()) {
        log += decoder.decode(r.value, { stream: true });
      }
      const status = await child.status;
      assert.equal(status.code, 0, log);
      assert.match(log, /stopping: signal/);
      assert.match(log, /stopped \(exit 0\)/);
      assert.doesNotMatch(log, /listening on/, "a stop requested during start-up never listens");
      const events = (await readAuditLines(`${dir}/audit`)).map((l) => l.event);
      assert.deepEqual(events.slice(-2), ["shutdown", "checkpoint"]);
      assert.equal(events[0], "login_ok");
    } finally {
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});
