/**
 * A reload storm with request threads: eight clients sign with one granted key while the daemon
 * gets a SIGHUP every 50 ms, which drops every key copy in every thread, so each thread looks the
 * key up on the token and copies it again, again and again, while the others do the same. Every
 * answer must be 200: a granted request never fails because another thread copies the key or
 * because of a reload (`--threads 0, 2, 4`).
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { notOk, reloadStorm } from "./support/reload_storm.ts";

const SUBJECTS = Array.from({ length: 8 }, (_, i) => `CN=storm${i},O=Example,C=DE`);
const POLICY = SUBJECTS.map((s) => `${s}\tk1\n`).join("");
/**
 * SIGHUPs per setting (30 s at the 50 ms rhythm). A lookup meets another thread's copy in the
 * making only now and then, so the storm is long enough to meet several.
 */
const HUPS = 600;

for (const threads of [0, 2, 4]) {
  Deno.test({
    name:
      `reload storm: --threads ${threads}, ${HUPS} SIGHUPs 50 ms apart under /sign — every answer 200`,
    sanitizeResources: false,
    sanitizeOps: false,
    fn: async () => {
      const token = await makeTestToken({ keys: { k1: "ec-p256" } });
      const d = await startDaemon({ token, policy: POLICY, args: ["--threads", String(threads)] });
      try {
        const storm = await reloadStorm(d, { subjects: SUBJECTS, key: "k1", hups: HUPS });
        const summary = `${JSON.stringify(storm)}\n${failedLines(d.stderr())}`;
        assert.equal(notOk(storm), 0, summary);
        assert.equal(storm.badSignatures, 0, summary);
        // The storm overlapped the signing: the clients signed between the signals.
        assert.ok(storm.statuses[200] >= HUPS, summary);
        assert.ok(storm.checked > 0, summary);
      } finally {
        assert.equal(await d.stop(), 0, d.stderr());
        await token.cleanup();
      }
    },
  });
}

/** The daemon's lines about failed requests (what a 500 logs), for the assertion's message. */
function failedLines(log: string): string {
  return log.split("\n").filter((l) => / failed: /.test(l)).slice(0, 5).join("\n");
}
