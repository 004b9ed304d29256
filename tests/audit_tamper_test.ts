/**
 * Every tamper kind of issue 4 is detected and located by the verifier; an untouched log verifies,
 * and its MACs and checkpoint signatures check out against independent oracles (node:crypto).
 */
import assert from "node:assert/strict";
import { createHash, createHmac, verify as nodeVerify } from "node:crypto";
import { AuditLog, listAuditFiles, verifyAuditFiles, type VerifyResult } from "../lib/audit/mod.ts";
import { type SoftwareAuditKeys, softwareAuditKeys } from "../lib/audit/software_keys.ts";
import { runCommand } from "./support/command.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const DENO = Deno.execPath();

/** Three module openings, ten sign lines each, a checkpoint every 4 lines. */
async function sampleLog(keys: SoftwareAuditKeys): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "audit-tamper-" });
  for (let run = 1; run <= 3; run++) {
    const log = await AuditLog.open({
      dir,
      keys: keys.keys,
      login: { token: "test" },
      checkpointEvery: 4,
    });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        log.append("sign", `CN=client${i % 3},O=Example,C=DE`, {
          key: "k1",
          mechanism: "CKM_ECDSA",
          message_sha256: "ab".repeat(32),
          signature_sha256: "cd".repeat(32),
          request_id: `r${run}-${i}`,
        })),
    );
    await log.close();
  }
  return dir;
}

let shared: { keys: SoftwareAuditKeys; dir: string } | undefined;
async function fixture(): Promise<{ keys: SoftwareAuditKeys; dir: string }> {
  if (!shared) {
    const keys = await softwareAuditKeys({ synchronousMac: true });
    shared = { keys, dir: await sampleLog(keys) };
  }
  return shared;
}

/** A private copy of the sample log to tamper with. */
async function copyOfSample(): Promise<{ keys: SoftwareAuditKeys; dir: string }> {
  const { keys, dir } = await fixture();
  const copy = await Deno.makeTempDir({ prefix: "audit-tampered-" });
  for (const name of await listAuditFiles(dir)) {
    await Deno.copyFile(`${dir}/${name}`, `${copy}/${name}`);
  }
  return { keys, dir: copy };
}

async function verifyDir(
  dir: string,
  keys: SoftwareAuditKeys,
  how: { mac?: boolean; publicKey?: boolean } = { mac: true, publicKey: true },
): Promise<VerifyResult> {
  const files = (await listAuditFiles(dir)).map((n) => `${dir}/${n}`);
  return await verifyAuditFiles({
    files,
    fromStart: true,
    mac: how.mac ? keys.keys.mac : undefined,
    publicKey: how.publicKey ? keys.publicKey : undefined,
  });
}

const readLines = async (path: string) => (await Deno.readTextFile(path)).split("\n").slice(0, -1);
const writeLines = (path: string, lines: string[]) =>
  Deno.writeTextFile(path, lines.map((l) => l + "\n").join(""));
/** 1-based line number of the line holding `needle`. */
const lineOf = (lines: string[], needle: string) => lines.findIndex((l) => l.includes(needle)) + 1;

function assertProblem(r: VerifyResult, file: string, line: number, message: RegExp): void {
  assert.equal(r.ok, false, "the tampered log must not verify");
  assert.equal(r.problem?.file, file, `problem in the wrong file: ${JSON.stringify(r.problem)}`);
  assert.equal(r.problem?.line, line, `problem at the wrong line: ${JSON.stringify(r.problem)}`);
  assert.match(r.problem!.message, message);
}

Deno.test("an untouched log verifies, with MACs and with the public key alone", async () => {
  const { keys, dir } = await fixture();
  const full = await verifyDir(dir, keys);
  assert.equal(full.ok, true, JSON.stringify(full.problem));
  assert.equal(full.torn, undefined);
  assert.deepEqual(full.files.map((f) => f.status), ["ok", "ok", "ok"]);
  assert.deepEqual(full.files.map((f) => f.firstSeq), [
    1,
    full.files[0].lastSeq! + 1,
    full.files[1].lastSeq! + 1,
  ]);
  for (const f of full.files) {
    assert.ok(f.checkpoints >= 2, `${f.file}: ${f.checkpoints} checkpoints`);
    assert.equal(f.signedThrough, f.lastSeq! - 1, "the final checkpoint covers the shutdown line");
    assert.deepEqual(f.notes, []);
  }
  const publicOnly = await verifyDir(dir, keys, { publicKey: true });
  assert.equal(publicOnly.ok, true, JSON.stringify(publicOnly.problem));
});

