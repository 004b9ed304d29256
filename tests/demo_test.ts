/**
 * `make demo` as a reader runs it (packaging/demo.sh, stopping after the demonstration): a
 * signature through real nginx with the demo's client certificate, the subject header the client
 * sent replaced by nginx's, and the signature verified by `svcd client verify` and by openssl.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const SUBJECT = "CN=demo-client,O=Example,C=DE";

Deno.test({
  name: "make demo: signs through nginx as the certificate's subject, verified twice",
  ignore: !(await Deno.stat("/usr/sbin/nginx").then(() => true, () => false)),
  fn: async () => {
    const dir = moduleTempDir("svcd-demo-");
    const run = await new Deno.Command("bash", {
      args: ["packaging/demo.sh"],
      cwd: ROOT,
      env: { DEMO_EXIT: "1", DEMO_DIR: dir, NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const out = new TextDecoder().decode(run.stdout);
    const text = out + new TextDecoder().decode(run.stderr);
    assert.equal(run.code, 0, text);

    const [, afterCurl] = out.split(/\n\$ curl .*https:\/\/127\.0\.0\.1:\d+\/sign\n/);
    assert.ok(afterCurl, `no curl through nginx in the output:\n${text}`);
    assert.equal(afterCurl.split("\n")[0], "200", text);

    const signLine = out.split("\n").find((l) => l.startsWith('{"event":"sign"'));
    assert.ok(signLine, text);
    const line = JSON.parse(signLine);
    assert.equal(line.actor, SUBJECT, "nginx's subject, not the CN=admin the client sent");
    assert.equal(line.key, "demo-ec");

    assert.match(out, /\$ svcd client verify .*\nVerified OK\n/);
    assert.match(out, /\$ openssl dgst -sha256 -verify .*\nVerified OK\n/);
    assert.match(out, /demo: done \(DEMO_EXIT=1\)/);
  },
});
