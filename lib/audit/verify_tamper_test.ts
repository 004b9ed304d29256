/**
 * Every kind of tampering (an edited, removed, swapped or added line; a removed, cut or renamed
 * file; a forged checkpoint) is detected and located by the verifier; an untouched log verifies,
 * and its hashes, seals and checkpoint signatures check out against independent oracles
 * (node:crypto). Logs written before the seals (a MAC on every line) still verify.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import {
  createHash,
  createHmac,
  createPrivateKey,
  sign as nodeSign,
  verify as nodeVerify,
} from "node:crypto";
import { AuditLog, listAuditFiles, verifyAuditFiles, type VerifyResult } from "./mod.ts";
import {
  type SoftwareAuditKeys,
  softwareAuditKeys,
} from "../../tests/support/audit_software_keys.ts";
import { runCommand } from "../../tests/support/command.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const DENO = Deno.execPath();

/** Three module openings, ten sign lines each, a checkpoint every 4 lines. */
async function sampleLog(keys: SoftwareAuditKeys): Promise<string> {
  const dir = moduleTempDir("audit-tamper-");
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
  const copy = moduleTempDir("audit-tampered-");
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
const TRAILER = /,"hash":"[0-9a-f]{64}"(,"seal":"[0-9a-f]{64}")?\}$/;
const sha256Hex = (...parts: (string | Uint8Array)[]) =>
  parts.reduce((h, p) => h.update(p), createHash("sha256")).digest("hex");

/**
 * What someone without the key can do after editing line `from` (1-based): recompute every hash
 * and `prev` from there to the end of the file. The seals stay as they were: only the key makes one.
 */
function rehashFrom(lines: string[], from: number): void {
  for (let i = from - 1; i < lines.length; i++) {
    const prev = i === 0 ? JSON.parse(lines[0]).prev : JSON.parse(lines[i - 1]).hash;
    const seal = TRAILER.exec(lines[i])![1] ?? "";
    const body = lines[i].replace(TRAILER, "}").replace(
      /"prev":"[0-9a-f]{64}"/,
      `"prev":"${prev}"`,
    );
    const hash = sha256Hex(Buffer.from(prev, "hex"), body);
    lines[i] = body.slice(0, -1) + `,"hash":"${hash}"${seal}}`;
  }
}

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

Deno.test("oracle: every hash is SHA-256(prev ‖ line without hash and seal); every group ends in a seal", async () => {
  const { keys, dir } = await fixture();
  let prev = "00".repeat(32);
  let seq = 0;
  let seals = 0;
  for (const name of await listAuditFiles(dir)) {
    const lines = await readLines(`${dir}/${name}`);
    for (const text of lines) {
      const line = JSON.parse(text);
      assert.equal(line.seq, ++seq);
      assert.equal(line.prev, prev);
      assert.equal(line.mac, undefined, "no line carries a MAC of its own any more");
      const body = text.replace(TRAILER, "}");
      assert.notEqual(body, text);
      assert.equal(line.hash, sha256Hex(Buffer.from(prev, "hex"), body), `${name} seq ${line.seq}`);
      if (line.seal !== undefined) {
        const seal = createHmac("sha256", keys.macSecret)
          .update("svcd-audit-seal-v2 ")
          .update(Buffer.from(line.hash, "hex"))
          .digest("hex");
        assert.equal(line.seal, seal, `${name} seq ${line.seq}`);
        seals++;
      }
      prev = line.hash;
    }
    assert.notEqual(JSON.parse(lines.at(-1)!).seal, undefined, `${name} ends in a seal`);
  }
  assert.ok(seals >= 3 * 4, `${seals} seals`);
  assert.ok(seals < seq, `${seals} seals for ${seq} lines: not one per line`);
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
        `svcd-audit-checkpoint-v2 file=${name} seq=${c.through_seq} hash=${c.through_hash} ` +
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
  assertProblem(await verifyDir(dir, keys), "audit.log.000002", n, /hash does not match/);
  assertProblem(
    await verifyDir(dir, keys, { publicKey: true }),
    "audit.log.000002",
    n,
    /hash does not match/,
  );
});

