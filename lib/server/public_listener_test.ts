import assert from "node:assert/strict";
import {
  PublicListener,
  PublicListenerError,
  type PublicListenerHooks,
  type PublicWorkerSetup,
} from "./public_listener.ts";

const STAND_IN = new URL("./testing_public_worker.ts", import.meta.url);

function setup(socket: string): PublicWorkerSetup {
  return {
    socket,
    queueDepth: 1,
    maxBodyBytes: 1,
    workers: 1,
    token: { modulePath: "/nonexistent.so", tokenLabel: "t", maxSessions: 1 },
    caCertificates: "/nonexistent.pem",
    revocationDb: "/nonexistent",
    ocspLabel: "o",
    validitySeconds: 60,
  };
}

function hooks(): PublicListenerHooks & { failures: Error[]; failed: Promise<void> } {
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
    PublicListener.start(setup("fail-start"), hooks(), STAND_IN),
    (e) => e instanceof PublicListenerError && /public listener: no such key/.test(e.message),
  );
});

Deno.test("public listener: a Worker that dies after start is reported once; close resolves false at once", async () => {
  const h = hooks();
  const pub = await PublicListener.start(setup("crash-after-start"), h, STAND_IN);
  await h.failed;
  assert.equal(h.failures.length, 1);
  assert.match(h.failures[0].message, /public listener failed: .*boom/);
  // No grace to wait for: the Worker is gone, and the module must be left to the process exit.
  assert.equal(await pub.close(3_600_000), false);
});

Deno.test("public listener: a Worker that never answers close is ended after twice the grace", async () => {
  const pub = await PublicListener.start(setup("silent-close"), hooks(), STAND_IN);
  assert.equal(await pub.close(1), false);
});
