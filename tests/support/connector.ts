/**
 * Test fixture, run as a child process: `lanes` clients connect to the socket at `path` again and
 * again, each sending one request and reading until the server closes, until stdin closes; then it
 * prints the counts as JSON. A connection that was made but got no byte back (closed or reset
 * unanswered) is `unanswered`; a connect the socket refused (its file gone, or nothing listening)
 * is `refused`, and that lane connects again on the event loop's next turn.
 *
 * @example
 * ```sh
 * deno run -A tests/support/connector.ts /tmp/x/auth.sock 4 < /dev/null
 * ```
 */
import { setImmediate } from "node:timers";

/** What the connector counted. */
export interface ConnectorCounts {
  answered: number;
  unanswered: number;
  refused: number;
}

const REQUEST = new TextEncoder().encode("GET / HTTP/1.1\r\nHost: svcd\r\n\r\n");

/** One connection: true when it got at least one byte back, false when none. */
async function exchangeOnce(conn: Deno.Conn): Promise<boolean> {
  const buf = new Uint8Array(4096);
  let got = 0;
  try {
    await conn.write(REQUEST);
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) return got > 0;
      got += n;
    }
  } catch (err) {
    // A reset before any byte is no answer; after some bytes the answer was there.
    if (err instanceof Deno.errors.ConnectionReset || err instanceof Deno.errors.BrokenPipe) {
      return got > 0;
    }
    throw err;
  } finally {
    conn.close();
  }
}

async function lane(path: string, counts: ConnectorCounts, done: () => boolean): Promise<void> {
  while (!done()) {
    let conn: Deno.Conn;
    try {
      conn = await Deno.connect({ transport: "unix", path });
    } catch (err) {
      if (err instanceof Deno.errors.NotFound || err instanceof Deno.errors.ConnectionRefused) {
        counts.refused++;
        // A refused connect fails without waiting for I/O: give the event loop a turn (stdin).
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      // Made in the kernel, then reset before Deno handed it over: no answer either.
      if (err instanceof Deno.errors.ConnectionReset) {
        counts.unanswered++;
        continue;
      }
      throw err;
    }
    if (await exchangeOnce(conn)) counts.answered++;
    else counts.unanswered++;
  }
}

if (import.meta.main) {
  const [path, lanes = "4"] = Deno.args;
  const counts: ConnectorCounts = { answered: 0, unanswered: 0, refused: 0 };
  let stdinClosed = false;
  const stdinDone = (async () => {
    for await (const _ of Deno.stdin.readable) { /* only its end matters */ }
    stdinClosed = true;
  })();
  await Promise.all([
    stdinDone,
    ...Array.from({ length: Number(lanes) }, () => lane(path, counts, () => stdinClosed)),
  ]);
  console.log(JSON.stringify(counts));
}
