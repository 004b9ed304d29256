import assert from "node:assert/strict";
import { openUnixListener } from "./socket.ts";

Deno.test("a socket whose folder is missing is named with what to do, not as 'errno 2'", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svcd-sock-" });
  try {
    assert.throws(
      () => openUnixListener(`${dir}/missing/auth.sock`, 16),
      (e: Error) =>
        /its folder .*missing does not exist; create it/.test(e.message) &&
        !/errno/.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
