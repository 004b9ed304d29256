/**
 * The benches' limit server (bench/limit, svcd-limit) does the work it is measured for: each
 * answer is an ECDSA P-256 signature over its own request's message under the key the token holds
 * (checked by node:crypto against the public key pkcs11-tool reads off the token), each signature
 * has its sign line, and `svcd audit verify` passes over its audit folder, seals and checkpoint
 * signatures checked with the token; an edited line fails it. Its refusals are svcd's.
 */
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createPublicKey, verify } from "node:crypto";
import { type LimitOptions, type LimitServer, startLimit } from "../bench/_limit.ts";
import { encodeRequest, parseResponse, rawExchange, request } from "./support/http_client.ts";
import { readToEnd, writeAll } from "./support/raw_http.ts";
import { readAuditLines, runAuditVerify, sha256Hex } from "./support/audit.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { moduleTempDir } from "./support/temp_dir.ts";

const KEY = "k-ec";
const CLIENTS = 16;
const REQUESTS = 160;
/** Small enough that the run has checkpoints between its groups, not only the last one. */
const CHECKPOINT_EVERY = 40;

/** The key's public key as pkcs11-tool reads it off the token (DER SubjectPublicKeyInfo). */
async function publicKeyFromToken(token: TestToken, label: string) {
  const out = `${token.dir}/${label}.pub.der`;
  const run = await new Deno.Command("pkcs11-tool", {
    args: [
      ...["--module", token.modulePath, "--token-label", token.tokenLabel],
      ...["--read-object", "--type", "pubkey", "--label", label, "-o", out],
    ],
    env: token.module.env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(run.code, 0, new TextDecoder().decode(run.stderr));
  const der = Buffer.from(await Deno.readFile(out));
  return createPublicKey({ key: der, format: "der", type: "spki" });
}

function sign(socket: string, subject: string, label: string, message: Uint8Array) {
  return request(socket, {
    method: "POST",
    path: "/sign",
    headers: [["X-SVC-Client-Subject", subject], ["X-SVC-Key", label]],
    body: message,
  });
}

/** A fresh token with KEY and svcd-limit on it for the length of `fn`; both gone after. */
async function withLimit(
  options: Pick<LimitOptions, "audit" | "workers" | "proxyUid" | "checkpointEvery">,
  fn: (server: LimitServer, token: TestToken) => Promise<void>,
): Promise<void> {
  const token = await makeTestToken({ keys: { [KEY]: "ec-p256" } });
  try {
    const server = await startLimit({
      token,
      policy,
      dir: moduleTempDir("svcd-limit-"),
      ...options,
    });
    try {
      await fn(server, token);
    } finally {
      await server.stop();
    }
  } finally {
    await token.cleanup();
  }
}

const policy = Array.from({ length: CLIENTS }, (_, i) => `CN=bench${i},O=Bench\t${KEY}\n`)
  .join("") + "# a comment line\nCN=other\tk-none\n";

Deno.test("svcd-limit: every answer is a valid signature over its message, with its audit line; verify passes, and fails on an edit", async () => {
  await withLimit({ audit: true, checkpointEvery: CHECKPOINT_EVERY }, async (server, token) => {
    const publicKey = await publicKeyFromToken(token, KEY);
    const sent: { subject: string; message: Uint8Array; signature: Uint8Array }[] = [];
    for (let round = 0; round < REQUESTS / CLIENTS; round++) {
      await Promise.all(Array.from({ length: CLIENTS }, async (_, i) => {
        const subject = `CN=bench${i},O=Bench`;
        const message = crypto.getRandomValues(new Uint8Array(32 + round * 7 + i));
        const res = await sign(server.socket, subject, KEY, message);
        assert.equal(res.status, 200, res.text());
        assert.equal(res.header("connection"), "close");
        assert.equal(res.header("x-svc-mechanism"), "CKM_ECDSA");
        sent.push({ subject, message, signature: res.body });
      }));
    }
    for (const { message, signature } of sent) {
      assert.ok(
        verify("sha256", message, { key: publicKey, dsaEncoding: "ieee-p1363" }, signature),
        "a signature that does not verify over its own message",
      );
    }

    // svcd's refusals: one 403 for an unknown subject, an ungranted label, a label that names no
    // key and the daemon's own keys; 400 for a second subject header.
    const refusals: [string, string][] = [
      ["CN=stranger", KEY],
      ["CN=bench0,O=Bench", "k-other"],
      ["CN=other", "k-none"],
      ["CN=bench0,O=Bench", "svc-audit"],
    ];
    const bodies = new Set<string>();
    for (const [subject, label] of refusals) {
      const res = await sign(server.socket, subject, label, new Uint8Array(8));
      assert.equal(res.status, 403, `${subject} ${label}`);
      bodies.add(res.text());
    }
    assert.equal(bodies.size, 1, [...bodies].join("\n"));
    const twice = await request(server.socket, {
      method: "POST",
      path: "/sign",
      headers: [["X-SVC-Client-Subject", "CN=a"], ["X-SVC-Client-Subject", "CN=b"], [
        "X-SVC-Key",
        KEY,
      ]],
      body: "m",
    });
    assert.equal(twice.status, 400);
    assert.equal((await request(server.socket, { method: "GET", path: "/health" })).status, 404);

    assert.equal(await server.stop(), 0, server.stderr());
    const auditDir = server.auditDir!;
    const lines = await readAuditLines(auditDir);
    const signs = lines.filter((l) => l.event === "sign");
    assert.equal(signs.length, sent.length, "one sign line per signature, none for a refusal");
    const bySignature = new Map(signs.map((l) => [l.signature_sha256, l]));
    for (const { subject, message, signature } of sent) {
      const line = bySignature.get(await sha256Hex(signature));
      assert.ok(line, "a signature without its audit line");
      assert.equal(line.actor, subject);
      assert.equal(line.key, KEY);
      assert.equal(line.message_sha256, await sha256Hex(message));
    }
    assert.ok(
      lines.filter((l) => l.event === "checkpoint").length >= 2,
      "checkpoints between groups and at the end",
    );

    const ok = await runAuditVerify(token, auditDir);
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.match(ok.stdout, /seals and MACs checked with the token/);

    // One byte of one sign line changed (its actor): verify fails at that line.
    const path = `${auditDir}/audit.log.000001`;
    const text = await Deno.readTextFile(path);
    const at = text.indexOf('"actor":"CN=bench3,O=Bench"');
    assert.ok(at > 0);
    const digit = at + '"actor":"CN=bench'.length;
    await Deno.writeTextFile(path, text.slice(0, digit) + "4" + text.slice(digit + 1));
    const lineNo = text.slice(0, at).split("\n").length;
    const bad = await runAuditVerify(token, auditDir);
    assert.equal(bad.code, 1, bad.stdout + bad.stderr);
    assert.match(bad.stdout + bad.stderr, new RegExp(`audit\\.log\\.000001 line ${lineNo}\\b`));
  });
});

Deno.test("svcd-limit: SIGKILL under a c=16 load — every signature a client received has its line, verify passes", async () => {
  await withLimit({ audit: true }, async (server, token) => {
    const received: string[] = [];
    const target = 100 + Math.floor(Math.random() * 300);
    let killed = false;
    const client = async (c: number) => {
      for (let i = 0; !killed; i++) {
        const message = new TextEncoder().encode(`c${c} m${i}`);
        const res = await sign(server.socket, `CN=bench${c},O=Bench`, KEY, message)
          .catch(() => undefined);
        if (res?.status === 200) received.push(await sha256Hex(res.body));
        else if (!killed) assert.fail(`status ${res?.status} before the kill:\n${server.stderr()}`);
        if (received.length >= target && !killed) {
          killed = true;
          server.signal("SIGKILL");
        }
      }
    };
    await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
    assert.equal((await server.status).signal, "SIGKILL");
    const logged = new Set(
      (await readAuditLines(server.auditDir!)).filter((l) => l.event === "sign")
        .map((l) => l.signature_sha256),
    );
    const missing = received.filter((d) => !logged.has(d));
    assert.deepEqual(missing, [], "a signature reached a client without its audit line");
    const v = await runAuditVerify(token, server.auditDir!);
    assert.equal(v.code, 0, v.stdout + v.stderr);
  });
});

Deno.test("svcd-limit with the audit off answers signatures and writes no log", async () => {
  await withLimit({ audit: false }, async (server, token) => {
    const publicKey = await publicKeyFromToken(token, KEY);
    const message = new TextEncoder().encode("audit off");
    const res = await sign(server.socket, "CN=bench1,O=Bench", KEY, message);
    assert.equal(res.status, 200, res.text());
    assert.ok(verify("sha256", message, { key: publicKey, dsaEncoding: "ieee-p1363" }, res.body));
    assert.equal(server.auditDir, undefined);
    assert.equal(await server.stop(), 0, server.stderr());
  });
});

Deno.test("svcd-limit: the per-identity cap refuses with 429 while the identity has --workers - 1 in flight; other identities pass", async () => {
  // --workers 2: a cap of one request in flight per identity.
  await withLimit({ audit: false, workers: 2 }, async (server) => {
    // Two requests of one identity whose bodies are still arriving: one is in flight (its head
    // read, its body awaited), so the other, whichever comes second, is refused at once.
    const whole = encodeRequest({
      method: "POST",
      path: "/sign",
      headers: [["X-SVC-Client-Subject", "CN=bench0,O=Bench"], ["X-SVC-Key", KEY]],
      body: "held message",
    });
    const held = await Promise.all([0, 1].map(async () => {
      const conn = await Deno.connect({ transport: "unix", path: server.socket });
      await writeAll(conn, whole.subarray(0, whole.length - 4));
      return { conn, answer: readToEnd(conn).then(parseResponse) };
    }));
    try {
      const first = await Promise.race(held.map(async (h, i) => ({ i, res: await h.answer })));
      assert.equal(first.res.status, 429, first.res.text());
      assert.equal(first.res.header("retry-after"), "1");
      const other = await sign(server.socket, "CN=bench1,O=Bench", KEY, new Uint8Array(4));
      assert.equal(other.status, 200, "another identity is not capped");
      const inFlight = held[1 - first.i];
      await writeAll(inFlight.conn, whole.subarray(whole.length - 4));
      assert.equal((await inFlight.answer).status, 200, "served once its body arrives");
      const after = await sign(server.socket, "CN=bench0,O=Bench", KEY, new Uint8Array(4));
      assert.equal(after.status, 200, "the identity passes again once nothing of it is in flight");
    } finally {
      for (const h of held) h.conn.close();
    }
    assert.equal(await server.stop(), 0, server.stderr());
  });
});

Deno.test("svcd-limit: a peer whose uid is not --proxy-uid gets no answer", async () => {
  await withLimit({ audit: false, proxyUid: (Deno.uid() ?? 0) + 1 }, async (server) => {
    const raw = await rawExchange(
      server.socket,
      encodeRequest({
        method: "POST",
        path: "/sign",
        headers: [["X-SVC-Client-Subject", "CN=bench0,O=Bench"], ["X-SVC-Key", KEY]],
        body: "m",
      }),
    );
    assert.equal(raw.length, 0, new TextDecoder().decode(raw));
    assert.equal(await server.stop(), 0, server.stderr());
  });
});
