/**
 * The client module under load and under faults, driven by pkcs11-module/build/p11drive (a C
 * program of 16 threads, each with its own session; every signature checked by libcrypto with
 * the key's public key from /token). Faults: a daemon that never answers (its request arrived, the
 * call ends at the module's timeout), a stopped daemon, a stopped proxy — each a documented CK_RV
 * (pkcs11-module/README.md), met by a fresh process (the CK_RV of its C_OpenSession's GET /token)
 * and by a process that signed before the fault (the CK_RV of C_Sign). How long each call took is
 * printed, not asserted: the CK_RV tells a timeout (CKR_FUNCTION_CANCELED) from a fault met at once.
 */
import assert from "node:assert/strict";
import {
  bedPublicPem,
  CLIENT_DRIVER,
  CLIENT_MODULE,
  type ClientBed,
  clientBedTest,
  runOk,
} from "./support/p11client.ts";
import { until } from "./support/raw_http.ts";

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

/**
 * A daemon that accepts on the bed's socket, reads each request's head and never answers, in place
 * of the stopped one; `requests` are the request lines it read.
 */
function silentDaemon(bed: ClientBed): { requests: string[]; close(): Promise<void> } {
  const silent = Deno.listen({ transport: "unix", path: bed.daemon.socket });
  Deno.chmodSync(bed.daemon.socket, 0o666);
  const held: Deno.Conn[] = [];
  const requests: string[] = [];
  const accepting = (async () => {
    for await (const conn of silent) {
      held.push(conn);
      void readHead(conn).then((head) => head && requests.push(head.split("\r\n")[0]));
    }
  })();
  return {
    requests,
    close: async () => {
      silent.close();
      for (const c of held) c.close();
      await accepting.catch(() => {});
      await Deno.remove(bed.daemon.socket).catch(() => {});
    },
  };
}

/** Reads a request's head (up to its blank line); undefined if the connection ends first. */
async function readHead(conn: Deno.Conn): Promise<string | undefined> {
  const buf = new Uint8Array(16 * 1024);
  let text = "";
  while (!text.includes("\r\n\r\n")) {
    const n = await conn.read(buf).catch(() => null);
    if (n === null) return undefined;
    text += new TextDecoder().decode(buf.subarray(0, n));
  }
  return text;
}

/**
 * With a daemon that never answers in place of the bed's (stopped) one, `sign` sends `request`,
 * which reaches the daemon, and ends with the timeout's CKR_FUNCTION_CANCELED.
 */
async function assertCanceledBySilentDaemon(
  bed: ClientBed,
  request: string,
  sign: () => Promise<{ rv: number; ms: number }>,
): Promise<void> {
  await bed.daemon.stop();
  await Deno.remove(bed.daemon.socket).catch(() => {});
  const silent = silentDaemon(bed);
  try {
    const { rv, ms } = await sign();
    console.log(
      `  silent daemon: CK_RV 0x${rv.toString(16)} after ${ms} ms (timeout ${TIMEOUT_S} s)`,
    );
    assert.equal(rv, 0x50, `CKR_FUNCTION_CANCELED, got 0x${rv.toString(16)}`);
    await until(() => silent.requests.length > 0, 30_000, "the request at the silent daemon");
    assert.deepEqual(silent.requests.map((r) => r.split(" ").slice(0, 2).join(" ")), [request]);
  } finally {
    await silent.close();
  }
}

/**
 * A fault met at once: the CK_RV `expected` (called `name`). A call that waited for its timeout
 * would end CKR_FUNCTION_CANCELED instead.
 */
function assertFault(got: { rv: number; ms: number }, expected: number, name: string): void {
  console.log(`  ${name} after ${got.ms} ms`);
  assert.equal(got.rv, expected, `${name}, got 0x${got.rv.toString(16)}`);
}

clientBedTest(
  "client module: 16 threads × 500 signatures, then faults each a documented CK_RV",
  { "k-ec": "ec-p256" },
  async (bed, t) => {
    const pem = await bedPublicPem(bed, "k-ec");

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
        await assertCanceledBySilentDaemon(bed, "GET /token", () => signOnce(bed));
      },
    );

    await t.step("svcd stopped (nginx answers 502): CKR_DEVICE_ERROR, not a timeout", async () => {
      assertFault(await signOnce(bed), 0x30, "CKR_DEVICE_ERROR");
    });

    await t.step("nginx stopped: CKR_DEVICE_REMOVED, not a timeout", async () => {
      await bed.nginx.stop();
      assertFault(await signOnce(bed), 0x32, "CKR_DEVICE_REMOVED");
    });
  },
  // The daemon caps one identity at --workers minus one concurrent requests: 16 threads of one
  // client certificate need 17 workers, else some get 429 (retried, then CKR_FUNCTION_FAILED).
  { daemonArgs: ["--workers", "17"] },
);

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

/** A signature that came back: CK_RV 0, and libcrypto verified it. */
function assertSigned(r: Signed, what: string): void {
  assert.equal(r.rv, 0, `${what}: rv 0x${r.rv.toString(16)}`);
  assert.ok(r.verified, what);
}

clientBedTest(
  "client module: C_Sign in a session that signed before each fault: its documented CK_RV",
  { "k-ec": "ec-p256" },
  async (bed, t) => {
    const signer = new LongLivedSigner(bed, await bedPublicPem(bed, "k-ec"));
    try {
      const daemonBack = async () => {
        await bed.restartDaemon();
        assertSigned(await signer.sign(), "the daemon back");
      };
      assertSigned(await signer.next(), "the first signature");

      await t.step(
        "a daemon that never answers: CKR_FUNCTION_CANCELED at the timeout",
        async () => {
          await assertCanceledBySilentDaemon(bed, "POST /sign", () => signer.sign());
          await daemonBack();
        },
      );

      await t.step(
        "svcd stopped (nginx answers 502): CKR_DEVICE_ERROR, not a timeout",
        async () => {
          await bed.daemon.stop();
          assertFault(await signer.sign(), 0x30, "CKR_DEVICE_ERROR");
          await daemonBack();
        },
      );

      await t.step("nginx stopped: CKR_DEVICE_REMOVED, not a timeout", async () => {
        await bed.nginx.stop();
        assertFault(await signer.sign(), 0x32, "CKR_DEVICE_REMOVED");
      });
      assert.equal(await signer.close(), 0, "p11drive wait exit code");
    } finally {
      await signer.close();
    }
  },
);

clientBedTest(
  "client module: a server certificate the CA did not issue is CKR_GENERAL_ERROR",
  { "k-ec": "ec-p256" },
  async (bed) => {
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
  },
);
