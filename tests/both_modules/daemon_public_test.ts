/**
 * The public listener end to end (no authentication, its own workers, no audit line per request):
 * `svcd serve
 * --public-socket` in its own Worker, a CA made by `svcd ca init` over a token key, GET
 * /certificates and POST /ocsp over the real socket, answers read by lib/ocsp and verified by an
 * independent oracle (Web Crypto / @noble), by `openssl ocsp` where openssl knows the algorithm, a
 * revocation by `svcd ca revoke` seen on the next query, a corrupt database → tryLater. Against
 * SoftHSM2 (EC CA) and the PKCS#11 v3.2 test module (ML-DSA-65 CA).
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../support/temp_dir.ts";
import { makeTestToken } from "../support/token.ts";
import { startDaemon, type TestDaemon } from "../support/daemon.ts";
import {
  makeTestCa,
  openssl,
  opensslRequest,
  publicListenerArgs,
  type TestCa,
} from "../support/ca.ts";
import { type ClientResponse, rawExchange, request } from "../support/http_client.ts";
import { verifyIndependently } from "../support/oracle.ts";
import { curlAsNobody } from "../support/raw_http.ts";
import { latin1 } from "../../lib/bytes/mod.ts";
import { readAuditLines } from "../support/audit.ts";
import {
  certIdFor,
  encodeOcspRequest,
  parseOcspResponse,
  readCertificates,
  SIGNATURE_ALGORITHMS,
  TRY_LATER,
} from "../../lib/ocsp/mod.ts";

const ALICE = "CN=alice,O=Example,C=DE";
/** The CA key type per module: what each one offers (SoftHSM 2.6.1 has no ML-DSA). */
const CA_KEY_TYPE = { softhsm: "ec-p256", svcmod: "ml-dsa-65" } as const;
const MALFORMED = Uint8Array.of(0x30, 0x03, 0x0a, 0x01, 0x01);

interface Setup {
  daemon: TestDaemon;
  ca: TestCa;
  publicSocket: string;
  clientCert: string;
  clientSerial: string;
  caKeyType: string;
}

function ocspRequestFor(caPem: string, certPem: string, nonce?: Uint8Array): Uint8Array {
  const issuer = readCertificates(Deno.readFileSync(caPem))[0];
  const cert = readCertificates(Deno.readFileSync(certPem))[0];
  return encodeOcspRequest({ certIds: [certIdFor(issuer, cert.serial)], nonce });
}

function postOcsp(socket: string, body: Uint8Array): Promise<ClientResponse> {
  return request(socket, {
    method: "POST",
    path: "/ocsp",
    headers: [["Content-Type", "application/ocsp-request"]],
    body,
  });
}

const QUEUE_DEPTH = 8;

/**
 * Holds QUEUE_DEPTH silent connections on `socket` and returns them once one more was answered
 * 503 (queue full). Held connections are released at the 1 s first-byte deadline, so a loaded
 * machine may see the extra one dropped silently instead: then it starts again, until a bound
 * far past any machine's speed.
 */
async function fillQueue(socket: string): Promise<Deno.UnixConn[]> {
  const giveUpAt = performance.now() + 60_000;
  while (performance.now() < giveUpAt) {
    const held = await Promise.all(
      Array.from({ length: QUEUE_DEPTH }, () => Deno.connect({ transport: "unix", path: socket })),
    );
    const answer = await rawExchange(socket, new Uint8Array()).catch(() => new Uint8Array());
    if (latin1(answer).startsWith("HTTP/1.1 503")) return held;
    for (const c of held) c.close();
  }
  throw new Error(`the queue of ${socket} never reported full`);
}

/** The response read strictly, its signature checked by the oracle against the CA's key. */
async function readSigned(s: Setup, res: ClientResponse) {
  assert.equal(res.status, 200);
  assert.equal(res.header("content-type"), "application/ocsp-response");
  assert.equal(
    res.header("cache-control"),
    undefined,
    "no Cache-Control (freshness is the response's nextUpdate)",
  );
  const parsed = parseOcspResponse(res.body);
  assert.equal(parsed.status, "successful");
  const basic = parsed.basic!;
  const issuer = readCertificates(Deno.readFileSync(s.ca.caPem))[0];
  const alg = SIGNATURE_ALGORITHMS[s.caKeyType as keyof typeof SIGNATURE_ALGORITHMS];
  assert.deepEqual(basic.signatureAlgorithm, alg.algorithmIdentifier);
  const ok = await verifyIndependently(
    s.caKeyType,
    { raw: issuer.publicKey, spki: issuer.spki },
    basic.tbs,
    alg.decodeSignature(basic.signature),
  );
  assert.ok(ok, "the OCSP response's signature verifies with the CA key");
  return basic;
}

