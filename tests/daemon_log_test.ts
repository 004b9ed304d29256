/**
 * The daemon's own log under a flood of malformed requests: bounded (a few lines per second per
 * kind, plus a count of what was suppressed, so nothing goes unaccounted) and never carrying the
 * client's control bytes (C1 bytes included).
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { rawExchange } from "./support/http_client.ts";

const FLOOD = 200;

/** Lines written for malformed requests plus the counts of those suppressed. */
function accounted(log: string): { written: number; suppressed: number } {
  const written = log.split("\n").filter((l) => l.startsWith("svcd: listener parse_error:"))
    .length;
  let suppressed = 0;
  for (const m of log.matchAll(/parse_error: suppressed (\d+) similar/g)) suppressed += +m[1];
  return { written, suppressed };
}

Deno.test({
  name: "log: a flood of malformed requests gives a bounded, escaped log that accounts for each",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const token = await makeTestToken({ keys: {} });
    const daemon = await startDaemon({ token, policy: "" });
    try {
      // C1 (CSI), ESC, DEL, a quote and a non-UTF-8 byte in the request line.
      const bad = Uint8Array.from([
        ...new TextEncoder().encode("GET /"),
        0x9b,
        0x1b,
        0x5b,
        0x33,
        0x31,
        0x6d,
        0x7f,
        0x22,
        0xff,
        ...new TextEncoder().encode(" HTTP/1.1\r\nHost: svcd\r\n\r\n"),
      ]);
      for (let i = 0; i < FLOOD; i++) {
        const answer = new TextDecoder().decode(await rawExchange(daemon.socket, bad));
        assert.match(answer, /^HTTP\/1\.1 400 /);
      }
      await daemon.waitForLog((log) => {
        const { written, suppressed } = accounted(log);
        return written + suppressed >= FLOOD;
      });
      const log = daemon.stderr();
      const { written, suppressed } = accounted(log);
      assert.equal(written + suppressed, FLOOD, "every malformed request is a line or counted");
      assert.ok(suppressed > 0 && written < FLOOD, `${written} lines for ${FLOOD} requests`);
      // deno-lint-ignore no-control-regex
      assert.doesNotMatch(log, /[\x00-\x09\x0b-\x1f\x7f-\x9f\ufffd]/, "a raw control byte");
      for (const escaped of ["\\x9b", "\\x7f", "\\xff"]) {
        assert.ok(log.includes(escaped), `${escaped} in the log`);
      }
    } finally {
      await daemon.stop();
      await token.cleanup();
    }
  },
});
