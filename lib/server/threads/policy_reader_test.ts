import assert from "node:assert/strict";
import { parsePolicyText, PolicyError } from "../../policy/mod.ts";
import { policyOfGrants, policyOfSize } from "../../../tests/support/policy.ts";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";
import { readPolicyInThread } from "./policy_reader.ts";

const DIR = moduleTempDir("svcd-policy-reader-");

/** The nice value of every thread of this process but the main one, from /proc. */
function otherThreadsNice(): number[] {
  const nice: number[] = [];
  for (const task of Deno.readDirSync("/proc/self/task")) {
    if (task.name === String(Deno.pid)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/self/task/${task.name}/stat`);
      // After "(comm) " come state, ppid, …: nice is the 19th field of the line (proc(5)).
      nice.push(Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]));
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return nice;
}

Deno.test("policy reader thread: finds exactly what the parse in this thread finds", async () => {
  const text = policyOfSize(1 << 20) + "CN=x\tk\nno-tab\n/C=DE/CN=y\tk\nCN=x\tk\n";
  const path = `${DIR}/policy-mixed`;
  await Deno.writeTextFile(path, text);
  const options = { reservedLabels: new Set(["svc-audit"]), maxGrants: 1_000_000 };
  const { parsed, fileBytes } = await readPolicyInThread(path, options);
  assert.equal(fileBytes, text.length);
  assert.deepEqual(parsed, parsePolicyText(text, path, options));
  assert.ok(parsed.errors.length === 1 && parsed.warnings.length >= 2);
  assert.ok(parsed.compact.buffer instanceof SharedArrayBuffer, "the grants come back shared");
});

Deno.test("policy reader thread: the event loop runs meanwhile, the read runs at nice 19", async () => {
  const path = `${DIR}/policy-million`;
  await Deno.writeFile(path, policyOfGrants(1_000_000, "k").bytes);
  let turns = 0;
  let readerNice = -20;
  let done = false;
  const reading = readPolicyInThread(path, {}).finally(() => done = true);
  while (!done) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    turns++;
    readerNice = Math.max(readerNice, ...otherThreadsNice());
  }
  const { parsed } = await reading;
  assert.equal(parsed.size, 1_000_000);
  assert.ok(turns > 1, `timers ran while a million grants were read (${turns} turns)`);
  assert.equal(readerNice, 19, "a thread of the process ran at nice 19 during the read");
});

Deno.test("policy reader thread: a file it cannot read rejects with the reader's PolicyError", async () => {
  const err = await readPolicyInThread(`${DIR}/absent`, {}).then(() => undefined, (e) => e);
  assert.ok(err instanceof PolicyError, `expected a PolicyError, got ${err}`);
  assert.equal(err.line, 0);
  assert.match(err.message, /absent: cannot read the policy file .*check the --policy path/);
});

Deno.test("policy reader thread: a thread that fails rejects with a PolicyError naming the file", async () => {
  const failing = new URL(
    `data:application/javascript,${encodeURIComponent("throw new Error('no reader here');")}`,
  );
  const err = await readPolicyInThread("/etc/svcd/policy", {}, failing)
    .then(() => undefined, (e) => e);
  assert.ok(err instanceof PolicyError, `expected a PolicyError, got ${err}`);
  assert.match(
    err.message,
    /^\/etc\/svcd\/policy: the policy reader thread failed: .*no reader here/,
  );
});
