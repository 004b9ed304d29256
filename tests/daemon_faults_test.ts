/**
 * Module faults under a /sign load, through the test module's fault hook (tests/module/src/fault.c:
 * a `faults` file in the token directory makes C_SignInit / C_Sign answer a chosen CK_RV at
 * random, seeded). For each code: every request gets a 200 with a signature over exactly its body
 * (checked with the public key, not the module) or a problem+json 5xx; every signature a client
 * received has its audit line; nothing hangs; and the daemon does what the README's "dead token"
 * rows say — exits 75 for a dead token or session, serves on after a failed operation.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { readAuditLines, runAuditVerify, sha256Hex } from "./support/audit.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { type ClientResponse, request } from "./support/http_client.ts";
import { daemonPublicKeys, verifyIndependently } from "./support/oracle.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { EXIT_TOKEN_DEAD } from "../lib/server/daemon/daemon.ts";

// One identity may hold workers − 1 requests at once (the concurrency cap): four identities share
// the load.
const CLIENTS = [0, 1, 2, 3].map((i) => `CN=fault${i},O=Example,C=DE`);
const POLICY = CLIENTS.map((s) => `${s}\tk-ec\n`).join("");
const REQUESTS_PER_CLIENT = 15;
/** Failure guard only: a request that takes this long is a hang. */
const HANG_MS = 20_000;

interface FaultCase {
  name: string;
  rv: number;
  /** What the README documents: a dead token/session stops the daemon with 75. */
  dead: boolean;
}

const CASES: FaultCase[] = [
  { name: "CKR_DEVICE_ERROR", rv: 0x30, dead: true },
  { name: "CKR_SESSION_HANDLE_INVALID", rv: 0xb3, dead: true },
  { name: "CKR_GENERAL_ERROR", rv: 0x5, dead: true },
  { name: "CKR_FUNCTION_FAILED", rv: 0x6, dead: false },
];

function sign(socket: string, subject: string, body: Uint8Array): Promise<ClientResponse> {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", "k-ec"]],
    body,
  });
}

/** Rejects after `ms` unless `work` settles first (a guard against hangs, not a wait). */
async function guarded<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const guard = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hang: ${what} took over ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, guard]);
  } finally {
    clearTimeout(timer);
  }
}

interface Outcome {
  served: { message: Uint8Array; signature: Uint8Array }[];
  /** 5xx answers by status. */
  refused: Record<number, number>;
  /** Clients whose next connection found the socket gone (the daemon had stopped). */
  unanswered: number;
}

/** The load: each client signs its own messages one after the other until done or the daemon is gone. */
async function load(daemon: TestDaemon, label: string, exited: () => boolean): Promise<Outcome> {
  const out: Outcome = { served: [], refused: {}, unanswered: 0 };
  await Promise.all(CLIENTS.map(async (subject, c) => {
    for (let i = 0; i < REQUESTS_PER_CLIENT && !exited(); i++) {
      const message = new TextEncoder().encode(`${label} client ${c} message ${i}`);
      let res: ClientResponse | undefined;
      try {
        res = await guarded(sign(daemon.socket, subject, message), HANG_MS, "a /sign");
      } catch (err) {
        const gone = err instanceof Deno.errors.NotFound ||
          err instanceof Deno.errors.ConnectionRefused;
        if (!gone) throw err;
      }
      // A connection the daemon accepted always gets an answer, even while it stops.
      assert.notEqual(res?.status, 0, `closed without an answer:\n${daemon.stderr()}`);
      if (!res) {
        // Only a daemon that is going away refuses a connection (its socket is gone): done.
        // Its log line may still be in the pipe when the socket is already gone: wait for it.
        await guarded(daemon.waitForLog("stopping: token is dead"), HANG_MS, "the stop's log line")
          .catch((err) =>
            assert.fail(`connection refused while serving (${err.message}):\n${daemon.stderr()}`)
          );
        out.unanswered++;
        return;
      }
      if (res.status === 200) {
        out.served.push({ message, signature: res.body });
        continue;
      }
      assert.ok(res.status === 500 || res.status === 503, `status ${res.status}: ${res.text()}`);
      assert.match(res.header("content-type") ?? "", /application\/problem\+json/);
      assert.equal(res.body.length > 0, true);
      out.refused[res.status] = (out.refused[res.status] ?? 0) + 1;
    }
  }));
  return out;
}

