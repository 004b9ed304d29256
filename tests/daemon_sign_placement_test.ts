/**
 * `--inline-sign-limit-us`: a key's signatures run on the thread that serves its request while
 * they are quick, and move to the thread pool once they are slow, so that a slow key cannot hold
 * that thread. svcmod's delay rule makes every C_Sign slow on demand. "On the thread pool" is
 * shown by what only the pool allows: `/health` answered, on the same thread, while a signature
 * is still being made (its session in use). A signature on the serving thread holds that thread
 * until it returns its session, so no `/health` can show it in use.
 */
import assert from "node:assert/strict";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { makeTestToken } from "./support/token.ts";
import { daemonPublicKeys, verifyIndependently } from "./support/oracle.ts";
import { SLOW_TO_MOVE } from "../lib/token/mod.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const MOVED = /keys: k signs on the thread pool from now on/;

function sign(d: TestDaemon, body: string) {
  return request(d.socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k"]],
    body,
  });
}

async function poolInUse(d: TestDaemon): Promise<number> {
  const r = await request(d.socket, {
    method: "GET",
    path: "/health",
    headers: [["X-SVC-Client-Subject", ALICE]],
  });
  assert.equal(r.status, 200, r.text());
  return JSON.parse(r.text()).pool.inUse;
}

/**
 * Starts a signature that svcmod holds for a second and asks /health until it shows the
 * signature's session in use; fails if the signature ends first (it held the serving thread).
 */
async function assertHealthAnsweredWhileSigning(d: TestDaemon, faults: string): Promise<void> {
  await Deno.writeTextFile(faults, "C_Sign delay 1000\n");
  let signed = false;
  const signing = sign(d, "held in the module").then((r) => {
    signed = true;
    return r;
  });
  let seen = false;
  while (!signed && !seen) seen = (await poolInUse(d)) >= 1 && !signed;
  const r = await signing;
  assert.equal(r.status, 200, r.text());
  assert.ok(seen, "no /health was answered while the signature was being made");
}

/**
 * A daemon on an svcmod token with key `k` granted to ALICE and `args`, for the length of `fn`
 * (given the daemon and the path of svcmod's faults file); stopped (exit 0) and removed after.
 */
async function withSvcmodDaemon(
  args: string[],
  fn: (d: TestDaemon, faults: string) => Promise<void>,
): Promise<void> {
  const token = await makeTestToken({ keys: { k: "ec-p256" }, module: "svcmod" });
  const d = await startDaemon({ token, policy: `${ALICE}\tk\n`, args });
  const faults = `${token.module.tokenDir}/faults`;
  try {
    await fn(d, faults);
  } finally {
    await Deno.remove(faults).catch(() => {});
    assert.equal(await d.stop(), 0, d.stderr());
    await token.cleanup();
  }
}

for (const threads of ["0", "1"]) {
  Deno.test({
    name: `sign placement (--threads ${threads}): a slow key moves to the thread pool after ` +
      `${SLOW_TO_MOVE} slow signatures, logged once; /health is then answered while it signs`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: () =>
      withSvcmodDaemon(
        ["--threads", threads, "--inline-sign-limit-us", "200"],
        async (d, faults) => {
          const key = (await daemonPublicKeys(d.socket, ALICE)).get("k")!;
          await Deno.writeTextFile(faults, "C_Sign delay 20\n"); // 20 ms ≫ 200 µs
          for (let i = 0; i < SLOW_TO_MOVE; i++) {
            const message = `slow ${i}`;
            const r = await sign(d, message);
            assert.equal(r.status, 200, r.text());
            const ok = await verifyIndependently(
              "ec-p256",
              key,
              new TextEncoder().encode(message),
              r.body,
            );
            assert.ok(ok, "signed on the serving thread: a valid signature over that message");
          }
          await d.waitForLog(MOVED);
          await assertHealthAnsweredWhileSigning(d, faults);
          assert.equal(d.stderr().split("\n").filter((l) => MOVED.test(l)).length, 1);
        },
      ),
  });
}

Deno.test({
  name:
    "sign placement: --inline-sign-limit-us 0 signs on the thread pool from the first signature",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: () =>
    withSvcmodDaemon(["--inline-sign-limit-us", "0"], async (d, faults) => {
      await assertHealthAnsweredWhileSigning(d, faults);
      assert.doesNotMatch(d.stderr(), MOVED, "nothing moved: it was never on the serving thread");
    }),
});
