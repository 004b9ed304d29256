/**
 * The proxy path for real: Debian's nginx with the packaged example configuration
 * (packaging/nginx-svcd.conf), real client certificates, workers running as www-data (uid 33) and
 * the daemon started with --proxy-uid 33. Spec §5 operational checks 1–5.
 */
import assert from "node:assert/strict";
import { makePki, type Pki } from "./support/pki.ts";
import { makeTestToken } from "./support/token.ts";
import { startDaemon, type TestDaemon } from "./support/daemon.ts";
import { request } from "./support/http_client.ts";
import { readAuditLines } from "./support/audit.ts";
import { makeTestCa, opensslRequest } from "./support/ca.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const BOB = "CN=bob,O=Example,C=DE";
/** A subject with every kind of character nginx escapes, as openssl -subj takes it. */
const DAVE_SLASH = '/C=DE/O=R&D, "Ops"/OU=Zoë <x>;y/CN=#dave ';
const WWW_DATA = 33;

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx");

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The packaged example with only paths and the port changed, inside a minimal nginx.conf. */
async function nginxConfig(dir: string, pki: Pki, socket: string, port: number): Promise<string> {
  const example = await Deno.readTextFile(
    new URL("../packaging/nginx-svcd.conf", import.meta.url),
  );
  const site = example
    .replaceAll("/run/svcd/auth.sock", socket)
    .replaceAll("/etc/svcd/tls/server.pem", pki.serverCert)
    .replaceAll("/etc/svcd/tls/server.key", pki.serverKey)
    .replaceAll("/etc/svcd/tls/client-ca.pem", pki.caCert)
    .replace("listen 443 ssl;", `listen 127.0.0.1:${port} ssl;`);
  assert.notEqual(site, example, "the example's paths were not found");
  return `user www-data;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  ${site}
}
`;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

interface CurlResult {
  status: number;
  body: Uint8Array;
}

async function curl(
  port: number,
  pki: Pki,
  client: { cert: string; key: string } | undefined,
  path: string,
  headers: Array<[string, string]>,
  body?: Uint8Array,
): Promise<CurlResult> {
  const dir = await Deno.makeTempDir();
  const args = [
    "-sS",
    "--cacert",
    pki.caCert,
    "-o",
    `${dir}/body`,
    "-w",
    "%{http_code}",
    ...(client ? ["--cert", client.cert, "--key", client.key] : []),
    ...headers.flatMap(([n, v]) => ["-H", `${n}: ${v}`]),
    ...(body ? ["--data-binary", `@${dir}/in`] : []),
    `https://localhost:${port}${path}`,
  ];
  if (body) await Deno.writeFile(`${dir}/in`, body);
  const out = await new Deno.Command("curl", { args, stdout: "piped", stderr: "piped" }).output();
  const status = Number(new TextDecoder().decode(out.stdout));
  const respBody = await Deno.readFile(`${dir}/body`).catch(() => new Uint8Array());
  await Deno.remove(dir, { recursive: true });
  return { status, body: respBody };
}

Deno.test({
  name: "proxy: real nginx with client certificates (spec §5 operational checks)",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({
      keys: {
        "alice-ec": "ec-p256",
        "bob-ec": "ec-p256",
        "ca-ec": "ec-p256",
        "dave-ed": "ed25519",
      },
    });
    const dir = await Deno.makeTempDir({ prefix: "svcd-nginx-" });
    await Deno.chmod(dir, 0o711);
    let daemon: TestDaemon | undefined;
    let nginx: Deno.ChildProcess | undefined;
    try {
      const pki = await makePki(dir, [ALICE, BOB]);
      // dave's certificate comes from `svcd ca issue`; nginx trusts that CA beside the openssl one,
      // and the policy holds the line the tool printed — plus the slash form, granting bob's key.
      const ca = await makeTestCa(token, { keyLabel: "ca-ec", dir: `${dir}/ca` });
      const daveRequest = await opensslRequest(ca.dir, "dave", DAVE_SLASH);
      const dave = await ca.issue(["--csr", daveRequest.request, "--grant", "dave-ed"]);
      await Deno.writeTextFile(pki.caCert, await Deno.readTextFile(ca.caPem), { append: true });
      const workDir = `${dir}/daemon`;
      await Deno.mkdir(workDir, { mode: 0o711 });
      daemon = await startDaemon({
        token,
        workDir,
        proxyUid: WWW_DATA,
        policy: `${ALICE}\talice-ec\n${BOB}\tbob-ec\n${
          dave.policyLines[0]
        }\n${DAVE_SLASH}\tbob-ec\n`,
      });
      // The package's svcd-proxy group plays this part in production.
      await Deno.chown(daemon.socket, 0, WWW_DATA);
      const port = freePort();
      await Deno.writeTextFile(
        `${dir}/nginx.conf`,
        await nginxConfig(dir, pki, daemon.socket, port),
      );
      nginx = new Deno.Command("/usr/sbin/nginx", {
        args: ["-c", `${dir}/nginx.conf`, "-g", "daemon off;"],
        stdout: "null",
        stderr: "piped",
      }).spawn();
      await waitForPort(port, nginx);
      const alice = pki.clients[0];
      const message = new TextEncoder().encode("signed through nginx");

      await t.step(
        "1: an authorised subject with an owned key gets 200 and a valid signature",
        async () => {
          const res = await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message);
          assert.equal(res.status, 200);
          const spki = await (await curl(port, pki, alice, "/token", [])).body;
          const key = JSON.parse(new TextDecoder().decode(spki)).keys[0];
          const pub = await crypto.subtle.importKey(
            "spki",
            Uint8Array.fromBase64(key.public_key),
            { name: "ECDSA", namedCurve: "P-256" },
            false,
            ["verify"],
          );
          assert.ok(
            await crypto.subtle.verify(
              { name: "ECDSA", hash: "SHA-256" },
              pub,
              res.body as BufferSource,
              message as BufferSource,
            ),
          );
        },
      );

      await t.step(
        "2: a client-sent X-SVC-Client-Subject is replaced by the proxy's value",
        async () => {
          // alice claims to be bob: she must be served as alice, so bob's key is refused...
          const asBob = await curl(port, pki, alice, "/sign", [
            ["X-SVC-Client-Subject", BOB],
            ["X-SVC-Key", "bob-ec"],
          ], message);
          assert.equal(asBob.status, 403);
          // ...and her own key is served (one header arrived, the proxy's).
          const own = await curl(port, pki, alice, "/sign", [
            ["x-svc-client-subject", BOB],
            ["X-SVC-Key", "alice-ec"],
          ], message);
          assert.equal(own.status, 200);
        },
      );

      await t.step(
        "3: a key the subject does not own and a key nobody owns: identical 403",
        async () => {
          const notOwned = await curl(
            port,
            pki,
            alice,
            "/sign",
            [["X-SVC-Key", "bob-ec"]],
            message,
          );
          const nobodys = await curl(
            port,
            pki,
            alice,
            "/sign",
            [["X-SVC-Key", "no-such"]],
            message,
          );
          assert.equal(notOwned.status, 403);
          assert.deepEqual(notOwned.body, nobodys.body);
        },
      );

      await t.step("4: /verify with the signature from /sign returns 200", async () => {
        const sig =
          (await curl(port, pki, alice, "/sign", [["X-SVC-Key", "alice-ec"]], message)).body;
        const body = new Uint8Array([...sig, ...message]);
        const res = await curl(port, pki, alice, "/verify", [
          ["X-SVC-Key", "alice-ec"],
          ["X-SVC-Signature-Length", String(sig.length)],
        ], body);
        assert.equal(res.status, 200);
      });

      await t.step("5: the audit line of a served request names the subject as actor", async () => {
        const signs = (await readAuditLines(daemon!.auditDir)).filter((l) => l.event === "sign");
        assert.ok(signs.length >= 3);
        for (const line of signs) assert.equal(line.actor, ALICE);
      });

      await t.step(
        "§5.1: an unverified or missing certificate gets 403 from the proxy",
        async () => {
          const before = (await readAuditLines(daemon!.auditDir)).length;
          assert.equal(
            (await curl(port, pki, pki.rogue, "/sign", [["X-SVC-Key", "alice-ec"]], message))
              .status,
            403,
          );
          assert.equal(
            (await curl(port, pki, undefined, "/sign", [["X-SVC-Key", "alice-ec"]], message))
              .status,
            403,
          );
          assert.equal((await readAuditLines(daemon!.auditDir)).length, before);
        },
      );

      await t.step("§5.3: a peer that is not the proxy uid is never served", async () => {
        const res = await request(daemon!.socket, {
          method: "POST",
          path: "/sign",
          headers: [["X-SVC-Client-Subject", ALICE], ["X-SVC-Key", "alice-ec"]],
          body: message,
        });
        assert.equal(res.status, 0, "the daemon closed the connection without a byte");
      });

      await t.step(
        "svcd ca issue: the policy line it printed matches what nginx passes; the slash form never does",
        async () => {
          const client = { cert: dave.path, key: daveRequest.key };
          const own = await curl(port, pki, client, "/sign", [["X-SVC-Key", "dave-ed"]], message);
          assert.equal(own.status, 200);
          const bySlash = await curl(
            port,
            pki,
            client,
            "/sign",
            [["X-SVC-Key", "bob-ec"]],
            message,
          );
          assert.equal(bySlash.status, 403);
          const signs = (await readAuditLines(daemon!.auditDir)).filter((l) => l.event === "sign");
          assert.equal(signs.at(-1)!.actor, dave.nginxSubject);
          assert.equal(
            dave.nginxSubject,
            'CN=\\#dave\\ ,OU=Zo\\C3\\AB \\<x\\>\\;y,O=R&D\\, \\"Ops\\",C=DE',
          );
        },
      );
    } finally {
      if (nginx) {
        nginx.kill("SIGQUIT");
        await nginx.status;
      }
      await daemon?.stop();
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});

/** Waits until nginx accepts on the port (or exits: then fails with its error output). */
async function waitForPort(port: number, nginx: Deno.ChildProcess): Promise<void> {
  let exited = false;
  nginx.status.then(() => exited = true);
  for (let i = 0; i < 2000; i++) {
    if (exited) {
      const err = await new Response(nginx.stderr).text();
      throw new Error(`nginx exited: ${err}`);
    }
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  throw new Error("nginx did not start listening");
}
