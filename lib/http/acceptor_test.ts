import assert from "node:assert/strict";
import { acceptVerdict, QUEUE_FULL_BYTES } from "./_acceptor.ts";

const proxy = { pid: 10, uid: 33, gid: 33 };

Deno.test("acceptor: unknown peer, other uid, full queue, admitted — in that order", () => {
  assert.equal(acceptVerdict(null, 33, 0, 1).kind, "no_peer");
  assert.deepEqual(acceptVerdict({ ...proxy, uid: 0 }, 33, 5, 1), {
    kind: "refused_uid",
    peer: { ...proxy, uid: 0 },
  });
  assert.equal(acceptVerdict(proxy, 33, 1, 1).kind, "queue_full");
  assert.deepEqual(acceptVerdict(proxy, 33, 0, 1), { kind: "accept", peer: proxy });
  assert.equal(acceptVerdict({ ...proxy, uid: 0 }, null, 0, 1).kind, "accept", "public socket");
  assert.match(
    new TextDecoder().decode(QUEUE_FULL_BYTES),
    /^HTTP\/1\.1 503 .*\r\nRetry-After: 1\r\n/s,
  );
});
