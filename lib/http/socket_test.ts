import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { openUnixListener } from "./socket.ts";

Deno.test("a socket whose folder is missing is named with what to do, not as 'errno 2'", async () => {
  const dir = moduleTempDir("svcd-sock-");
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
