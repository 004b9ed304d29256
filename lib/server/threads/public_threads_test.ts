import assert from "node:assert/strict";
import { moduleTempDir } from "../../../tests/support/temp_dir.ts";
import { PublicThreads, PublicThreadsError } from "./public_threads.ts";
import type { PublicThreadSetup } from "./protocol.ts";
import type { ThreadHooks } from "./thread_group.ts";

const STAND_IN = new URL("../../../tests/support/stand_in_public_thread.ts", import.meta.url);

function setup(mode: string): Omit<PublicThreadSetup, "shared" | "revocationMemory"> {
  return {
    socket: `${moduleTempDir("svcd-public-")}/public.sock`,
    queueDepth: 1,
    maxBodyBytes: 1,
    workers: 1,
    token: {
      modulePath: "/nonexistent.so",
      tokenLabel: "t",
      maxSessions: 1,
      inlineSignLimitUs: 0,
      copyLock: new SharedArrayBuffer(4),
    },
    caCertificates: "/nonexistent.pem",
    revocationDb: "/nonexistent",
    revocationMaxEntries: 1,
    ocspLabel: mode,
    validitySeconds: 60,
    nice: 0,
  };
}

function hooks(): ThreadHooks & { failures: Error[]; failed: Promise<void> } {
  const failures: Error[] = [];
  let told!: () => void;
  const failed = new Promise<void>((resolve) => (told = resolve));
  return {
    failures,
    failed,
    log: () => {},
    onListenerEvent: () => {},
    onTokenDead: () => {},
    onFailure: (err) => {
      failures.push(err);
      told();
    },
  };
}

Deno.test("public listener: a start-up failure in the Worker rejects with its message", async () => {
  await assert.rejects(
    PublicThreads.start(setup("fail-start"), 1, hooks(), STAND_IN),
    (e) => e instanceof PublicThreadsError && /public listener: no such key/.test(e.message),
  );
});

Deno.test("public listener: a Worker that dies after start is reported once; close resolves false at once", async () => {
  const h = hooks();
  const pub = await PublicThreads.start(setup("crash-after-start"), 1, h, STAND_IN);
  await h.failed;
  assert.equal(h.failures.length, 1);
  assert.match(h.failures[0].message, /public listener failed: .*boom/);
  // No grace to wait for: the Worker is gone, and the module must be left to the process exit.
  assert.equal(await pub.close(3_600_000), false);
});

Deno.test("public listener: a Worker that never answers close is ended after twice the grace", async () => {
  const pub = await PublicThreads.start(setup("silent-close"), 1, hooks(), STAND_IN);
  assert.equal(await pub.close(1), false);
});

Deno.test("public listener: one socket for every Worker, removed after the last one closed", async () => {
  const s = setup("serve");
  const pub = await PublicThreads.start(s, 3, hooks(), STAND_IN);
  assert.ok(Deno.lstatSync(s.socket).isSocket);
  assert.equal(await pub.close(1000), true);
  assert.throws(() => Deno.lstatSync(s.socket), Deno.errors.NotFound);
});

Deno.test("public listener: one Worker of several failing to start stops the others and removes the socket", async () => {
  const s = setup("fail-slot-1");
  await assert.rejects(
    PublicThreads.start(s, 3, hooks(), STAND_IN),
    (e) => e instanceof PublicThreadsError && /no such key/.test(e.message),
  );
  assert.throws(() => Deno.lstatSync(s.socket), Deno.errors.NotFound);
});

Deno.test("public listener: a path that cannot be bound fails before any Worker starts", async () => {
  const s = setup("serve");
  Deno.writeTextFileSync(s.socket, "not a socket");
  await assert.rejects(
    PublicThreads.start(s, 2, hooks(), STAND_IN),
    (e) => e instanceof PublicThreadsError && e.message.includes(s.socket),
  );
  assert.equal(Deno.readTextFileSync(s.socket), "not a socket");
});
