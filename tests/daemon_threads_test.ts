/**
 * `svcd serve --threads 2`: two request Workers accept from the authenticated socket while the
 * main isolate keeps the concurrency cap, the refusal budget and the audit log. What must hold
 * across the threads as it does in one: the per-identity cap, the refusal budget, one audit chain,
 * SIGHUP reaching every Worker, and the exit codes. Which Worker served a request is read from
 * its audit line: each Worker's listener numbers requests under its own random 8-hex prefix.
 */
import assert from "node:assert/strict";
import { readAuditLines, runAuditVerify, sha256Hex } from "./support/audit.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type ClientResponse, request } from "./support/http_client.ts";
import { deleteKeyWithPkcs11Tool, makeTestToken } from "./support/token.ts";
import { EXIT_TOKEN_DEAD } from "../lib/server/daemon/daemon.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const MALLORY = "CN=mallory,O=Example,C=DE";
const THREADS = ["--threads", "2"];

function sign(socket: string, subject: string, key: string, body: string | Uint8Array) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", key]],
    body,
  });
}

/** The Worker (its listener's request-id prefix) of every sign line. */
async function servingThreads(d: TestDaemon): Promise<Set<string>> {
  const lines = await readAuditLines(d.auditDir);
  return new Set(
    lines.filter((l) => l.event === "sign").map((l) => String(l.request_id).slice(0, 8)),
  );
}

/**
 * Signs with `subject` from 16 clients until sign lines show both Workers served; returns the
 * statuses seen. The kernel hands each connection to one of the accepting Workers: a few dozen
 * concurrent requests reach both in practice; 50 rounds bound the test if one never did.
 */
async function reachBothThreads(d: TestDaemon, subjects: string[], key: string) {
  for (let round = 0; round < 50; round++) {
    await Promise.all(
      Array.from({ length: 16 }, (_, i) => sign(d.socket, subjects[i % subjects.length], key, "m")),
    );
    if ((await servingThreads(d)).size >= 2) return;
  }
  assert.fail("50 rounds of 16 concurrent requests never reached both Workers");
}

