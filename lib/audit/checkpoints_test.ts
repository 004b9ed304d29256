/**
 * Checkpoints kept off the host: every checkpoint line is handed out byte for byte once durable, a
 * checkpoint is taken by time as well as by count, and collected checkpoints find what the log
 * alone cannot show (its newest file cut at a line boundary, or removed), naming the checkpoint.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { AuditLog, listAuditFiles, verifyAuditFiles } from "./mod.ts";
import {
  type SoftwareAuditKeys,
  softwareAuditKeys,
} from "../../tests/support/audit_software_keys.ts";
import { judgeCheckpoints, parseCollectedCheckpoints, wantedSeqs } from "./checkpoints.ts";
import { syslogMessage } from "./syslog.ts";

/** Two module openings of 12 sign lines, a checkpoint every 5; the checkpoint lines as handed out. */
async function witnessedLog(keys: SoftwareAuditKeys): Promise<{ dir: string; copies: string[] }> {
  const dir = moduleTempDir("audit-witness-");
  const copies: string[] = [];
  for (let run = 1; run <= 2; run++) {
    const log = await AuditLog.open({
      dir,
      keys: keys.keys,
      login: {},
      checkpointEvery: 5,
      onCheckpoint: (line) => copies.push(line),
    });
    for (let i = 0; i < 12; i++) await log.append("sign", "CN=a", { request_id: `r${run}-${i}` });
    await log.close();
  }
  return { dir, copies };
}

async function judge(dir: string, copies: string[], keys: SoftwareAuditKeys): Promise<string[]> {
  const collected = parseCollectedCheckpoints(
    copies.map((c) => syslogMessage(c, new Date(), 1).replace(/^<\d+>/, "") + "\n").join(""),
  );
  const files = (await listAuditFiles(dir)).map((n) => `${dir}/${n}`);
  const result = await verifyAuditFiles({
    files,
    fromStart: true,
    publicKey: keys.publicKey,
    lookup: wantedSeqs(collected),
  });
  return await judgeCheckpoints(
    collected,
    [{ name: dir, hashes: result.hashes, lastSeq: result.lastSeq }],
    keys.publicKey,
  );
}

Deno.test("every checkpoint line is handed out exactly as the audit file holds it", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(keys);
  const inFiles = [];
  for (const name of await listAuditFiles(dir)) {
    const lines = (await Deno.readTextFile(`${dir}/${name}`)).split("\n");
    inFiles.push(...lines.filter((l) => l.startsWith('{"event":"checkpoint"')));
  }
  assert.ok(copies.length >= 4, `${copies.length} checkpoint copies`);
  assert.deepEqual(copies, inFiles);
});

Deno.test("a checkpoint is taken by time while lines arrive, though the count is not reached", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const dir = moduleTempDir("audit-interval-");
  const taken = Promise.withResolvers<string>();
  const log = await AuditLog.open({
    dir,
    keys: keys.keys,
    login: {},
    checkpointEvery: 1_000_000,
    checkpointIntervalMs: 50,
    onCheckpoint: (line) => taken.resolve(line),
  });
  // The interval timer does not hold the process open (unref): this deadline does, and fails the test.
  const deadline = setTimeout(() => taken.reject(new Error("no checkpoint within 10 s")), 10_000);
  const seq = await log.append("sign", "CN=a", {});
  const line = JSON.parse(await taken.promise.finally(() => clearTimeout(deadline)));
  assert.ok(line.through_seq >= seq, `the checkpoint covers seq ${line.through_seq} < ${seq}`);
  await log.close();
  assert.ok(
    (await verifyAuditFiles({
      files: (await listAuditFiles(dir)).map((n) => `${dir}/${n}`),
      fromStart: true,
      publicKey: keys.publicKey,
    })).ok,
  );
});

Deno.test("collected checkpoints: an intact log holds every one", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(keys);
  assert.deepEqual(await judge(dir, copies, keys), []);
});

Deno.test("collected checkpoints: the newest file cut at a line boundary fails, naming the checkpoint", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(keys);
  const names = await listAuditFiles(dir);
  const newest = `${dir}/${names.at(-1)}`;
  const lines = (await Deno.readTextFile(newest)).split("\n").slice(0, -1);
  // Cut just before the last checkpoint the log made: the log alone still verifies.
  const lastCheckpoint = lines.findLastIndex((l) => l.startsWith('{"event":"checkpoint"'));
  const kept = lines.slice(0, lastCheckpoint);
  const sealedEnd = kept.findLastIndex((l) => l.includes('"seal":'));
  await Deno.writeTextFile(newest, kept.slice(0, sealedEnd + 1).map((l) => l + "\n").join(""));
  const alone = await verifyAuditFiles({
    files: names.map((n) => `${dir}/${n}`),
    fromStart: true,
    publicKey: keys.publicKey,
  });
  assert.ok(alone.ok, "a cut at a sealed line is invisible to the log alone");
  const problems = await judge(dir, copies, keys);
  const seq = JSON.parse(lines[lastCheckpoint]).seq;
  assert.ok(problems.length >= 1);
  assert.match(problems.at(-1)!, new RegExp(`^checkpoint seq ${seq} \\(${names.at(-1)}`));
  assert.match(problems.at(-1)!, /ends at seq \d+, before it/);
});

Deno.test("collected checkpoints: the newest file removed fails, naming its checkpoints", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(keys);
  const names = await listAuditFiles(dir);
  await Deno.remove(`${dir}/${names.at(-1)}`);
  const problems = await judge(dir, copies, keys);
  const inRemoved = copies.filter((c) => JSON.parse(c).file === names.at(-1));
  assert.equal(problems.length, inRemoved.length);
  for (const p of problems) assert.match(p, new RegExp(`\\(${names.at(-1)}, through seq`));
});

Deno.test("collected checkpoints: a different line at a checkpoint's seq fails as a disagreement", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(keys);
  const other = await witnessedLog(keys); // same seqs, other hashes: another log
  const problems = await judge(dir, other.copies, keys);
  assert.equal(problems.length, other.copies.length);
  assert.match(problems[0], /holds a different line at seq \d+: the log disagrees with it/);
  assert.deepEqual(await judge(dir, copies, keys), []);
});

Deno.test("collected checkpoints: a forged copy is refused by the public key, and a damaged one named", async () => {
  const keys = await softwareAuditKeys({ synchronousMac: true });
  const stranger = await softwareAuditKeys({ synchronousMac: true });
  const { dir, copies } = await witnessedLog(stranger);
  const problems = await judge(dir, copies, keys);
  assert.match(problems[0], /signature does not verify with the public key/);
  const damaged = copies[0].replace('"through_seq":', '"through_seq":1');
  assert.throws(
    () => parseCollectedCheckpoints(`x\nhost svcd-audit[1]: ${damaged}\n`),
    /collected checkpoint at line 2: its hash does not match its bytes/,
  );
});