Deno.test("oracle: every MAC is HMAC-SHA256(prev ‖ line without its mac member), chained across files", async () => {
  const { keys, dir } = await fixture();
  let prev = "00".repeat(32);
  let seq = 0;
  for (const name of await listAuditFiles(dir)) {
    for (const text of await readLines(`${dir}/${name}`)) {
      const line = JSON.parse(text);
      assert.equal(line.seq, ++seq);
      assert.equal(line.prev, prev);
      const body = text.replace(/,"mac":"[0-9a-f]{64}"\}$/, "}");
      assert.notEqual(body, text);
      const mac = createHmac("sha256", keys.macSecret).update(Buffer.from(prev, "hex")).update(body)
        .digest("hex");
      assert.equal(line.mac, mac, `${name} seq ${line.seq}`);
      prev = mac;
    }
  }
});

Deno.test("oracle: every checkpoint is an Ed25519 signature over the documented claim", async () => {
  const { keys, dir } = await fixture();
  let checked = 0;
  for (const name of await listAuditFiles(dir)) {
    const bytes = await Deno.readFile(`${dir}/${name}`);
    for (const text of await readLines(`${dir}/${name}`)) {
      const c = JSON.parse(text);
      if (c.event !== "checkpoint") continue;
      const sha = createHash("sha256").update(bytes.subarray(0, c.through_size)).digest("hex");
      assert.equal(c.sha256, sha);
      const message =
        `svcd-audit-checkpoint-v1 file=${name} seq=${c.through_seq} mac=${c.through_mac} ` +
        `size=${c.through_size} sha256=${sha}`;
      assert.ok(
        nodeVerify(
          null,
          Buffer.from(message),
          keys.publicKeyPem,
          Buffer.from(c.signature, "base64"),
        ),
      );
      checked++;
    }
  }
  assert.ok(checked >= 6);
});

Deno.test("tamper: one byte edited is located at its line", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000002`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r2-5"`);
  lines[n - 1] = lines[n - 1].replace("CN=client", "CN=clienT");
  await writeLines(path, lines);
  assertProblem(await verifyDir(dir, keys), "audit.log.000002", n, /MAC does not match/);
});

Deno.test("tamper: a byte edit is caught by the public key alone at the checkpoint that covers it", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000002`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r2-1"`);
  lines[n - 1] = lines[n - 1].replace("CN=client", "CN=clienT");
  await writeLines(path, lines);
  const r = await verifyDir(dir, keys, { publicKey: true });
  const covering = lines.findIndex((l, i) => i >= n && l.includes(`"event":"checkpoint"`)) + 1;
  assertProblem(r, "audit.log.000002", covering, /SHA-256/);
});

Deno.test("tamper: a line removed is located where it is missing", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000002`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r2-4"`);
  lines.splice(n - 1, 1);
  await writeLines(path, lines);
  assertProblem(await verifyDir(dir, keys), "audit.log.000002", n, /removed or moved/);
  assertProblem(
    await verifyDir(dir, keys, { publicKey: true }),
    "audit.log.000002",
    n,
    /removed or moved/,
  );
});

Deno.test("tamper: two lines swapped are located at the first of them", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000001`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r1-2"`);
  [lines[n - 1], lines[n]] = [lines[n], lines[n - 1]];
  await writeLines(path, lines);
  assertProblem(
    await verifyDir(dir, keys),
    "audit.log.000001",
    n,
    /seq \d+ where \d+ was expected/,
  );
});

