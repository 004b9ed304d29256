/**
 * The refusal budget and the concurrency cap through the real daemon (429 with Retry-After, decided
 * before the audit write):
 * crossing, who is delayed, one identity_limited line per crossing, persistence across a restart,
 * no lock, and a corrupt state file.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type ClientResponse, request } from "./support/http_client.ts";
import { readAuditLines } from "./support/audit.ts";

const MALLORY = "CN=mallory,O=Example,C=DE";
const ALICE = "CN=alice,O=Example,C=DE";
const POLICY = `${ALICE}\tk\n${MALLORY}\tk\n`;
// A delay far longer than any step takes, so that no step depends on the machine's speed.
const THROTTLE = [
  "--refusal-threshold",
  "5",
  "--refusal-base-delay",
  "600",
  "--refusal-max-delay",
  "3600",
  "--refusal-refill",
  "3600",
];

function sign(sock: string, subject: string, key: string): Promise<ClientResponse> {
  return request(sock, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", key]],
    body: "m",
  });
}

async function limitedLines(d: TestDaemon) {
  return (await readAuditLines(d.auditDir)).filter((l) => l.event === "identity_limited");
}

Deno.test({
  name: "throttle: the refusal budget through the daemon",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token: TestToken = await makeTestToken({ keys: { k: "ec-p256" } });
    let daemon = await startDaemon({ token, policy: POLICY, args: THROTTLE });
    try {
      await t.step(
        "below the threshold refusals are 403; the crossing one too, then 429",
        async () => {
          for (let i = 0; i < 5; i++) {
            assert.equal((await sign(daemon.socket, MALLORY, "nope")).status, 403);
          }
          const limited = await sign(daemon.socket, MALLORY, "nope");
          assert.equal(limited.status, 429);
          assert.equal(limited.header("retry-after"), "600");
        },
      );

      await t.step(
        "a legitimate request of the limited identity is refused; another identity is served",
        async () => {
          const legit = await sign(daemon.socket, MALLORY, "k");
          assert.equal(legit.status, 429);
          assert.ok(Number(legit.header("retry-after")) >= 1);
          assert.equal((await sign(daemon.socket, ALICE, "k")).status, 200);
        },
      );

      await t.step(
        "a burst of 1000 refused requests writes exactly one identity_limited line",
        async () => {
          for (let i = 0; i < 20; i++) {
            const burst = await Promise.all(
              Array.from({ length: 50 }, () => sign(daemon.socket, MALLORY, "nope")),
            );
            for (const r of burst) assert.equal(r.status, 429);
          }
          const lines = await limitedLines(daemon);
          assert.equal(lines.length, 1);
          assert.equal(lines[0].actor, MALLORY);
          assert.equal(lines[0].count, 5);
          assert.equal(lines[0].delay_seconds, 600);
          const signs = (await readAuditLines(daemon.auditDir)).filter((l) => l.actor === MALLORY);
          assert.equal(signs.length, 1, "refused requests are not written line by line");
        },
      );

      await t.step("the delay holds across a restart (persisted count)", async () => {
        assert.equal(await daemon.stop(), 0);
        daemon = await startDaemon({
          token,
          policy: POLICY,
          args: THROTTLE,
          workDir: daemon.workDir,
        });
        const after = await sign(daemon.socket, MALLORY, "k");
        assert.equal(after.status, 429);
        const retry = Number(after.header("retry-after"));
        assert.ok(retry >= 1 && retry <= 600, `Retry-After ${retry}`);
        assert.equal((await sign(daemon.socket, ALICE, "k")).status, 200);
      });

      await t.step("/health counts limited identities without naming them", async () => {
        const health = await request(daemon.socket, {
          path: "/health",
          headers: [["X-SVC-Client-Subject", ALICE]],
        });
        const body = health.json() as { limited_identities: number };
        assert.equal(body.limited_identities, 1);
        assert.ok(!health.text().includes("mallory"));
      });
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "throttle: never a lock — once Retry-After has passed a good request is served",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const args = [
      "--refusal-threshold",
      "2",
      "--refusal-base-delay",
      "1",
      "--refusal-refill",
      "3600",
    ];
    const daemon = await startDaemon({ token, policy: POLICY, args });
    try {
      for (let i = 0; i < 2; i++) {
        assert.equal((await sign(daemon.socket, MALLORY, "nope")).status, 403);
      }
      let res = await sign(daemon.socket, MALLORY, "k");
      for (let tries = 0; res.status === 429 && tries < 10; tries++) {
        assert.equal(res.header("retry-after"), "1");
        // Waiting is the behaviour under test: the client is told how long, and waits that long.
        await new Promise((r) => setTimeout(r, 1000));
        res = await sign(daemon.socket, MALLORY, "k");
      }
      assert.equal(res.status, 200);
      assert.equal((await limitedLines(daemon)).length, 1);
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

Deno.test({
  name:
    "throttle: the per-identity concurrency cap answers 429 Retry-After 1, one client at a time is never capped",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    // Two workers: an identity may hold one request at a time.
    const daemon = await startDaemon({ token, policy: POLICY, args: ["--workers", "2"] });
    try {
      for (let i = 0; i < 20; i++) {
        assert.equal((await sign(daemon.socket, ALICE, "k")).status, 200);
      }
      let capped: ClientResponse | undefined;
      for (let round = 0; round < 20 && !capped; round++) {
        const answers = await Promise.all(
          Array.from({ length: 8 }, () => sign(daemon.socket, ALICE, "k")),
        );
        capped = answers.find((r) => r.status === 429);
        for (const r of answers) assert.ok(r.status === 200 || r.status === 429);
      }
      assert.ok(
        capped,
        "eight concurrent requests of one identity with two workers never hit the cap",
      );
      assert.equal(capped.header("retry-after"), "1");
      // The cap is not a refusal: no crossing, no identity_limited line.
      assert.equal(
        (await readAuditLines(daemon.auditDir)).filter((l) => l.event === "identity_limited")
          .length,
        0,
      );
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "throttle: a corrupt state file stops start-up with a message naming the file",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    const workDir = moduleTempDir("svcd-corrupt-");
    try {
      await Deno.mkdir(`${workDir}/state`);
      await Deno.writeTextFile(
        `${workDir}/state/refusals.sqlite`,
        "this is not a database ".repeat(100),
      );
      await assert.rejects(
        startDaemon({ token, policy: POLICY, workDir }),
        (e: Error) => e.message.includes(`${workDir}/state/refusals.sqlite`),
      );
    } finally {
      await Deno.remove(workDir, { recursive: true });
      await token.cleanup();
    }
  },
});
