/**
 * The public listener on several threads (SoftHSM2): `--public-threads` Workers serve one socket,
 * each at `--public-nice`, and every concurrent OCSP request gets its own signed answer.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { publicListenerSetup } from "./support/ca.ts";
import { request } from "./support/http_client.ts";
import { certIdFor, encodeOcspRequest } from "../lib/ocsp/request.ts";
import { parseOcspResponse } from "../lib/ocsp/response.ts";

/** Nice value of one thread, from /proc (field 19 of its stat). */
function niceOf(pid: number, tid: number | string): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/task/${tid}/stat`);
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

/** Nice values of the threads of `pid` whose name starts with `prefix`. */
function threadNices(pid: number, prefix: string): number[] {
  return [...Deno.readDirSync(`/proc/${pid}/task`)]
    .filter((task) =>
      Deno.readTextFileSync(`/proc/${pid}/task/${task.name}/comm`).startsWith(prefix)
    )
    .map((task) => niceOf(pid, task.name));
}

Deno.test({
  name:
    "public listener: --public-threads 3 --public-nice 12 — three Workers at nice 12, the main thread at 0",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    const work = moduleTempDir("svcd-public-threads-");
    try {
      const pub = await publicListenerSetup(token, work);
      const daemon = await startDaemon({
        token,
        workDir: work,
        policy: "",
        args: [...pub.args, "--public-threads", "3", "--public-nice", "12"],
      });
      try {
        await daemon.waitForLog("certificates, OCSP; 3 threads");
        // Deno names a Worker's thread "worker-N"; three of them are the public listener's. A
        // thread one of them starts later (the runtime's helpers) inherits its nice value and may
        // keep its name (Linux), so the check is "at least three".
        const workers = threadNices(daemon.pid, "worker-");
        assert.ok(workers.filter((nice) => nice === 12).length >= 3, `${workers}`);
        assert.equal(niceOf(daemon.pid, daemon.pid), 0, "the main thread");
        const nonces = Array.from({ length: 48 }, (_, i) => new Uint8Array(16).fill(i + 1));
        const answers = await Promise.all(nonces.map((nonce) =>
          request(pub.socket, {
            method: "POST",
            path: "/ocsp",
            headers: [["Content-Type", "application/ocsp-request"]],
            body: encodeOcspRequest({ certIds: [certIdFor(pub.issuer, pub.issuedSerial)], nonce }),
          })
        ));
        answers.forEach((res, i) => {
          assert.equal(res.status, 200);
          const parsed = parseOcspResponse(res.body);
          assert.equal(parsed.status, "successful");
          assert.deepEqual(parsed.basic?.nonce, nonces[i], "each answer carries its own nonce");
          assert.equal(parsed.basic?.singles[0].certStatus.status, "good");
        });
      } finally {
        assert.equal(await daemon.stop(), 0);
      }
      assert.throws(() => Deno.lstatSync(pub.socket), Deno.errors.NotFound);
    } finally {
      await token.cleanup();
      await Deno.remove(work, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "public listener: a daemon started niced above --public-nice keeps its priority (never raised, no start failure)",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    const work = await Deno.makeTempDir({ prefix: "svcd-public-niced-" });
    try {
      const pub = await publicListenerSetup(token, work);
      const main = new URL("../main.ts", import.meta.url).pathname;
      const daemon = await startDaemon({
        token,
        workDir: work,
        policy: "",
        command: ["nice", "-n", "15", Deno.execPath(), "run", "-A", main, "serve"],
        args: [...pub.args, "--public-threads", "2", "--public-nice", "12"],
      });
      try {
        await daemon.waitForLog("certificates, OCSP; 2 threads");
        assert.equal(niceOf(daemon.pid, daemon.pid), 15);
        const workers = threadNices(daemon.pid, "worker-");
        assert.ok(workers.length >= 2 && workers.every((nice) => nice === 15), `${workers}`);
      } finally {
        assert.equal(await daemon.stop(), 0);
      }
    } finally {
      await token.cleanup();
      await Deno.remove(work, { recursive: true });
    }
  },
});