Deno.test("tamper: a line appended by hand with a made-up MAC is located", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000003`;
  const lines = await readLines(path);
  const last = JSON.parse(lines.at(-1)!);
  const forged = {
    event: "sign",
    actor: "CN=mallory",
    seq: last.seq + 1,
    time: new Date().toISOString(),
    key: "k1",
    prev: last.mac,
    mac: crypto.getRandomValues(new Uint8Array(32)).toHex(),
  };
  lines.push(JSON.stringify(forged));
  await writeLines(path, lines);
  assertProblem(await verifyDir(dir, keys), "audit.log.000003", lines.length, /MAC does not match/);
});

Deno.test("tamper: a whole file removed from the middle is named", async () => {
  const { keys, dir } = await copyOfSample();
  await Deno.remove(`${dir}/audit.log.000002`);
  assertProblem(
    await verifyDir(dir, keys),
    "audit.log.000003",
    1,
    /audit\.log\.000002, which is missing/,
  );
  assertProblem(
    await verifyDir(dir, keys, { publicKey: true }),
    "audit.log.000003",
    1,
    /audit\.log\.000002, which is missing/,
  );
});

Deno.test("tamper: an earlier file's tail cut is named (at a line boundary or mid-line)", async () => {
  for (const cut of ["lines", "bytes"]) {
    const { keys, dir } = await copyOfSample();
    const path = `${dir}/audit.log.000001`;
    const lines = await readLines(path);
    if (cut === "lines") {
      await writeLines(path, lines.slice(0, -2));
      assertProblem(await verifyDir(dir, keys), "audit.log.000001", lines.length - 1, /was cut/);
    } else {
      const bytes = await Deno.readFile(path);
      await Deno.writeFile(path, bytes.subarray(0, bytes.length - 20));
      assertProblem(await verifyDir(dir, keys), "audit.log.000001", lines.length, /was cut/);
    }
  }
});

Deno.test("tamper: the first file removed is named; the rest still verifies as named files", async () => {
  const { keys, dir } = await copyOfSample();
  await Deno.remove(`${dir}/audit.log.000001`);
  assertProblem(
    await verifyDir(dir, keys),
    "audit.log.000002",
    1,
    /audit\.log\.000001, which is missing/,
  );
  const subset = await verifyAuditFiles({
    files: [`${dir}/audit.log.000002`, `${dir}/audit.log.000003`],
    fromStart: false,
    mac: keys.keys.mac,
    publicKey: keys.publicKey,
  });
  assert.equal(subset.ok, true, JSON.stringify(subset.problem));
});

Deno.test("tamper: a renamed file and a forged checkpoint signature are named", async () => {
  const { keys, dir } = await copyOfSample();
  await Deno.rename(`${dir}/audit.log.000003`, `${dir}/audit.log.000004`);
  assertProblem(await verifyDir(dir, keys), "audit.log.000004", 1, /renamed/);

  const again = await copyOfSample();
  const path = `${again.dir}/audit.log.000001`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"event":"checkpoint"`);
  const c = JSON.parse(lines[n - 1]);
  const sig = Uint8Array.fromBase64(c.signature);
  sig[10] ^= 1;
  lines[n - 1] = lines[n - 1].replace(c.signature, sig.toBase64());
  await writeLines(path, lines);
  assertProblem(
    await verifyDir(again.dir, keys, { publicKey: true }),
    "audit.log.000001",
    n,
    /signature does not verify/,
  );
  assertProblem(await verifyDir(again.dir, keys), "audit.log.000001", n, /MAC does not match/);
});

Deno.test("torn final line of the newest file: reported as torn, everything before it verified", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000003`;
  const lines = await readLines(path);
  const bytes = await Deno.readFile(path);
  await Deno.writeFile(path, bytes.subarray(0, bytes.length - 40));
  const r = await verifyDir(dir, keys);
  assert.equal(r.ok, true, JSON.stringify(r.problem));
  assert.deepEqual(r.torn, {
    file: "audit.log.000003",
    line: lines.length,
    bytes: lines.at(-1)!.length - 39,
  });
  assert.equal(r.files[2].lines, lines.length - 1);
  assert.match(r.files[2].notes.join(";"), /torn final line/);

  await Deno.writeFile(path, bytes.subarray(0, bytes.length - 1)); // only the newline is missing
  const whole = await verifyDir(dir, keys);
  assert.equal(whole.ok, true);
  assert.match(whole.files[2].notes.join(";"), /MAC is valid but its newline is missing/);
});

/** A log of two files where the daemon was killed in the middle of a write to the first. */
async function crashedBetweenFiles(): Promise<{ keys: SoftwareAuditKeys; dir: string }> {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const dir = await Deno.makeTempDir({ prefix: "audit-torn-earlier-" });
  const first = await AuditLog.open({ dir, keys: keys.keys, login: {} });
  await first.append("sign", "CN=a", { request_id: "1" });
  // The daemon was killed in the middle of a write: half a line, no shutdown.
  await Deno.writeFile(
    `${dir}/audit.log.000001`,
    new TextEncoder().encode(`{"event":"sign","act`),
    { append: true },
  );
  const second = await AuditLog.open({ dir, keys: keys.keys, login: {} });
  await second.append("sign", "CN=a", { request_id: "2" });
  await second.close();
  return { keys, dir };
}

