/**
 * Crash test of the log itself: a writer process appending under concurrency is SIGKILLed at random
 * points, several rounds (one file per round). Afterwards every append that was acknowledged has
 * its line, and the whole log verifies (torn tails allowed, reported).
 *
 * The same file is the writer: run with AUDIT_CRASH_CHILD=<dir> it appends until killed and prints
 * `ack <request_id>` after each append resolves.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { AuditLog, listAuditFiles, verifyAuditFiles } from "./mod.ts";
import { softwareAuditKeys } from "../../tests/support/audit_software_keys.ts";

const SELF = new URL(import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

async function writer(dir: string): Promise<void> {
  const keys = await softwareAuditKeys({
    macSecret: Uint8Array.fromHex(Deno.env.get("AUDIT_MAC_SECRET")!),
    signPkcs8: Uint8Array.fromHex(Deno.env.get("AUDIT_SIGN_PKCS8")!),
  });
  const log = await AuditLog.open({
    dir,
    keys: keys.keys,
    login: { pid: Deno.pid },
    checkpointEvery: 64,
  });
  const out = new TextEncoder();
  let n = 0;
  const worker = async (w: number) => {
    for (;;) {
      const id = `${Deno.pid}-${w}-${n++}`;
      await log.append("sign", `CN=worker${w}`, { request_id: id, pad: "p".repeat(n % 97) });
      Deno.stdout.writeSync(out.encode(`ack ${id}\n`));
    }
  };
  await Promise.all(Array.from({ length: 16 }, (_, w) => worker(w)));
}

const childDir = Deno.env.get("AUDIT_CRASH_CHILD");
if (childDir) await writer(childDir);

/** Starts a writer, SIGKILLs it once `acks` appends were acknowledged; returns every ack it printed. */
async function killedRound(
  dir: string,
  env: Record<string, string>,
  acks: number,
): Promise<string[]> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG, SELF],
    env: { ...env, AUDIT_CRASH_CHILD: dir, NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const seen: string[] = [];
  let killed = false;
  let rest = "";
  const decoder = new TextDecoder();
  const stderr = new Response(child.stderr).text();
  for await (const chunk of child.stdout) {
    rest += decoder.decode(chunk, { stream: true });
    const lines = rest.split("\n");
    rest = lines.pop()!;
    for (const l of lines) if (l.startsWith("ack ")) seen.push(l.slice(4));
    if (!killed && seen.length >= acks) {
      child.kill("SIGKILL");
      killed = true;
    }
  }
  const status = await child.status;
  assert.equal(status.signal, "SIGKILL", `the writer ended on its own:\n${await stderr}`);
  return seen;
}

Deno.test("SIGKILL during concurrent appends: every acknowledged line is in the log, the log verifies", async () => {
  const keys = await softwareAuditKeys();
  const env = {
    AUDIT_MAC_SECRET: keys.macSecret.toHex(),
    AUDIT_SIGN_PKCS8: keys.signPkcs8.toHex(),
  };
  const dir = moduleTempDir("audit-crash-");
  const acked: string[] = [];
  for (let round = 0; round < 4; round++) {
    const target = 50 + Math.floor(Math.random() * 400);
    acked.push(...await killedRound(dir, env, target));
  }
  const files = (await listAuditFiles(dir)).map((n) => `${dir}/${n}`);
  assert.equal(files.length, 4);
  const result = await verifyAuditFiles({
    files,
    fromStart: true,
    mac: keys.keys.mac,
    publicKey: keys.publicKey,
  });
  assert.equal(result.ok, true, JSON.stringify(result.problem));
  const logged = new Set<string>();
  for (const f of files) {
    for (const l of (await Deno.readTextFile(f)).split("\n")) {
      try {
        const line = JSON.parse(l);
        if (line.event === "sign") logged.add(line.request_id);
      } catch { /* a torn tail */ }
    }
  }
  const missing = acked.filter((id) => !logged.has(id));
  assert.deepEqual(missing, [], "an acknowledged append has no line");
  assert.ok(acked.length >= 200);
  await Deno.remove(dir, { recursive: true });
});
