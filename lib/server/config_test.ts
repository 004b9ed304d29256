import assert from "node:assert/strict";
import { ConfigError, parseServeArgs, SERVE_OPTIONS, serveHelp } from "./config.ts";
import { checkFileLimit, StartupError } from "./daemon.ts";

const env = { get: (_: string) => undefined };

Deno.test("config: defaults from the spec (queue depth 256, session cap 127)", () => {
  const c = parseServeArgs(["--proxy-uid", "33"], env);
  assert.equal(c.queueDepth, 256);
  assert.equal(c.maxSessions, 127);
  assert.equal(c.maxBody, 1 << 20);
  assert.equal(c.proxyUid, 33);
});

Deno.test("config: --proxy-uid is required and numbers are checked with a message naming the option", () => {
  assert.throws(
    () => parseServeArgs([], env),
    (e) => e instanceof ConfigError && /--proxy-uid is required/.test(e.message),
  );
  for (const bad of ["-1", "1.5", "x", "0x10", "99999999999"]) {
    assert.throws(
      () => parseServeArgs(["--proxy-uid", "33", "--workers", bad], env),
      (e) => e instanceof ConfigError && /--workers/.test(e.message),
    );
  }
  assert.throws(() => parseServeArgs(["--proxy-uid", "33", "--bogus"], env), ConfigError);
  assert.throws(
    () => parseServeArgs(["--proxy-uid", "33", "--policy", ""], env),
    /--policy is empty/,
  );
});

Deno.test("config: CREDENTIALS_DIRECTORY comes from the environment", () => {
  const c = parseServeArgs(["--proxy-uid", "0"], {
    get: (n) => n === "CREDENTIALS_DIRECTORY" ? "/run/c" : undefined,
  });
  assert.equal(c.credentialsDir, "/run/c");
});

Deno.test("config: help lists every option", () => {
  const help = serveHelp();
  for (const o of SERVE_OPTIONS) assert.ok(help.includes(`--${o.flag}`), o.flag);
});

Deno.test("config: the open-file limit check names the number to change", () => {
  const c = parseServeArgs(["--proxy-uid", "33"], env);
  checkFileLimit(c, { soft: 4096, hard: 4096 });
  assert.throws(
    () => checkFileLimit({ ...c, queueDepth: 5000 }, { soft: 4096, hard: 4096 }),
    (e) => e instanceof StartupError && /lower --queue-depth or raise LimitNOFILE/.test(e.message),
  );
});
