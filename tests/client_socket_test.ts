/**
 * `svcd client --insecure-http --addr unix:/PATH` against the real daemon's socket, run with the
 * permissions of deno.json's `client` task. The client sends no X-SVC-Client-Subject (that header
 * is the proxy's to set, and the client has no option to forge it), so the test stands in for the
 * proxy with a relay on a second socket that adds the subject to each request, as nginx does, and
 * hands the daemon's answer back unchanged. Signatures are checked by openssl against the file.
 * Last, the client run with the daemon's permission set (what the daemon's compiled executable
 * has: no network, no SVCD_*) fails in one line that names svcd-client, and `deno task svcd
 * client` (the same set) with SVCD_ADDR set in one line that names `deno task client`.
 */
import assert from "node:assert/strict";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { type CommandResult, runCommand } from "./support/command.ts";
import { daemonPublicKeys, opensslVerifyFile, writeSpkiPem } from "./support/oracle.ts";

const ALICE = "CN=alice,O=Example,C=DE";
const MAIN = new URL("../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../deno.json", import.meta.url).pathname;

/** The permission flags of deno.json's `client` task. */
async function clientFlags(): Promise<string[]> {
  const task: string = JSON.parse(await Deno.readTextFile(CONFIG)).tasks.client;
  return task.replace(/^deno run /, "").replace(/ main\.ts client$/, "").split(" ");
}

async function readAll(conn: Deno.Conn): Promise<Uint8Array> {
  return new Uint8Array(await new Response(conn.readable).arrayBuffer());
}

/** Index of the blank line ending an HTTP head, or -1. */
function headEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

/** Reads one request (head and Content-Length body) from `conn`. */
async function readRequest(conn: Deno.Conn): Promise<{ head: string; body: Uint8Array }> {
  let buf = new Uint8Array(0);
  const chunk = new Uint8Array(1 << 16);
  for (;;) {
    const end = headEnd(buf);
    if (end >= 0) {
      const head = new TextDecoder().decode(buf.subarray(0, end));
      const length = Number(head.match(/\r\ncontent-length: *(\d+)/i)?.[1] ?? 0);
      if (buf.length >= end + 4 + length) {
        return { head, body: buf.slice(end + 4, end + 4 + length) };
      }
    }
    const n = await conn.read(chunk);
    if (n === null) throw new Error("the client closed before a whole request");
    const grown = new Uint8Array(buf.length + n);
    grown.set(buf);
    grown.set(chunk.subarray(0, n), buf.length);
    buf = grown;
  }
}

/**
 * A socket at `path` that adds `X-SVC-Client-Subject: subject` to each request and passes it to
 * the daemon's socket, then passes the whole answer back and closes (svcd closes every connection).
 */
function startSubjectRelay(path: string, daemonSocket: string, subject: string) {
  const listener = Deno.listen({ transport: "unix", path });
  const served = (async () => {
    for await (const conn of listener) {
      try {
        const { head, body } = await readRequest(conn);
        const [requestLine, ...fields] = head.split("\r\n");
        const relayed = [requestLine, `X-SVC-Client-Subject: ${subject}`, ...fields].join("\r\n");
        using upstream = await Deno.connect({ transport: "unix", path: daemonSocket });
        const out = new TextEncoder().encode(relayed + "\r\n\r\n");
        for (const part of [out, body]) {
          for (let at = 0; at < part.length;) at += await upstream.write(part.subarray(at));
        }
        const answer = await readAll(upstream);
        for (let at = 0; at < answer.length;) at += await conn.write(answer.subarray(at));
      } finally {
        conn.close();
      }
    }
  })();
  return {
    close: async () => {
      listener.close();
      await served.catch(() => {});
    },
  };
}