Deno.test("a torn tail left by a crash in an earlier file is accepted: the next file recorded it (prev_torn)", async () => {
  const { keys, dir } = await crashedBetweenFiles();
  const r = await verifyDir(dir, keys);
  assert.equal(r.ok, true, JSON.stringify(r.problem));
  assert.match(r.files[0].notes.join(";"), /torn final line 3/);
  const opening = JSON.parse((await readLines(`${dir}/audit.log.000002`))[0]);
  assert.equal(opening.prev_size, (await Deno.stat(`${dir}/audit.log.000001`)).size - 20);
  assert.equal(opening.prev_torn, 20);
});

Deno.test("tamper: a partial line added to an earlier file is located (exit 1), not taken for a torn tail", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000001`;
  const lines = await readLines(path);
  await Deno.writeTextFile(path, `{"event":"sign","actor":"CN=x"`, { append: true });
  assertProblem(
    await verifyDir(dir, keys),
    "audit.log.000001",
    lines.length + 1,
    /partial line of 30 byte\(s\).*audit\.log\.000002 line 1 records 0 .*added after it was closed/,
  );
  const pem = `${dir}/../audit-sign-${crypto.randomUUID()}.pem`;
  await Deno.writeTextFile(pem, keys.publicKeyPem);
  const cli = await runCommand(
    DENO,
    ["run", "-A", MAIN, "audit", "verify", "--public-key", pem, "--dir", dir],
    { env: { NO_COLOR: "1" } },
  );
  await Deno.remove(pem);
  assert.equal(cli.code, 1, cli.text);
  assert.match(
    cli.text,
    new RegExp(`^FAILED: audit\\.log\\.000001 line ${lines.length + 1}: `, "m"),
  );
});

Deno.test("tamper: a crash's torn tail in an earlier file changed in length or removed is located", async () => {
  const { keys, dir } = await crashedBetweenFiles();
  const path = `${dir}/audit.log.000001`;
  const bytes = await Deno.readFile(path);
  await Deno.writeFile(path, new TextEncoder().encode("or"), { append: true });
  assertProblem(await verifyDir(dir, keys), "audit.log.000001", 3, /22 byte.*records 20/);
  await Deno.writeFile(path, bytes.subarray(0, bytes.length - 20));
  assertProblem(await verifyDir(dir, keys), "audit.log.000001", 3, /cut or removed/);
});

Deno.test("svcd audit verify --public-key: exit 0 on the untouched log, 1 naming file and line when tampered", async () => {
  const { keys, dir } = await copyOfSample();
  const pem = `${dir}/../audit-sign-${crypto.randomUUID()}.pem`;
  await Deno.writeTextFile(pem, keys.publicKeyPem);
  const run = () =>
    runCommand(DENO, ["run", "-A", MAIN, "audit", "verify", "--public-key", pem, "--dir", dir], {
      env: { NO_COLOR: "1" },
    });
  const good = await run();
  assert.equal(good.code, 0, good.text);
  assert.match(
    good.text,
    /^audit\.log\.000001: ok, \d+ line\(s\), seq 1–\d+, \d+ checkpoint\(s\)/m,
  );
  assert.match(good.text, /^verified: 3 file\(s\).*MACs NOT checked/m);

  const path = `${dir}/audit.log.000002`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r2-4"`);
  lines.splice(n - 1, 1);
  await writeLines(path, lines);
  const bad = await run();
  assert.equal(bad.code, 1, bad.text);
  assert.match(bad.text, new RegExp(`^FAILED: audit\\.log\\.000002 line ${n}: seq`, "m"));
  assert.match(bad.text, /^audit\.log\.000003: not checked/m);
  await Deno.remove(pem);
});

Deno.test("svcd audit verify: usage and setup errors exit 2 with a message", async () => {
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const out = await new Deno.Command(DENO, {
      args: ["run", "-A", MAIN, "audit", ...args],
      env: { NO_COLOR: "1", ...env },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, err: new TextDecoder().decode(out.stderr) };
  };
  const empty = await Deno.makeTempDir();
  assert.deepEqual(await run(["bogus"]).then((r) => r.code), 2);
  const none = await run(["verify", "--public-key", "/nonexistent.pem", "--dir", empty]);
  assert.equal(none.code, 2);
  assert.match(none.err, /no audit\.log\.NNNNNN files/);
  const { dir } = await fixture();
  const noKey = await run(["verify", "--public-key", "/nonexistent.pem", "--dir", dir]);
  assert.equal(noKey.code, 2);
  assert.match(noKey.err, /--public-key \/nonexistent\.pem cannot be read/);
  const noPin = await run(["verify", "--dir", dir], { CREDENTIALS_DIRECTORY: empty });
  assert.equal(noPin.code, 2);
  assert.match(noPin.err, /svc-pin.*no login was attempted/);
});
