// Several listeners on one socket: every connection answered by one of them, the queue depth
// bounding their sum, and the socket left to its opener.
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { type Handler, Listener } from "./mod.ts";
import {
  closeUnixListener,
  LISTEN_BACKLOG,
  openUnixListener,
  publishHeld,
  shareSocket,
} from "./socket.ts";
import { exchange, parseRawResponse, readToEnd, until } from "../../tests/support/raw_http.ts";

const GET = "GET / HTTP/1.1\r\nHost: svcd\r\n\r\n";

function sharedListeners(count: number, queueDepth: number, handler: Handler) {
  const dir = moduleTempDir("svcd-shared-");
  const path = `${dir}/s.sock`;
  const socket = openUnixListener(path, LISTEN_BACKLOG);
  const shares = shareSocket(socket, count);
  const listeners = shares.map((shared) =>
    Listener.open({ path: "unused", shared, proxyUid: Deno.uid(), workers: 2, queueDepth, handler })
  );
  return { dir, path, socket, shares, listeners };
}

Deno.test("shared socket: two listeners answer every connection; closing them leaves the socket to its opener", async () => {
  const served = [0, 0];
  const s = sharedListeners(2, 256, () => Promise.resolve({ status: 200, body: "ok" }));
  const loops = s.listeners.map((l) => l.serve());
  try {
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => exchange(s.path, GET)),
    );
    for (const a of answers) assert.equal(parseRawResponse(a).status, 200);
    s.listeners.forEach((l, i) => (served[i] = l.stats().served));
    assert.equal(served[0] + served[1], 40);
  } finally {
    await Promise.all(s.listeners.map((l) => l.close(1000)));
    await Promise.all(loops);
  }
  assert.ok(Deno.lstatSync(s.path).isSocket, "a listener of a shared socket does not remove it");
  closeUnixListener(s.socket);
  assert.throws(() => Deno.lstatSync(s.path), Deno.errors.NotFound);
  Deno.removeSync(s.dir, { recursive: true });
});

Deno.test("shared socket: the queue depth counts what the other listeners hold", async () => {
  const s = sharedListeners(2, 4, () => Promise.resolve({ status: 200 }));
  const [mine] = s.listeners;
  // The other listener (slot 1, not serving here) says it holds 3 silent connections.
  publishHeld(s.shares[1], 3);
  const loop = mine.serve();
  try {
    const first = await Deno.connect({ transport: "unix", path: s.path });
    await until(() => mine.stats().waiting === 1, 10_000, "the first one held");
    const second = await Deno.connect({ transport: "unix", path: s.path });
    const refused = parseRawResponse(await readToEnd(second));
    second.close();
    assert.equal(refused.status, 503, "3 held elsewhere + 1 here = the depth of 4");
    assert.equal(mine.stats().queueFull, 1);
    assert.equal(s.shares[0].held[0], 1, "this listener published what it holds");
    first.close();
  } finally {
    await mine.close(1000);
    await loop;
    await s.listeners[1].close(0);
    closeUnixListener(s.socket);
    Deno.removeSync(s.dir, { recursive: true });
  }
});