Deno.test({
  name: "svcd client --insecure-http over a UNIX socket to the real daemon",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256", "k-ed": "ed25519" } });
    const daemon = await startDaemon({
      token,
      policy: `${ALICE}\tk-ec\n${ALICE}\tk-ed\n`,
    });
    const dir = await Deno.makeTempDir({ prefix: "svcd-client-socket-" });
    const relaySocket = `${dir}/relay.sock`;
    const relay = startSubjectRelay(relaySocket, daemon.socket, ALICE);
    const client = async (args: string[]): Promise<CommandResult> => {
      const [command, ...rest] = args;
      return await runCommand(Deno.execPath(), [
        "run",
        ...await clientFlags(),
        MAIN,
        "client",
        command,
        "--insecure-http",
        "--addr",
        `unix:${relaySocket}`,
        ...rest,
      ], { env: { NO_COLOR: "1" } });
    };
    try {
      const publicKeys = await daemonPublicKeys(daemon.socket, ALICE);
      const file = `${dir}/file`;
      await Deno.writeFile(file, crypto.getRandomValues(new Uint8Array(5000)));

      await t.step("without --insecure-http a unix: address is refused", async () => {
        const r = await runCommand(Deno.execPath(), [
          "run",
          ...await clientFlags(),
          MAIN,
          "client",
          "keys",
          "--addr",
          `unix:${relaySocket}`,
        ], { env: { NO_COLOR: "1" } });
        assert.equal(r.code, 2, r.text);
        assert.match(r.stderr, /--insecure-http allows plain HTTP/);
      });

      await t.step("keys: both keys with their digest modes", async () => {
        const r = await client(["keys"]);
        assert.equal(r.code, 0, r.text);
        assert.match(r.stdout, /k-ec\s+ec-p256\s+sha-256,sha-384,sha-512/);
        assert.match(r.stdout, /k-ed\s+ed25519\s+none \(message mode\)/);
      });

      await t.step("sign: by digest (ECDSA) and whole (Ed25519); openssl verifies", async () => {
        for (const [label, mode] of [["k-ec", "digest sha-256"], ["k-ed", "message"]]) {
          const sig = `${file}.${label}.sig`;
          const format = label === "k-ec" ? ["--format", "der"] : [];
          const r = await client(["sign", "--key-label", label, "--out", sig, ...format, file]);
          assert.equal(r.code, 0, r.text);
          assert.match(
            r.stdout,
            new RegExp(`\\(${label === "k-ec" ? "ec-p256" : "ed25519"}, ${mode}\\)`),
          );
          const pem = `${dir}/${label}.pem`;
          await writeSpkiPem(pem, publicKeys.get(label)!.spki!.toBase64());
          const keyType = label === "k-ec" ? "ec-p256" : "ed25519";
          const v = await opensslVerifyFile(keyType, pem, file, sig);
          assert.equal(v.code, 0, `${label}: ${v.text}`);
          // The daemon's /verify agrees, through the same socket.
          const remote = await client([
            "verify",
            "--remote",
            "--key-label",
            label,
            ...format,
            file,
            sig,
          ]);
          assert.equal(remote.code, 0, remote.text);
        }
      });

      await t.step("a key not granted to the subject the relay set: one line, exit 2", async () => {
        const r = await client(["sign", "--key-label", "nope", file]);
        assert.equal(r.code, 2, r.text);
        assert.match(r.stderr, /no key 'nope' is granted to you; yours: k-ec, k-ed/);
      });
    } finally {
      await relay.close();
      await daemon.stop();
      await token.cleanup();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test("svcd client with the daemon's permissions (its executable): one line naming svcd-client", async () => {
  const dir = await Deno.makeTempDir({ prefix: "svcd-client-perm-" });
  try {
    const made = await runCommand("openssl", [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-subj",
      "/CN=localhost",
      "-keyout",
      `${dir}/key.pem`,
      "-out",
      `${dir}/cert.pem`,
    ]);
    assert.equal(made.code, 0, made.text);
    const task: string = JSON.parse(await Deno.readTextFile(CONFIG)).tasks.svcd;
    const daemonFlags = task.replace(/^deno run /, "").replace(/ main\.ts$/, "").split(" ");
    assert.ok(!daemonFlags.some((f) => f.startsWith("--allow-net")));
    const r = await runCommand(Deno.execPath(), [
      "run",
      ...daemonFlags,
      MAIN,
      "client",
      "keys",
      "--addr",
      "https://localhost:65000",
      "--ca-cert",
      `${dir}/cert.pem`,
      "--client-cert",
      `${dir}/cert.pem`,
      "--client-key",
      `${dir}/key.pem`,
    ], { env: { NO_COLOR: "1" } });
    assert.equal(r.code, 1, r.text);
    assert.match(
      r.stderr,
      /^svcd client keys: this svcd may not reach https:\/\/localhost:65000 .*run svcd-client/,
    );
    assert.equal(r.stderr.trim().split("\n").length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deno task svcd client: the daemon's permissions answer in one line naming deno task client", async () => {
  const repo = new URL("..", import.meta.url).pathname;
  const task = (args: string[]) =>
    runCommand(Deno.execPath(), ["task", "--quiet", "svcd", "client", ...args], {
      cwd: repo,
      env: { NO_COLOR: "1", SVCD_ADDR: "https://localhost:65000" },
    });
  // SVCD_ADDR is set, but the daemon's task may not read it: no "give --addr" dead end.
  const keys = await task(["keys"]);
  assert.equal(keys.code, 1, keys.text);
  assert.equal(keys.stdout, "");
  assert.equal(keys.stderr.trim().split("\n").length, 1, keys.stderr);
  assert.match(keys.stderr, /^svcd client keys: .*may not read SVCD_ADDR\b.*deno task client/);
  // What needs no permission still works there.
  const help = await task(["--help"]);
  assert.equal(help.code, 0, help.text);
  assert.match(help.stdout, /^usage: svcd client /);
});