Deno.test({
  name: "threads: the daemon says it serves with 2 request threads and signs",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const d = await startDaemon({ token, policy: `${ALICE}\tk\n`, args: THREADS });
    try {
      assert.match(d.stderr(), /listening on .*2 threads, 16 workers\)/);
      assert.equal((await sign(d.socket, ALICE, "k", "hello")).status, 200);
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "threads: the per-identity cap counts across both Workers — the workers-th request is 429",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    // --workers 4: cap 3 per identity, 2 + 2 handler slots over the two Workers. A per-Worker
    // count would never refuse: each Worker runs at most 2 handlers. svcmod's delay rule holds
    // each C_Sign for 500 ms, so a burst's requests arrive while the admitted ones still sign.
    const token = await makeTestToken({ keys: { k: "ec-p256" }, module: "svcmod" });
    const d = await startDaemon({
      token,
      policy: `${ALICE}\tk\n`,
      args: [...THREADS, "--workers", "4"],
    });
    const faults = `${token.module.tokenDir}/faults`;
    try {
      await Deno.writeTextFile(faults, "C_Sign delay 500\n");
      // A burst refuses only when it keeps all 4 handler slots busy, i.e. when the kernel handed
      // both Workers at least 2 of its connections: a few rounds make that happen.
      let capped: ClientResponse | undefined;
      const served: number[] = [];
      for (let round = 0; round < 20 && !capped; round++) {
        const burst = await Promise.all(
          Array.from({ length: 12 }, () => sign(d.socket, ALICE, "k", `round ${round}`)),
        );
        for (const r of burst) assert.ok(r.status === 200 || r.status === 429, r.text());
        capped = burst.find((r) => r.status === 429);
        served.push(burst.filter((r) => r.status === 200).length);
      }
      assert.ok(capped, `no burst was capped (200s per burst: ${served.join(", ")})`);
      assert.equal(capped.header("retry-after"), "1");
      assert.match(capped.text(), /concurrent requests/);
      const signed = (await readAuditLines(d.auditDir)).filter((l) => l.event === "sign");
      assert.equal(signed.length, served.reduce((a, b) => a + b, 0), "one line per signature");
      assert.equal(
        new Set(signed.map((l) => String(l.request_id).slice(0, 8))).size,
        2,
        "both Workers signed for the one identity",
      );
    } finally {
      await Deno.remove(faults).catch(() => {});
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});

Deno.test({
  name:
    "threads: refusals on both Workers count in one budget — limited after exactly the threshold, one identity_limited line",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const crowd = Array.from({ length: 8 }, (_, i) => `CN=crowd${i},O=Example,C=DE`);
    const policy = [ALICE, MALLORY, ...crowd].map((s) => `${s}\tk\n`).join("");
    // Even: refusals go in pairs, so the crossing pair is all 403 and the next all 429.
    const threshold = 6;
    const d = await startDaemon({
      token,
      policy,
      args: [
        ...THREADS,
        ...["--refusal-threshold", String(threshold), "--refusal-base-delay", "600"],
        ...["--refusal-refill", "3600", "--refusal-max-delay", "3600"],
      ],
    });
    try {
      await reachBothThreads(d, crowd, "k");
      // Mallory's refusals go out in pairs from 2 connections at once, so both Workers take some.
      const statuses: number[] = [];
      for (let i = 0; i < threshold + 3; i += 2) {
        const pair = await Promise.all([
          sign(d.socket, MALLORY, "not-granted", "x"),
          sign(d.socket, MALLORY, "not-granted", "x"),
        ]);
        statuses.push(...pair.map((r) => r.status));
      }
      // Each of the first `threshold` refusals is a 403 (the crossing one too), then 429.
      assert.deepEqual(statuses.slice(0, threshold), Array(threshold).fill(403), `${statuses}`);
      assert.ok(statuses.slice(threshold).every((s) => s === 429), `${statuses}`);
      const legit = await sign(d.socket, MALLORY, "k", "legit");
      assert.equal(legit.status, 429, "the delay holds for the identity's good requests too");
      assert.equal(legit.header("retry-after"), "600");
      assert.equal((await sign(d.socket, ALICE, "k", "alice")).status, 200);
      const limited = (await readAuditLines(d.auditDir)).filter((l) =>
        l.event === "identity_limited"
      );
      assert.equal(limited.length, 1);
      assert.equal(limited[0].actor, MALLORY);
      assert.equal(limited[0].count, threshold);
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "threads: one audit chain under concurrent load — every received signature has its line",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const crowd = Array.from({ length: 16 }, (_, i) => `CN=crowd${i},O=Example,C=DE`);
    const d = await startDaemon({
      token,
      policy: crowd.map((s) => `${s}\tk\n`).join(""),
      args: THREADS,
    });
    const received: { message: string; signature: Uint8Array }[] = [];
    try {
      await Promise.all(crowd.map(async (subject, c) => {
        for (let i = 0; i < 25; i++) {
          const message = `client ${c} message ${i}`;
          const res = await sign(d.socket, subject, "k", message);
          assert.equal(res.status, 200, res.text());
          received.push({ message, signature: res.body });
        }
      }));
      assert.equal((await servingThreads(d)).size, 2, "400 requests reached both Workers");
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
    }
    try {
      const lines = await readAuditLines(d.auditDir);
      const logged = new Map(
        lines.filter((l) => l.event === "sign").map((l) => [l.signature_sha256, l]),
      );
      for (const { message, signature } of received) {
        const line = logged.get(await sha256Hex(signature));
        assert.ok(line, "a signature reached a client without its audit line");
        assert.equal(line.message_sha256, await sha256Hex(new TextEncoder().encode(message)));
      }
      const files = [...Deno.readDirSync(d.auditDir)].filter((e) => e.name.startsWith("audit.log"));
      assert.equal(files.length, 1, "one login, one audit file, one chain");
      const v = await runAuditVerify(token, d.auditDir);
      assert.equal(v.code, 0, v.text);
    } finally {
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "threads: SIGHUP reaches every Worker — a grant removed is 403 on both",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const crowd = Array.from({ length: 16 }, (_, i) => `CN=crowd${i},O=Example,C=DE`);
    const gone = Array.from({ length: 16 }, (_, i) => `CN=gone${i},O=Example,C=DE`);
    const d = await startDaemon({
      token,
      policy: [...gone, ...crowd].map((s) => `${s}\tk\n`).join(""),
      // Refusals here are the point, not a reason to delay anyone.
      args: [...THREADS, "--refusal-threshold", "1000"],
    });
    try {
      await reachBothThreads(d, gone, "k");
      await Deno.writeTextFile(d.policyPath, crowd.map((s) => `${s}\tk\n`).join(""));
      d.signal("SIGHUP");
      await d.waitForLog(/policy reloaded: 16 grants/);
      // The removed subjects and the crowd (still granted) at once, until the crowd's lines show
      // that both Workers served such a burst: none of them signed for a removed grant.
      const workers = new Set<string>();
      let lines: Record<string, unknown>[] = [];
      for (let round = 0; round < 20 && workers.size < 2; round++) {
        const [refused, others] = await Promise.all([
          Promise.all(gone.map((s) => sign(d.socket, s, "k", "after the reload"))),
          Promise.all(crowd.map((s) => sign(d.socket, s, "k", "after the reload"))),
        ]);
        // A 200 here is a signature for a removed grant: a thread still had the old policy.
        for (const r of refused) assert.equal(r.status, 403, "a removed grant was served");
        for (const r of others) assert.equal(r.status, 200, r.text());
        lines = await readAuditLines(d.auditDir);
        const afterReload = lines.slice(lines.findLastIndex((l) => l.event === "policy_reload"));
        for (const l of afterReload.filter((l) => l.event === "sign")) {
          workers.add(String(l.request_id).slice(0, 8));
        }
      }
      assert.equal(workers.size, 2, "no burst after the reload reached both Workers");
      const afterReload = lines.slice(lines.findLastIndex((l) => l.event === "policy_reload"));
      const signedGone = afterReload.filter((l) =>
        l.event === "sign" && gone.includes(String(l.actor))
      );
      assert.equal(signedGone.length, 0, "a Worker signed for a removed grant");
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});

Deno.test({
  name:
    "threads: a key deleted on the token, then SIGHUP or /health — no Worker signs with it again",
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k1: "ec-p256", k2: "ec-p256" } });
    // 4 refusals per identity below: far from the budget's threshold of 10.
    const crowd = Array.from({ length: 16 }, (_, i) => `CN=crowd${i},O=Example,C=DE`);
    const d = await startDaemon({
      token,
      policy: crowd.flatMap((s) => [`${s}\tk1\n`, `${s}\tk2\n`]).join(""),
      args: THREADS,
    });
    try {
      // Both Workers hold a working copy of k1 (each signed with it).
      await reachBothThreads(d, crowd, "k1");
      await deleteKeyWithPkcs11Tool(token, "k1");
      d.signal("SIGHUP");
      await d.waitForLog(/policy reloaded/);
      const after = await Promise.all(
        crowd.flatMap((s) => [sign(d.socket, s, "k1", "after"), sign(d.socket, s, "k1", "after")]),
      );
      assert.deepEqual(new Set(after.map((r) => r.status)), new Set([403]));

      // /health on one thread drops the copies of a deleted key in every thread before it answers.
      await reachBothThreads(d, crowd, "k2");
      await deleteKeyWithPkcs11Tool(token, "k2");
      const health = await request(d.socket, {
        method: "GET",
        path: "/health",
        headers: [["X-SVC-Client-Subject", crowd[0]]],
      });
      assert.equal(health.status, 200, health.text());
      await d.waitForLog(/keys: k2 no longer on the token/);
      const afterHealth = await Promise.all(
        crowd.flatMap((s) => [sign(d.socket, s, "k2", "after"), sign(d.socket, s, "k2", "after")]),
      );
      assert.deepEqual(new Set(afterHealth.map((r) => r.status)), new Set([403]));
    } finally {
      assert.equal(await d.stop(), 0, d.stderr());
      await token.cleanup();
    }
  },
});

Deno.test({
  name: "threads: a dead token under a Worker stops the daemon with exit 75",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { k: "ec-p256" }, module: "svcmod" });
    const d = await startDaemon({ token, policy: `${ALICE}\tk\n`, args: THREADS });
    const faults = `${token.module.tokenDir}/faults`;
    try {
      assert.equal((await sign(d.socket, ALICE, "k", "before")).status, 200);
      await Deno.writeTextFile(faults, "C_SignInit 0x30 1\n"); // CKR_DEVICE_ERROR, every time
      const res: ClientResponse = await sign(d.socket, ALICE, "k", "dead");
      assert.equal(res.status, 503, res.text());
      const status = await d.status;
      assert.equal(status.code, EXIT_TOKEN_DEAD, d.stderr());
      assert.match(d.stderr(), /stopping: token is dead: .*CKR_DEVICE_ERROR/);
    } finally {
      await Deno.remove(faults).catch(() => {});
      await d.stop();
      await token.cleanup();
    }
  },
});