Deno.test({
  name:
    "public listener: certificates and OCSP in its own Worker, no identity, no audit per request",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    const caKeyType = CA_KEY_TYPE[token.module.name];
    const ca = await makeTestCa(token, {
      keyLabel: "ca",
      keyType: caKeyType,
      subject: "CN=Test CA,O=Example,C=DE",
    });
    const client = await opensslRequest(ca.dir, "alice", "/C=DE/O=Example/CN=alice");
    const issued = await ca.issue(["--csr", client.request, "--grant", "k-ec"]);
    const workDir = moduleTempDir("svcd-public-");
    const publicSocket = `${workDir}/public.sock`;
    const daemon = await startDaemon({
      token,
      workDir,
      policy: `${ALICE}\tk-ec\n`,
      args: [...publicListenerArgs(ca, publicSocket), "--queue-depth", String(QUEUE_DEPTH)],
    });
    const s: Setup = {
      daemon,
      ca,
      publicSocket,
      clientCert: issued.path,
      clientSerial: issued.serial,
      caKeyType,
    };
    try {
      await t.step("GET /certificates: the CA chain as PEM; HEAD without a body", async () => {
        const res = await request(publicSocket, { path: "/certificates" });
        assert.equal(res.status, 200);
        assert.equal(res.header("content-type"), "application/pem-certificate-chain");
        assert.equal(res.header("connection"), "close");
        assert.deepEqual(res.body, Deno.readFileSync(ca.caPem));
        const head = await request(publicSocket, { method: "HEAD", path: "/certificates" });
        assert.equal(head.status, 200);
        assert.equal(head.body.length, 0);
      });

      await t.step("POST /ocsp: good, signed by the CA key, nonce echoed", async () => {
        const nonce = crypto.getRandomValues(new Uint8Array(16));
        const res = await postOcsp(publicSocket, ocspRequestFor(ca.caPem, s.clientCert, nonce));
        const basic = await readSigned(s, res);
        assert.equal(basic.singles.length, 1);
        assert.equal(basic.singles[0].certStatus.status, "good");
        assert.ok(basic.singles[0].nextUpdate !== null);
        assert.deepEqual(basic.nonce, nonce);
      });

      if (caKeyType === "ec-p256") {
        await t.step("openssl ocsp accepts the daemon's answer (no WARNING)", async () => {
          const req = ocspRequestFor(ca.caPem, s.clientCert);
          const res = await postOcsp(publicSocket, req);
          const respFile = `${workDir}/resp.der`;
          await Deno.writeFile(respFile, res.body);
          const out = await openssl([
            "ocsp",
            "-respin",
            respFile,
            "-CAfile",
            ca.caPem,
            "-issuer",
            ca.caPem,
            "-cert",
            s.clientCert,
            "-no_nonce",
          ]);
          assert.match(out, /: good/);
          assert.doesNotMatch(out, /WARNING|Status times invalid/);
        });
      }

      await t.step("a revocation by `svcd ca revoke` is seen on the next query", async () => {
        const revoked = await ca.run("revoke", [s.clientSerial, "--reason", "keyCompromise"]);
        assert.equal(revoked.code, 0, revoked.text);
        const res = await postOcsp(publicSocket, ocspRequestFor(ca.caPem, s.clientCert));
        const status = (await readSigned(s, res)).singles[0].certStatus;
        assert.equal(status.status, "revoked");
      });

      await t.step("a corrupt database → unsigned tryLater; restored → answers", async () => {
        const index = `${ca.dir}/index.txt`;
        const good = await Deno.readFile(index);
        await Deno.writeTextFile(index, "this is not an index\n");
        const res = await postOcsp(publicSocket, ocspRequestFor(ca.caPem, s.clientCert));
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, TRY_LATER);
        await Deno.writeFile(index, good);
        const back = await postOcsp(publicSocket, ocspRequestFor(ca.caPem, s.clientCert));
        assert.equal((await readSigned(s, back)).singles[0].certStatus.status, "revoked");
      });

      await t.step("garbage → unsigned malformedRequest, 200", async () => {
        const res = await postOcsp(publicSocket, new TextEncoder().encode("not DER"));
        assert.equal(res.status, 200);
        assert.deepEqual(res.body, MALFORMED);
      });

      await t.step(
        "routes: GET /ocsp 405 Allow POST; /sign, /verify 404; no identity",
        async () => {
          const get = await request(publicSocket, { path: "/ocsp?MEIwQDA" });
          assert.equal(get.status, 405);
          assert.equal(get.header("allow"), "POST");
          for (const path of ["/sign", "/verify"]) {
            const res = await request(publicSocket, {
              method: "POST",
              path,
              headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ec"]],
              body: "m",
            });
            assert.equal(res.status, 404, path);
          }
        },
      );

      await t.step("the authenticated socket: /certificates, /ocsp → 404 with a Link", async () => {
        for (const path of ["/certificates", "/ocsp"]) {
          const res = await request(daemon.socket, {
            path,
            headers: [["X-SVC-Client-Subject", ALICE]],
          });
          assert.equal(res.status, 404);
          assert.equal(
            res.header("link"),
            `<http://svcd${path}>; rel="alternate"; title="public listener"`,
          );
        }
      });

      await t.step(
        "audit: one listener_start for the public side, nothing per request",
        async () => {
          const before = await readAuditLines(daemon.auditDir);
          const starts = before.filter((l) => l.event === "listener_start");
          assert.deepEqual(starts.map((l) => l.listener), ["authenticated", "public"]);
          for (let i = 0; i < 5; i++) {
            await postOcsp(publicSocket, ocspRequestFor(ca.caPem, s.clientCert));
          }
          assert.equal((await readAuditLines(daemon.auditDir)).length, before.length);
        },
      );

      await t.step(
        "the public socket serves any uid (no peer check)",
        async () => {
          const out = await curlAsNobody(publicSocket, "http://svcd/certificates");
          assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
          assert.deepEqual(out.stdout, Deno.readFileSync(ca.caPem));
        },
      );

      await t.step("a full public queue (503) leaves the authenticated queue free", async () => {
        // The public listener's own acceptor holds its silent connections: while it answers 503,
        // /sign on the authenticated socket must still be served: the public listener has its own workers.
        const held = await fillQueue(publicSocket);
        try {
          const res = await request(daemon.socket, {
            method: "POST",
            path: "/sign",
            headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ec"]],
            body: "beside a full public queue",
          });
          assert.equal(res.status, 200, res.text());
        } finally {
          for (const c of held) c.close();
        }
      });

      await t.step("the authenticated side signs while the public side serves", async () => {
        const res = await request(daemon.socket, {
          method: "POST",
          path: "/sign",
          headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "k-ec"]],
          body: "still signing",
        });
        assert.equal(res.status, 200);
      });

      // The test module's `removed` hook (SoftHSM has none) answers CKR_DEVICE_REMOVED from then on.
      if (token.module.name === "svcmod") {
        await t.step(
          "a token that dies under an OCSP signature stops the daemon with 75",
          async () => {
            const crashDir = moduleTempDir("svcd-public-dead-");
            const crashDaemon = await startDaemon({
              token,
              workDir: crashDir,
              policy: `${ALICE}\tk-ec\n`,
              args: publicListenerArgs(ca, `${crashDir}/public.sock`),
            });
            const removed = `${token.module.tokenDir}/removed`;
            await Deno.writeTextFile(removed, "");
            try {
              const nonce = Uint8Array.of(1, 2, 3, 4);
              const res = await postOcsp(
                `${crashDir}/public.sock`,
                ocspRequestFor(ca.caPem, s.clientCert, nonce),
              );
              assert.equal(res.status, 200);
              assert.equal(parseOcspResponse(res.body).status, "internalError");
              assert.equal((await crashDaemon.status).code, 75);
              await crashDaemon.waitForLog("token is dead");
            } finally {
              await Deno.remove(removed);
              await crashDaemon.stop();
              await Deno.remove(crashDir, { recursive: true });
            }
          },
        );
      }

      await t.step("SIGTERM: both sockets close, exit 0", async () => {
        assert.equal(await daemon.stop(), 0);
        for (const path of [daemon.socket, publicSocket]) {
          assert.throws(() => Deno.lstatSync(path), Deno.errors.NotFound, path);
        }
        const raw = await rawExchange(publicSocket, new Uint8Array(1)).catch(() => null);
        assert.ok(raw === null || raw.length === 0);
      });
    } finally {
      await daemon.stop();
      await token.cleanup();
      await Deno.remove(workDir, { recursive: true }).catch(() => {});
    }
  },
});