Deno.test("tamper: an edit re-hashed to the end is caught at its group's seal, and by the public key alone at the checkpoint that covers it", async () => {
  const { keys, dir } = await copyOfSample();
  const path = `${dir}/audit.log.000002`;
  const lines = await readLines(path);
  const n = lineOf(lines, `"request_id":"r2-1"`);
  lines[n - 1] = lines[n - 1].replace("CN=client", "CN=clienT");
  rehashFrom(lines, n);
  await writeLines(path, lines);
  const sealedAt = lines.findIndex((l, i) => i >= n - 1 && l.includes(`"seal":`)) + 1;
  const r = await verifyDir(dir, keys);
  assertProblem(r, "audit.log.000002", sealedAt, /seal does not match/);
  assert.match(r.problem!.message, new RegExp(`lines \\d+–${sealedAt} \\(the group it seals\\)`));
  const covering = lines.findIndex((l, i) => i >= n && l.includes(`"event":"checkpoint"`)) + 1;
  assertProblem(
    await verifyDir(dir, keys, { publicKey: true }),
    "audit.log.000002",
    covering,
    /the checkpoint claims seq \d+ with through_hash/,
  );
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

Deno.test("tamper: a line appended by hand is located (made-up hash, made-up seal) or left out of the chain (no seal)", async () => {
  for (const how of ["hash", "seal", "unsealed"]) {
    const { keys, dir } = await copyOfSample();
    const path = `${dir}/audit.log.000003`;
    const lines = await readLines(path);
    const last = JSON.parse(lines.at(-1)!);
    const body = JSON.stringify({
      event: "sign",
      actor: "CN=mallory",
      seq: last.seq + 1,
      time: new Date().toISOString(),
      key: "k1",
      prev: last.hash,
    });
    const hash = how === "hash"
      ? crypto.getRandomValues(new Uint8Array(32)).toHex()
      : sha256Hex(Buffer.from(last.hash, "hex"), body);
    const seal = how === "unsealed"
      ? ""
      : `,"seal":"${crypto.getRandomValues(new Uint8Array(32)).toHex()}"`;
    lines.push(body.slice(0, -1) + `,"hash":"${hash}"${seal}}`);
    await writeLines(path, lines);
    const r = await verifyDir(dir, keys);
    if (how === "unsealed") {
      // Anyone can compute a hash: without a seal the line is vouched for by nothing and stays
      // out of the chain, as a group cut by a crash before its sync would.
      assert.equal(r.ok, true, JSON.stringify(r.problem));
      assert.deepEqual(r.torn, {
        file: "audit.log.000003",
        line: lines.length,
        bytes: new TextEncoder().encode(lines.at(-1)!).length + 1,
      });
      assert.equal(r.files[2].lastSeq, last.seq);
      assert.match(r.files[2].notes.join(";"), /no seal after them.*not part of the chain/);
    } else {
      const why = how === "hash" ? /hash does not match/ : /seal does not match/;
      assertProblem(r, "audit.log.000003", lines.length, why);
    }
  }
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
  assertProblem(await verifyDir(again.dir, keys), "audit.log.000001", n, /hash does not match/);
  rehashFrom(lines, n);
  await writeLines(path, lines);
  assertProblem(
    await verifyDir(again.dir, keys, { publicKey: true }),
    "audit.log.000001",
    n,
    /signature does not verify/,
  );
  assertProblem(
    await verifyDir(again.dir, keys, { mac: true }),
    "audit.log.000001",
    lines.findIndex((l, i) => i >= n - 1 && l.includes(`"seal":`)) + 1,
    /seal does not match/,
  );
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
  assert.match(whole.files[2].notes.join(";"), /whole and valid but its newline is missing/);
});

/** A log of two files where the daemon was killed in the middle of a write to the first. */
async function crashedBetweenFiles(): Promise<{ keys: SoftwareAuditKeys; dir: string }> {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const dir = moduleTempDir("audit-torn-earlier-");
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
    ["run", "-A", MAIN, "audit", "verify", "--public-key", pem, "--audit-dir", dir],
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

Deno.test("whole lines a crash left without their seal: the next file continues from the last sealed line", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const dir = moduleTempDir("audit-unsealed-earlier-");
  const first = await AuditLog.open({ dir, keys: keys.keys, login: {} });
  await first.append("sign", "CN=a", { request_id: "1" });
  const path = `${dir}/audit.log.000001`;
  const sealedSize = (await Deno.stat(path)).size;
  const sealed = await readLines(path);
  // A group whose pages reached the disk without the last one (the seal is at its end): whole,
  // correctly hashed lines that no seal covers.
  const lines = [
    ...sealed,
    ...sealed.slice(-1).map((l) => l.replace(`"request_id":"1"`, `"request_id":"x"`)),
  ];
  lines[lines.length - 1] = lines[lines.length - 1].replace(
    /"seq":(\d+)/,
    (_, n) => `"seq":${Number(n) + 1}`,
  );
  rehashFrom(lines, lines.length);
  lines[lines.length - 1] = lines[lines.length - 1].replace(/,"seal":"[0-9a-f]{64}"/, "");
  await writeLines(path, lines);
  const second = await AuditLog.open({ dir, keys: keys.keys, login: {} });
  await second.append("sign", "CN=a", { request_id: "2" });
  await second.close();
  const opening = JSON.parse((await readLines(`${dir}/audit.log.000002`))[0]);
  assert.equal(opening.prev_size, sealedSize);
  assert.equal(opening.prev, JSON.parse(sealed.at(-1)!).hash);
  const r = await verifyDir(dir, keys);
  assert.equal(r.ok, true, JSON.stringify(r.problem));
  assert.match(
    r.files[0].notes.join(";"),
    new RegExp(`line\\(s\\) ${lines.length}–${lines.length} have no seal`),
  );
  assert.equal(r.files[0].lastSeq, JSON.parse(sealed.at(-1)!).seq);
});

Deno.test("svcd audit verify --public-key: exit 0 on the untouched log, 1 naming file and line when tampered", async () => {
  const { keys, dir } = await copyOfSample();
  const pem = `${dir}/../audit-sign-${crypto.randomUUID()}.pem`;
  await Deno.writeTextFile(pem, keys.publicKeyPem);
  const run = () =>
    runCommand(DENO, [
      "run",
      "-A",
      MAIN,
      "audit",
      "verify",
      "--public-key",
      pem,
      "--audit-dir",
      dir,
    ], {
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

Deno.test("svcd audit verify: usage mistakes exit 2; a log it cannot check (file, key, credential) exits 1, as in every command", async () => {
  const run = async (args: string[], env: Record<string, string> = {}) => {
    const out = await new Deno.Command(DENO, {
      args: ["run", "-A", MAIN, "audit", ...args],
      env: { NO_COLOR: "1", ...env },
      stdout: "piped",
      stderr: "piped",
    }).output();
    return { code: out.code, err: new TextDecoder().decode(out.stderr) };
  };
  const empty = moduleTempDir("audit-empty-");
  assert.deepEqual(await run(["bogus"]).then((r) => r.code), 2);
  const both = await run(["verify", "--audit-dir", empty, "audit.log.000001"]);
  assert.equal(both.code, 2);
  assert.match(both.err, /give --audit-dir or FILEs, not both/);
  const none = await run(["verify", "--public-key", "/nonexistent.pem", "--audit-dir", empty]);
  assert.equal(none.code, 1);
  assert.match(none.err, /no audit\.log\.NNNNNN files/);
  const { dir } = await fixture();
  const noKey = await run(["verify", "--public-key", "/nonexistent.pem", "--audit-dir", dir]);
  assert.equal(noKey.code, 1);
  assert.match(noKey.err, /--public-key \/nonexistent\.pem cannot be read/);
  const noPin = await run(["verify", "--audit-dir", dir], { CREDENTIALS_DIRECTORY: empty });
  assert.equal(noPin.code, 1);
  assert.match(noPin.err, /svc-pin.*no login was attempted/);
});

/**
 * A log as svcd wrote it before the seals (format v1: every line ends in its own
 * `"mac":HMAC(prev ‖ body)`, checkpoints claim `through_mac`), made here with node:crypto.
 */
function writeV1File(keys: SoftwareAuditKeys, name: string, events: string[]): string {
  const sign = createPrivateKey({ key: Buffer.from(keys.signPkcs8), format: "der", type: "pkcs8" });
  let prev = "00".repeat(32);
  let text = "";
  const add = (members: Record<string, unknown>) => {
    const seq = text.split("\n").length;
    const body = JSON.stringify({
      ...Object.fromEntries(Object.entries(members).slice(0, 2)),
      seq,
      time: new Date().toISOString(),
      ...Object.fromEntries(Object.entries(members).slice(2)),
      prev,
    });
    prev = createHmac("sha256", keys.macSecret).update(Buffer.from(prev, "hex")).update(body)
      .digest("hex");
    text += body.slice(0, -1) + `,"mac":"${prev}"}\n`;
    return seq;
  };
  add({ event: "login_ok", actor: "svcd", file: name, prev_file: null, prev_size: null });
  for (const id of events) add({ event: "sign", actor: "CN=old", request_id: id });
  const size = new TextEncoder().encode(text).length;
  const sha = createHash("sha256").update(text).digest("hex");
  const seq = text.split("\n").length - 1;
  const claim =
    `svcd-audit-checkpoint-v1 file=${name} seq=${seq} mac=${prev} size=${size} sha256=${sha}`;
  const signature = nodeSign(null, Buffer.from(claim), sign).toString("base64");
  add({
    event: "checkpoint",
    actor: "svcd",
    file: name,
    through_seq: seq,
    through_mac: prev,
    through_size: size,
    sha256: sha,
    signature,
  });
  return text;
}

Deno.test("a log written before the seals (a MAC on every line) still verifies, is continued, and its tampering is located", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const dir = moduleTempDir("audit-v1-");
  await Deno.writeTextFile(
    `${dir}/audit.log.000001`,
    writeV1File(keys, "audit.log.000001", ["a", "b", "c"]),
  );
  const log = await AuditLog.open({ dir, keys: keys.keys, login: {} });
  await log.append("sign", "CN=new", { request_id: "d" });
  await log.close();
  const v1 = await readLines(`${dir}/audit.log.000001`);
  const first = JSON.parse((await readLines(`${dir}/audit.log.000002`))[0]);
  assert.equal(first.prev, JSON.parse(v1.at(-1)!).mac, "the new file continues the v1 chain");
  assert.equal(first.seq, v1.length + 1);
  for (const how of [{ mac: true, publicKey: true }, { publicKey: true }]) {
    const r = await verifyDir(dir, keys, how);
    assert.equal(r.ok, true, JSON.stringify(r.problem));
    assert.equal(r.files[0].checkpoints, 1);
    assert.equal(r.files[0].signedThrough, v1.length - 1);
  }
  const n = lineOf(v1, `"request_id":"b"`);
  v1[n - 1] = v1[n - 1].replace("CN=old", "CN=odl");
  await writeLines(`${dir}/audit.log.000001`, v1);
  assertProblem(await verifyDir(dir, keys), "audit.log.000001", n, /its MAC does not match/);
  const covering = lineOf(v1, `"event":"checkpoint"`);
  assertProblem(
    await verifyDir(dir, keys, { publicKey: true }),
    "audit.log.000001",
    covering,
    /SHA-256/,
  );
  await Deno.remove(dir, { recursive: true });
});