for (const fault of CASES) {
  Deno.test({
    name: `daemon under ${fault.name} at random from C_SignInit and C_Sign: ${
      fault.dead ? "5xx, then exit 75" : "5xx for the failed requests, serves on"
    }; no signature without its audit line`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token: TestToken = await makeTestToken({
        keys: { "k-ec": "ec-p256" },
        module: "svcmod",
      });
      const workDir = moduleTempDir("svcd-faults-");
      const faults = `${token.module.tokenDir}/faults`;
      const daemon = await startDaemon({ token, policy: POLICY, workDir });
      let exited = false;
      daemon.status.then(() => exited = true);
      try {
        const key = (await daemonPublicKeys(daemon.socket, CLIENTS[0])).get("k-ec")!;
        const rv = `0x${fault.rv.toString(16)}`;
        await Deno.writeTextFile(faults, `C_SignInit ${rv} 0.05 ${fault.rv}\nC_Sign ${rv} 0.05\n`);
        const outcome = await load(daemon, fault.name, () => exited);
        assert.ok(
          Object.keys(outcome.refused).length > 0,
          `no fault fired: ${JSON.stringify(outcome)}`,
        );
        for (const { message, signature } of outcome.served) {
          assert.ok(
            await verifyIndependently("ec-p256", key, message, signature),
            "a 200 whose body is not a signature over exactly that request's message",
          );
        }

        if (fault.dead) {
          const status = await guarded(daemon.status, HANG_MS, "the stop after a dead token");
          assert.equal(status.code, EXIT_TOKEN_DEAD, daemon.stderr());
          assert.match(daemon.stderr(), new RegExp(`stopping: token is dead: .*${fault.name}`));
        } else {
          assert.equal(exited, false, `the daemon stopped:\n${daemon.stderr()}`);
          await Deno.remove(faults);
          // The audit log may be in an outage after a failed MAC: it resumes by itself (≤ 1 s).
          let after: ClientResponse | undefined;
          const deadline = Date.now() + HANG_MS;
          while (
            (after = await sign(daemon.socket, CLIENTS[0], new TextEncoder().encode("after")))
              .status !== 200
          ) {
            assert.ok(
              Date.now() < deadline,
              `never recovered: ${after.status}\n${daemon.stderr()}`,
            );
            await daemon.waitForLog("signing resumes");
          }
          outcome.served.push({
            message: new TextEncoder().encode("after"),
            signature: after.body,
          });
          assert.equal(await daemon.stop(), 0);
        }

        await Deno.remove(faults).catch(() => {}); // `audit verify` uses the token too
        const lines = await readAuditLines(`${workDir}/audit`);
        const logged = new Map(
          lines.filter((l) => l.event === "sign").map((
            l,
          ) => [l.signature_sha256, l.message_sha256]),
        );
        for (const { message, signature } of outcome.served) {
          assert.equal(
            logged.get(await sha256Hex(signature)),
            await sha256Hex(message),
            "a signature reached a client without its audit line",
          );
        }
        const v = await runAuditVerify(token, `${workDir}/audit`);
        assert.equal(v.code, 0, v.text);
        console.log(
          `${fault.name}: ${outcome.served.length} served, refused ${
            JSON.stringify(outcome.refused)
          }, ` +
            `${outcome.unanswered} client(s) cut off by the stop`,
        );
      } finally {
        await daemon.stop();
        await Deno.remove(workDir, { recursive: true }).catch(() => {});
        await token.cleanup();
      }
    },
  });
}
