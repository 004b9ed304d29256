/**
 * Several nodes grant several refusal budgets (docs/operations.md "Several nodes": each node keeps
 * its refusal counts in its own --state-dir). Two svcd processes on one SoftHSM token folder, asked
 * directly on their sockets: an identity refused up to the budget on node A is throttled there
 * (429) while node B still refuses it with 403 on its own count, until it crosses on B too.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { signAs } from "./support/metrics.ts";
import { readAuditLines } from "./support/audit.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const MALLORY = "CN=mallory,O=Example,C=DE";
const THRESHOLD = 3;
// A delay and a refill far longer than the test: no count drains while it runs.
const THROTTLE = [
  ...["--refusal-threshold", String(THRESHOLD), "--refusal-base-delay", "600"],
  ...["--refusal-max-delay", "3600", "--refusal-refill", "3600", "--syslog-socket", "none"],
];

/** The statuses of `n` requests of Mallory, one after the other, for a key she is not granted. */
async function refusals(node: TestDaemon, n: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i++) statuses.push((await signAs(node.socket, MALLORY, "nope")).status);
  return statuses;
}

Deno.test({
  name:
    "nodes: each node keeps its own refusal budget — throttled on A, still 403 on B until it crosses there",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    let a: TestDaemon | undefined, b: TestDaemon | undefined;
    try {
      const policy = `${ALICE}\tk\n${MALLORY}\tk\n`;
      // One after the other: two processes logging in to one SoftHSM token folder at the same
      // instant can see C_Login fail (tests/nodes_nginx_test.ts).
      a = await startDaemon({ token, policy, args: THROTTLE });
      b = await startDaemon({ token, policy, args: THROTTLE });
      assert.notEqual(a.stateDir, b.stateDir);

      assert.deepEqual(await refusals(a, THRESHOLD + 2), [
        ...Array(THRESHOLD).fill(403),
        429,
        429,
      ]);
      // A's crossing is not B's: B counts from zero, so below its threshold it refuses with 403
      // and serves a granted key, while A throttles even that.
      assert.deepEqual(await refusals(b, THRESHOLD - 1), Array(THRESHOLD - 1).fill(403));
      assert.equal((await signAs(b.socket, MALLORY, "k")).status, 200);
      assert.equal((await signAs(a.socket, MALLORY, "k")).status, 429, "A still throttles");
      // B's own crossing (the THRESHOLD-th refusal there, still a 403), then B throttles too.
      assert.deepEqual(await refusals(b, 3), [403, 429, 429]);
      // Another identity is served on both.
      assert.equal((await signAs(a.socket, ALICE, "k")).status, 200);
      assert.equal((await signAs(b.socket, ALICE, "k")).status, 200);

      await Promise.all([a.stop(), b.stop()]);
      // Each node wrote its own crossing, with its own count.
      for (const node of [a, b]) {
        const limited = (await readAuditLines(node.auditDir))
          .filter((l) => l.event === "identity_limited");
        assert.equal(limited.length, 1, node.auditDir);
        assert.equal(limited[0].actor, MALLORY);
        assert.equal(limited[0].count, THRESHOLD);
      }
    } finally {
      await Promise.all([a?.stop(), b?.stop()]);
      await token.cleanup();
    }
  },
});
