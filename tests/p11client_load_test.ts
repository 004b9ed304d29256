/**
 * The client module under load and under faults, driven by client/pkcs11/build/p11drive (a C
 * program of 16 threads, each with its own session; every signature checked by libcrypto with
 * the key's public key from /token). Faults: a daemon that never answers, a stopped daemon, a
 * stopped proxy — each a documented CK_RV (client/pkcs11/README.md) within the timeout, met by a
 * fresh process (the CK_RV of its C_OpenSession's GET /token) and by a process that signed before
 * the fault (the CK_RV of C_Sign).
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

/** A daemon that accepts on the bed's socket and never answers, in place of the stopped one. */
function silentDaemon(bed: ClientBed): { close(): Promise<void> } {
  const silent = Deno.listen({ transport: "unix", path: bed.daemon.socket });
  Deno.chmodSync(bed.daemon.socket, 0o666);
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of silent) held.push(conn); // read nothing, answer nothing
  })();
  return {
    close: async () => {
      silent.close();
      for (const c of held) c.close();
      await accepting.catch(() => {});
      await Deno.remove(bed.daemon.socket).catch(() => {});
    },
  };
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
          const silent = silentDaemon(bed);
          try {
            const { rv, ms } = await signOnce(bed);
            assert.equal(rv, 0x50, `CKR_FUNCTION_CANCELED, got 0x${rv.toString(16)}`);
            assert.ok(ms >= TIMEOUT_S * 1000 - 50 && ms < TIMEOUT_S * 1000 + 1500, `${ms} ms`);
          } finally {
            await silent.close();
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

/** One signature of `p11drive wait`, as it printed it. */
interface Signed {
  rv: number;
  ms: number;
  verified: boolean;
}

async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  let pending = "";
  for await (const text of stream.pipeThrough(new TextDecoderStream())) {
    pending += text;
    for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
      yield pending.slice(0, nl);
      pending = pending.slice(nl + 1);
    }
  }
}

/**
 * `p11drive wait`: one process and one session for its whole life; it signs once at start and
 * once more for each line it reads, and prints each signature's CK_RV.
 */
class LongLivedSigner {
  readonly #child: Deno.ChildProcess;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #lines: AsyncGenerator<string>;

  constructor(bed: ClientBed, pem: string) {
    this.#child = new Deno.Command(CLIENT_DRIVER, {
      args: ["wait", CLIENT_MODULE, "k-ec", pem],
      env: { ...bed.env, SVCD_PKCS11_TIMEOUT: String(TIMEOUT_S) },
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#stdin = this.#child.stdin.getWriter();
    this.#lines = lines(this.#child.stdout);
  }

  /** The next signature: waits until p11drive has printed it. */
  async next(): Promise<Signed> {
    const { value, done } = await this.#lines.next();
    assert.ok(!done, "p11drive wait ended before it printed a signature");
    const m = value.match(/^rv=0x([0-9a-f]+) ms=(\d+) verified=([01])$/);
    assert.ok(m, value);
    return { rv: parseInt(m[1], 16), ms: Number(m[2]), verified: m[3] === "1" };
  }

  /** Asks for one more signature in the same session. */
  async sign(): Promise<Signed> {
    await this.#stdin.write(new TextEncoder().encode("sign\n"));
    return await this.next();
  }

  /** Ends its input; resolves to its exit code. */
  async close(): Promise<number> {
    await this.#stdin.close().catch(() => {}); // closed already by an earlier close()
    return (await this.#child.status).code;
  }
}

Deno.test({
  name: "client module: C_Sign in a session that signed before each fault: its documented CK_RV",
  ignore: !canRunClientBed,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const bed = await startClientBed({ "k-ec": "ec-p256" });
    let signer: LongLivedSigner | undefined;
    try {
      const pem = await writePublicPem(bed.dir, (await tokenListing(bed)).keys.get("k-ec")!);
      signer = new LongLivedSigner(bed, pem);
      const s = signer;
      const signsAgain = async (what: string) => {
        const r = await s.sign();
        assert.equal(r.rv, 0, `${what}: rv 0x${r.rv.toString(16)}`);
        assert.ok(r.verified, what);
      };
      const first = await s.next();
      assert.equal(first.rv, 0, `the first signature: rv 0x${first.rv.toString(16)}`);
      assert.ok(first.verified);

      await t.step(
        "a daemon that never answers: CKR_FUNCTION_CANCELED at the timeout",
        async () => {
          await bed.daemon.stop();
          await Deno.remove(bed.daemon.socket).catch(() => {});
          const silent = silentDaemon(bed);
          try {
            const { rv, ms } = await s.sign();
            assert.equal(rv, 0x50, `CKR_FUNCTION_CANCELED, got 0x${rv.toString(16)}`);
            assert.ok(ms >= TIMEOUT_S * 1000 - 50 && ms < TIMEOUT_S * 1000 + 1500, `${ms} ms`);
          } finally {
            await silent.close();
          }
          await bed.restartDaemon();
          await signsAgain("the daemon back");
        },
      );

      await t.step("svcd stopped (nginx answers 502): CKR_DEVICE_ERROR at once", async () => {
        await bed.daemon.stop();
        const { rv, ms } = await s.sign();
        assert.equal(rv, 0x30, `CKR_DEVICE_ERROR, got 0x${rv.toString(16)}`);
        assert.ok(ms < TIMEOUT_S * 1000, `${ms} ms`);
        await bed.restartDaemon();
        await signsAgain("the daemon back");
      });

      await t.step("nginx stopped: CKR_DEVICE_REMOVED at once", async () => {
        await bed.nginx.stop();
        const { rv, ms } = await s.sign();
        assert.equal(rv, 0x32, `CKR_DEVICE_REMOVED, got 0x${rv.toString(16)}`);
        assert.ok(ms < TIMEOUT_S * 1000, `${ms} ms`);
      });
      assert.equal(await s.close(), 0, "p11drive wait exit code");
    } finally {
      await signer?.close();
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
