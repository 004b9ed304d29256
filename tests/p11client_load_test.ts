/**
 * The client module under load and under faults, driven by client/pkcs11/build/p11drive (a C
 * program of 16 threads, each with its own session; every signature checked by libcrypto with
 * the key's public key from /token). Faults: a daemon that never answers, a stopped daemon, a
 * stopped proxy — each a documented CK_RV (client/pkcs11/README.md) within the timeout.
 */
import assert from "node:assert/strict";
import {
  canRunClientBed,
  CLIENT_DRIVER,
  CLIENT_MODULE,
  type ClientBed,
  runOk,
  startClientBed,
  tokenListing,
  writePublicPem,
} from "./support/p11client.ts";

const TIMEOUT_S = 2;

/** One signature by a fresh process: its CK_RV and how long it took. */
async function signOnce(bed: ClientBed): Promise<{ rv: number; ms: number }> {
  const out = await runOk([CLIENT_DRIVER, "once", CLIENT_MODULE, "k-ec"], {
    ...bed.env,
    SVCD_PKCS11_TIMEOUT: String(TIMEOUT_S),
  });
  const m = out.stdout.match(/rv=0x([0-9a-f]+) ms=(\d+)/);
  assert.ok(m, out.stdout);
  return { rv: parseInt(m[1], 16), ms: Number(m[2]) };
}

Deno.test({
  name: "client module: 16 threads × 500 signatures, then faults each a documented CK_RV",
  ignore: !canRunClientBed,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    // The daemon caps one identity at --workers minus one concurrent requests: 16 threads of one
    // client certificate need 17 workers, else some get 429 (retried, then CKR_FUNCTION_FAILED).
    const bed = await startClientBed({ "k-ec": "ec-p256" }, { daemonArgs: ["--workers", "17"] });
    try {
      const key = (await tokenListing(bed)).keys.get("k-ec")!;
      const pem = await writePublicPem(bed.dir, key);

      await t.step(
        "16 threads × 500 signatures, each over its own message, all verified",
        async () => {
          const out = await runOk(
            [CLIENT_DRIVER, "load", CLIENT_MODULE, "k-ec", pem, "16", "500"],
            bed.env,
          );
          assert.match(out.stdout, /signed=8000 verified=8000 /, out.stdout);
          console.log(`p11drive load 16 × 500: ${out.stdout.trim()}`);
        },
      );

      await t.step(
        "a daemon that never answers: CKR_FUNCTION_CANCELED at the timeout",
        async () => {
          await bed.daemon.stop();
          await Deno.remove(bed.daemon.socket).catch(() => {});
          const silent = Deno.listen({ transport: "unix", path: bed.daemon.socket });
          await Deno.chmod(bed.daemon.socket, 0o666);
          const held: Deno.Conn[] = [];
          const accepting = (async () => {
            for await (const conn of silent) held.push(conn); // read nothing, answer nothing
          })();
          try {
            const { rv, ms } = await signOnce(bed);
            assert.equal(rv, 0x50, `CKR_FUNCTION_CANCELED, got 0x${rv.toString(16)}`);
            assert.ok(ms >= TIMEOUT_S * 1000 - 50 && ms < TIMEOUT_S * 1000 + 1500, `${ms} ms`);
          } finally {
            silent.close();
            for (const c of held) c.close();
            await accepting.catch(() => {});
            await Deno.remove(bed.daemon.socket).catch(() => {});
          }
        },
      );

      await t.step("svcd stopped (nginx answers 502): CKR_DEVICE_ERROR at once", async () => {
        const { rv, ms } = await signOnce(bed);
        assert.equal(rv, 0x30, `CKR_DEVICE_ERROR, got 0x${rv.toString(16)}`);
        assert.ok(ms < TIMEOUT_S * 1000, `${ms} ms`);
      });

      await t.step("nginx stopped: CKR_DEVICE_REMOVED at once", async () => {
        await bed.nginx.stop();
        const { rv, ms } = await signOnce(bed);
        assert.equal(rv, 0x32, `CKR_DEVICE_REMOVED, got 0x${rv.toString(16)}`);
        assert.ok(ms < TIMEOUT_S * 1000, `${ms} ms`);
      });
    } finally {
      await bed.stop();
    }
  },
});

Deno.test({
  name: "client module: a server certificate the CA did not issue is CKR_GENERAL_ERROR",
  ignore: !canRunClientBed,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const bed = await startClientBed({ "k-ec": "ec-p256" });
    try {
      const out = await runOk([CLIENT_DRIVER, "once", CLIENT_MODULE, "k-ec"], {
        ...bed.env,
        SVCD_CACERT: bed.pki.clients[0].cert, // not the server's issuer
      });
      assert.match(out.stdout, /rv=0x5 /, out.stdout);
      const refused = await runOk([CLIENT_DRIVER, "once", CLIENT_MODULE, "k-ec"], {
        ...bed.env,
        SVCD_CLIENT_CERT: bed.pki.rogue.cert, // a client certificate nginx does not trust: 403
        SVCD_CLIENT_KEY: bed.pki.rogue.key,
      });
      assert.match(refused.stdout, /rv=0xe1 /, refused.stdout);
    } finally {
      await bed.stop();
    }
  },
});
