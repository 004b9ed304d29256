/**
 * The audit log with the real token (SoftHSM2): MACs by C_Sign(CKM_SHA256_HMAC) with `svc-audit`,
 * checkpoints by Ed25519 `svc-audit-sign`; `svcd audit verify` logs in through the credential like
 * the daemon, and another token's key does not verify the chain (one author).
 *
 * Run with AUDIT_TOKEN_CHILD=<dir> this file is the writer: it opens the token named by
 * AUDIT_MODULE / AUDIT_TOKEN, writes one file, and prints its stats as JSON.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { verify as nodeVerify } from "node:crypto";
import { auditKeysFromToken, AuditLog, type AuditStats } from "../lib/audit/mod.ts";
import { Token } from "../lib/token/mod.ts";
import { makeTestToken, runTokenCli, type TestToken } from "./support/token.ts";
import { runDeno } from "./support/command.ts";
import { runAuditVerify } from "./support/audit.ts";

const SELF = new URL(import.meta.url).pathname;
const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../deno.json", import.meta.url).pathname;

async function writer(dir: string): Promise<void> {
  const token = Token.open({
    modulePath: Deno.env.get("AUDIT_MODULE")!,
    tokenLabel: Deno.env.get("AUDIT_TOKEN")!,
  });
  await token.login(Token.readPinCredential());
  const log = await AuditLog.open({
    dir,
    keys: auditKeysFromToken(token),
    login: { token: "t" },
    checkpointEvery: 50,
  });
  await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) => log.append("sign", `CN=c${i % 5}`, { request_id: `a${i}` }),
    ),
  );
  for (let i = 0; i < 20; i++) await log.append("sign", "CN=seq", { request_id: `s${i}` });
  const stats = log.stats();
  await log.close();
  token.close();
  console.log(JSON.stringify(stats));
}

const childDir = Deno.env.get("AUDIT_TOKEN_CHILD");
if (childDir) await writer(childDir);

function run(args: string[], env: Record<string, string>) {
  return runDeno(["--config", CONFIG, ...args], { env: { NO_COLOR: "1", ...env } });
}

async function writeWithToken(token: TestToken, dir: string): Promise<AuditStats> {
  const env = {
    ...token.env,
    AUDIT_TOKEN_CHILD: dir,
    AUDIT_MODULE: token.modulePath,
    AUDIT_TOKEN: token.tokenLabel,
  };
  const r = await run([SELF], env);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

Deno.test("real token: written and verified through the credential; public key alone; one author", async () => {
  const token = await makeTestToken();
  const other = await makeTestToken();
  try {
    const dir = moduleTempDir("audit-token-");
    for (let i = 0; i < 2; i++) {
      const stats = await writeWithToken(token, dir);
      assert.ok(stats.syncs < stats.lines, JSON.stringify(stats));
    }

    const ok = await runAuditVerify(token, dir);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(
      ok.stdout,
      /^audit\.log\.000001: ok, \d+ line\(s\), seq 1–\d+, [1-9]\d* checkpoint/m,
    );
    assert.match(ok.stdout, /^audit\.log\.000002: ok/m);
    assert.match(
      ok.stdout,
      /MACs checked with the token; checkpoint signatures checked with the token's svc-audit-sign/,
    );

    // The public key as the operator exports it; checked by the verifier and by node:crypto.
    const pem = `${token.dir}/audit-sign.pem`;
    const exported = await runTokenCli(
      [
        "pubkey",
        "--module",
        token.modulePath,
        "--token",
        token.tokenLabel,
        "--key-label",
        "svc-audit-sign",
        "--out",
        pem,
      ],
      token.env,
    );
    assert.equal(exported.code, 0, exported.stderr);
    const pub = await run([MAIN, "audit", "verify", "--audit-dir", dir, "--public-key", pem], {});
    assert.equal(pub.code, 0, pub.stdout + pub.stderr);
    assert.match(pub.stdout, /MACs NOT checked/);
    let signatures = 0;
    for (const name of ["audit.log.000001", "audit.log.000002"]) {
      for (const l of (await Deno.readTextFile(`${dir}/${name}`)).split("\n")) {
        if (!l.includes(`"event":"checkpoint"`)) continue;
        const c = JSON.parse(l);
        const msg =
          `svcd-audit-checkpoint-v2 file=${name} seq=${c.through_seq} hash=${c.through_hash} ` +
          `size=${c.through_size} sha256=${c.sha256}`;
        assert.ok(
          nodeVerify(
            null,
            Buffer.from(msg),
            await Deno.readTextFile(pem),
            Buffer.from(c.signature, "base64"),
          ),
        );
        signatures++;
      }
    }
    assert.ok(signatures >= 4);

    // Another token's svc-audit key cannot vouch for this chain.
    const foreign = await runAuditVerify(other, dir);
    assert.equal(foreign.code, 1, foreign.stdout + foreign.stderr);
    assert.match(foreign.stdout, /^FAILED: audit\.log\.000001 line 1: its seal does not match/m);

    // One byte edited: named by file and line with the token.
    const path = `${dir}/audit.log.000002`;
    const lines = (await Deno.readTextFile(path)).split("\n");
    const n = lines.findIndex((l) => l.includes(`"request_id":"s7"`));
    lines[n] = lines[n].replace("CN=seq", "CN=sEq");
    await Deno.writeTextFile(path, lines.join("\n"));
    const bad = await runAuditVerify(token, dir);
    assert.equal(bad.code, 1, bad.stdout + bad.stderr);
    assert.match(
      bad.stdout,
      new RegExp(`^FAILED: audit\\.log\\.000002 line ${n + 1}: its hash does not match`, "m"),
    );
    await Deno.remove(dir, { recursive: true });
  } finally {
    await token.cleanup();
    await other.cleanup();
  }
});
