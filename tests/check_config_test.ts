/**
 * `svcd --check-config`: the operator's dry run. It checks options, the open-file limit, the policy,
 * the folders, the credential and the token — and never logs in (a failed login counts toward the
 * five-failure lockout). Every failure says what was wrong and what to do.
 */
import assert from "node:assert/strict";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { runDeno } from "./support/command.ts";
import { serveArgs } from "./support/daemon.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;

async function checkConfig(
  token: TestToken,
  dir: string,
  extra: string[],
  env: Record<string, string> = {},
) {
  return await runDeno([MAIN, "--check-config", ...serveArgs(token, dir, 33), ...extra], {
    env: { ...token.env, CREDENTIALS_DIRECTORY: token.credentialsDir, ...env },
  });
}

Deno.test({
  name: "check-config: a good configuration passes without a login; each mistake is named",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: {} });
    const dir = await Deno.makeTempDir({ prefix: "svcd-check-" });
    try {
      await Deno.writeTextFile(`${dir}/policy`, "CN=a,O=Example\tk\n");

      await t.step("good: exit 0, says no login was attempted", async () => {
        const r = await checkConfig(token, dir, []);
        assert.equal(r.code, 0, r.text);
        assert.match(r.text, /no login attempted/);
        assert.match(r.text, /policy \(1 grant\(s\), 17 of at most 1048576 bytes\)/);
        assert.match(r.text, /configuration OK/);
        await Deno.stat(`${dir}/auth.sock`).then(
          () => assert.fail("check-config must not create the socket"),
          () => {},
        );
      });

      await t.step("legacy slash-form subjects are warned about", async () => {
        await Deno.writeTextFile(`${dir}/policy`, "/C=DE/O=Example/CN=a\tk\n");
        const r = await checkConfig(token, dir, []);
        assert.equal(r.code, 0, r.text);
        assert.match(r.text, /CN=a,O=Example,C=DE/);
        await Deno.writeTextFile(`${dir}/policy`, "CN=a,O=Example\tk\n");
      });

      await t.step("a broken policy names the file and line", async () => {
        await Deno.writeTextFile(`${dir}/broken`, "# ok\nCN=a k\n");
        const r = await checkConfig(token, dir, ["--policy", `${dir}/broken`]);
        assert.equal(r.code, 1);
        assert.match(r.text, /broken.*line 2/);
      });

      await t.step("a policy file over 1 MiB is refused with the limit", async () => {
        await Deno.writeTextFile(`${dir}/huge`, "#".repeat((1 << 20) + 1));
        const r = await checkConfig(token, dir, ["--policy", `${dir}/huge`]);
        assert.equal(r.code, 1, r.text);
        assert.match(r.text, /huge: the file is 1048577 bytes; .*at most 1048576 bytes/);
      });

      await t.step("a missing credential names the file and the likely cause", async () => {
        const r = await checkConfig(token, dir, [], { CREDENTIALS_DIRECTORY: `${dir}/none` });
        assert.equal(r.code, 1);
        assert.match(r.text, /svc-pin/);
        assert.match(r.text, /LoadCredentialEncrypted/);
      });

      await t.step("an unknown token label is named", async () => {
        const r = await checkConfig(token, dir, ["--token", "no-such-token"]);
        assert.equal(r.code, 1);
        assert.match(r.text, /no-such-token/);
      });

      await t.step(
        "a queue depth past the open-file limit says which number to change",
        async () => {
          const r = await checkConfig(token, dir, ["--queue-depth", "60000"]);
          assert.equal(r.code, 1);
          assert.match(r.text, /lower --queue-depth or raise LimitNOFILE/);
        },
      );

      await t.step("refusal budget options are checked and named by their flags", async () => {
        const r = await checkConfig(token, dir, ["--refusal-base-delay", "600"]);
        assert.equal(r.code, 2, "an option mistake is a usage error");
        assert.match(r.text, /--refusal-max-delay must be a whole number from 600/);
      });

      await t.step(
        "a corrupt refusal state file is found before serve would refuse it",
        async () => {
          await Deno.mkdir(`${dir}/state`, { recursive: true });
          await Deno.writeTextFile(`${dir}/state/refusals.sqlite`, "garbage ".repeat(200));
          const r = await checkConfig(token, dir, []);
          assert.equal(r.code, 1, r.text);
          assert.match(r.text, /refusals\.sqlite is corrupt or unreadable/);
          await Deno.remove(`${dir}/state/refusals.sqlite`);
        },
      );

      await t.step("a file in the socket's place that is not a socket is named", async () => {
        await Deno.writeTextFile(`${dir}/auth.sock`, "not a socket");
        const r = await checkConfig(token, dir, []);
        assert.equal(r.code, 1);
        assert.match(r.text, /auth\.sock exists and is not a socket/);
        await Deno.remove(`${dir}/auth.sock`);
      });

      await t.step("a bad option value exits 2 naming the option", async () => {
        const r = await checkConfig(token, dir, ["--max-body", "1k"]);
        assert.equal(r.code, 2);
        assert.match(r.text, /--max-body must be a whole number/);
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});
