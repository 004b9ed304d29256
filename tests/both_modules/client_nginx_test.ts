/**
 * `svcd client` end to end: run with exactly the permissions of deno.json's `client` task, through
 * Debian's nginx with the packaged example configuration (TLS, a client certificate), to a daemon
 * on this run's module (SoftHSM2, then svcmod). Every key type the module offers signs a 1 KiB and
 * a 256 MiB file; each signature is checked by a verifier the project did not write, against the
 * original file: openssl (ECDSA in the client's DER form, RSA-PSS, Ed25519) and @noble/post-quantum
 * (ML-DSA by plain verify of the message; the composite through tests/support/oracle.ts).
 *
 * The client is never given --max-body: the daemon's raised limit reaches it through GET /token's
 * max_body alone, so the 256 MiB file sent whole and the refusal of a larger one both show that it
 * learned the limit.
 *
 * The daemon has digest mode: every key on GET /token must list its digest names, and every key
 * type that has one must sign the 256 MiB file by digest (a small upload, read from nginx's access
 * log) — the test fails if digest mode goes missing, it does not fall back to message mode. Its
 * audit line must carry the digest computed here with node:crypto, and `svcd audit verify` must
 * pass over the log once the daemon has stopped. The 256 MiB file is made once, on a tmpfs mounted
 * for the test, and shared by every key type.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mountFs } from "../support/mounts.ts";
import { curlNginx } from "../support/nginx.ts";
import { readAuditLines, runAuditVerify } from "../support/audit.ts";
import { type CommandResult, runCommand } from "../support/command.ts";
import {
  opensslVerifyFile,
  type TokenKey,
  verifyIndependently,
  writeSpkiPem,
} from "../support/oracle.ts";
import { ML_DSA } from "../support/digest_mode.ts";
import {
  clientFlags,
  type ClientStack,
  runClientThroughNginx,
  startClientStack,
} from "../support/client_nginx.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const EXAMPLE = new URL("../../packaging/nginx-svcd.conf", import.meta.url).pathname;
const BIG = 256 << 20;
/** The daemon's and nginx's body limit here: a 256 MiB file in message mode fits. */
const RAISED_MAX_BODY = 300 << 20;
/** A digest-mode request: headers and at most a 64-byte body. */
const SMALL_UPLOAD = 4096;

const KEYS: Record<string, string> = {
  "k-p256": "ec-p256",
  "k-p384": "ec-p384",
  "k-ed": "ed25519",
  "k-rsa": "rsa-3072",
  "k-rsa15": "rsa-3072-pkcs1v15",
  "k-mldsa44": "ml-dsa-44",
  "k-mldsa65": "ml-dsa-65",
  "k-mldsa87": "ml-dsa-87",
  "k-comp": "composite-mldsa65-ed25519",
};

/** Each module's key types here (a type that stops being offered fails the test, not quietly). */
const EXPECTED_KEYS: Record<string, string[]> = {
  softhsm: ["k-p256", "k-p384", "k-ed", "k-rsa", "k-rsa15"],
  svcmod: ["k-p256", "k-ed", "k-mldsa44", "k-mldsa65", "k-mldsa87", "k-comp"],
};
/** The digest `svcd client` sends for each key type that has one (the wire contract's choice). */
const DIGEST_SENT: Record<string, string> = {
  "ec-p256": "sha-256",
  "ec-p384": "sha-384",
  "rsa-3072": "sha-256",
  "rsa-3072-pkcs1v15": "sha-256",
  "ml-dsa-44": "ml-dsa-mu",
  "ml-dsa-65": "ml-dsa-mu",
  "ml-dsa-87": "ml-dsa-mu",
};

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx");

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

interface Setup extends ClientStack {
  accessLog: string;
}

/** The example with nginx's and svcd's body limit raised, and an access log of request sizes. */
async function example(dir: string): Promise<string> {
  const text = await Deno.readTextFile(EXAMPLE);
  assert.ok(text.includes("client_max_body_size 1040k;"));
  return `log_format svcd_sizes '$request_uri $request_length $status';\n` +
    text.replace("client_max_body_size 1040k;", `client_max_body_size ${RAISED_MAX_BODY};`)
      .replace(
        "    location / {",
        `    access_log ${dir}/access.log svcd_sizes;\n    location / {`,
      );
}

async function setUp(): Promise<Setup> {
  const stack = await startClientStack({
    keys: KEYS,
    prefix: "svcd-client-nginx-",
    daemonArgs: () => ["--max-body", String(RAISED_MAX_BODY)],
    example,
  });
  return { ...stack, accessLog: `${stack.dir}/access.log` };
}

/** `svcd client …` as a user runs it: SVCD_* in the environment, the task's permissions. */
function runClient(s: Setup, args: string[]): Promise<CommandResult> {
  return runClientThroughNginx(s.nginx, s.pki, args);
}

async function listedKeys(s: Setup): Promise<TokenKey[]> {
  const res = await curlNginx(s.nginx, s.pki, s.pki.clients[0], "/token", []);
  assert.equal(res.status, 200);
  const listed = JSON.parse(new TextDecoder().decode(res.body));
  assert.equal(listed.max_body, RAISED_MAX_BODY, "GET /token states the daemon's --max-body");
  return listed.keys;
}

/** The digest the client sends for this key, or undefined when its type has no digest mode. */
function digestSent(key: TokenKey): string | undefined {
  return DIGEST_SENT[key.key_type];
}

/**
 * Signs `file` with the client (DER for ECDSA, raw otherwise) and checks the signature with a
 * verifier the project did not write.
 */
async function signAndCheck(s: Setup, key: TokenKey, file: string): Promise<void> {
  const ecdsa = key.key_type.startsWith("ec-");
  const sig = `${file}.${key.label}.sig`;
  const r = await runClient(s, [
    "sign",
    "--key-label",
    key.label,
    "--out",
    sig,
    ...(ecdsa ? ["--format", "der"] : []),
    file,
  ]);
  assert.equal(r.code, 0, r.text);
  const mode = digestSent(key);
  assert.match(r.stdout, new RegExp(mode ? `digest ${mode}` : "message"), r.stdout);
  const pem = `${sig}.pub.pem`;
  if (key.public_key) await writeSpkiPem(pem, key.public_key);
  try {
    if (ecdsa || key.key_type.startsWith("rsa-") || key.key_type === "ed25519") {
      const v = await opensslVerifyFile(key.key_type, pem, file, sig);
      assert.equal(v.code, 0, `openssl (${key.key_type}): ${v.text}`);
    } else if (key.key_type in ML_DSA) {
      const dsa = ML_DSA[key.key_type as keyof typeof ML_DSA];
      const message = await Deno.readFile(file);
      const pk = Uint8Array.fromBase64(key.public_key_raw);
      assert.ok(dsa.verify(await Deno.readFile(sig), message, pk), "@noble ML-DSA verify");
    } else {
      const ok = await verifyIndependently(
        key.key_type,
        { raw: Uint8Array.fromBase64(key.public_key_raw) },
        await Deno.readFile(file),
        await Deno.readFile(sig),
      );
      assert.ok(ok, "the composite's independent check");
    }
  } finally {
    await Deno.remove(sig).catch(() => {});
    await Deno.remove(pem).catch(() => {});
  }
}

/**
 * What each key's audit line must carry as `digest_value` for `file`, in hex, computed here with
 * node:crypto in one pass over the file: its SHA-2, or ML-DSA's μ with an empty context
 * (FIPS 204: SHAKE256(SHAKE256(pk, 64) ‖ 0x00 ‖ 0x00 ‖ M, 64)).
 */
async function fileDigests(file: string, keys: TokenKey[]): Promise<Map<string, string>> {
  const hashes = keys.map((key) => {
    const name = digestSent(key)!;
    if (name !== "ml-dsa-mu") return createHash(name.replace("-", ""));
    const pk = Uint8Array.fromBase64(key.public_key_raw);
    const tr = createHash("shake256", { outputLength: 64 }).update(pk).digest();
    return createHash("shake256", { outputLength: 64 }).update(tr).update(Uint8Array.of(0, 0));
  });
  // The stream closes the file when it ends.
  for await (const chunk of (await Deno.open(file)).readable) {
    for (const h of hashes) h.update(chunk);
  }
  return new Map(keys.map((key, i) => [key.label, hashes[i].digest("hex")]));
}

/** The 256 MiB file and how to remove it (and unmount its tmpfs). */
interface BigFile {
  path: string;
  remove(): Promise<void>;
}

/**
 * A 256 MiB file on a tmpfs mounted for this test (memory, not disk writes; not /dev/shm, which the
 * client's task cannot read: Deno asks for all permissions under /dev): 64 random KiB repeated,
 * each MiB marked with its number.
 */
async function bigFile(): Promise<BigFile> {
  const tmpfs = await mountFs("tmpfs", { mode: 0o755, sizeMiB: (BIG >> 20) + 16 });
  const path = `${tmpfs.path}/file`;
  try {
    const block = crypto.getRandomValues(new Uint8Array(1 << 16));
    const mib = new Uint8Array(1 << 20);
    for (let i = 0; i < 16; i++) mib.set(block, i << 16);
    using f = await Deno.open(path, { write: true, create: true, truncate: true });
    for (let i = 0; i < BIG >> 20; i++) {
      mib[1] = i;
      for (let at = 0; at < mib.length;) at += await f.write(mib.subarray(at));
    }
  } catch (err) {
    await tmpfs.cleanup();
    throw err;
  }
  return { path, remove: () => tmpfs.cleanup() };
}

/** The access log's sizes of the requests to `path` from `from` (a line count) on. */
async function uploadSizes(s: Setup, path: string, from: number): Promise<number[]> {
  const lines = (await Deno.readTextFile(s.accessLog).catch(() => "")).trim().split("\n");
  return lines.slice(from).map((l) => l.split(" ")).filter(([uri]) => uri === path)
    .map(([, size]) => Number(size));
}

async function accessLogLength(s: Setup): Promise<number> {
  const text = await Deno.readTextFile(s.accessLog).catch(() => "");
  return text === "" ? 0 : text.trim().split("\n").length;
}

Deno.test({
  name: "svcd client through real nginx with a client certificate: every key type",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    let s: Setup | undefined;
    let big: BigFile | undefined;
    try {
      s = await setUp();
      const setup = s;
      const keys = await listedKeys(setup);
      assert.deepEqual(
        keys.map((k) => k.label).sort(),
        [...EXPECTED_KEYS[setup.token.module.name]].sort(),
      );
      // Digest mode is there: each key lists the digest names, and the client's choice among them.
      for (const key of keys) {
        assert.ok(Array.isArray(key.digests), `${key.label}: no "digests" on GET /token`);
        const name = digestSent(key);
        if (name) assert.ok(key.digests.includes(name), `${key.label}: ${key.digests}`);
        else assert.deepEqual(key.digests, [], key.label);
      }
      const small = `${setup.dir}/small`;
      await Deno.writeFile(small, crypto.getRandomValues(new Uint8Array(1024)));

      await t.step(
        "keys: every granted key with its type; --out-dir writes /token's SPKI",
        async () => {
          const out = `${setup.dir}/pub`;
          await Deno.mkdir(out);
          const r = await runClient(setup, ["keys", "--out-dir", out]);
          assert.equal(r.code, 0, r.text);
          for (const k of keys) {
            assert.match(r.stdout, new RegExp(`${k.label}\\s+${k.key_type}\\s`));
            const pem = await Deno.readTextFile(`${out}/${k.label}.pem`);
            assert.equal(pem.replace(/-----[^-]+-----|\n/g, ""), k.public_key);
          }
        },
      );

      await t.step(
        "1 KiB: every key type signs; openssl / @noble verify against the file",
        async () => {
          for (const key of keys) await signAndCheck(setup, key, small);
        },
      );

      await t.step(
        "verify: 0 for the signature, 1 for another file, locally and --remote",
        async () => {
          const key = keys[0];
          const sig = `${small}.sig`;
          assert.equal((await runClient(setup, ["sign", "--key-label", key.label, small])).code, 0);
          const other = `${setup.dir}/other`;
          await Deno.writeFile(other, new Uint8Array(1024));
          for (const remote of [[], ["--remote"]]) {
            const ok = await runClient(setup, [
              "verify",
              ...remote,
              "--key-label",
              key.label,
              small,
              sig,
            ]);
            assert.equal(ok.code, 0, ok.text);
            const no = await runClient(setup, [
              "verify",
              ...remote,
              "--key-label",
              key.label,
              other,
              sig,
            ]);
            assert.equal(no.code, 1, no.text);
            assert.match(no.stdout, /Verification failure/);
          }
        },
      );

      await t.step(
        "failures: an unknown key, a rogue certificate, a wrong CA: one line each",
        async () => {
          const unknown = await runClient(setup, ["sign", "--key-label", "nope", small]);
          assert.equal(unknown.code, 2);
          assert.match(unknown.stderr, /no key 'nope' is granted to you; yours: /);
          const rogue = await runCommand(Deno.execPath(), [
            "run",
            ...await clientFlags(),
            MAIN,
            "client",
            "keys",
            "--addr",
            `https://localhost:${setup.nginx.port}`,
            "--ca-cert",
            setup.pki.caCert,
            "--client-cert",
            setup.pki.rogue.cert,
            "--client-key",
            setup.pki.rogue.key,
          ]);
          assert.equal(rogue.code, 1);
          assert.match(
            rogue.stderr,
            /^svcd client keys: the proxy refused the client certificate \(403\)/,
          );
          assert.equal(rogue.stderr.trim().split("\n").length, 1);
          const wrongCa = await runCommand(Deno.execPath(), [
            "run",
            ...await clientFlags(),
            MAIN,
            "client",
            "keys",
            "--addr",
            `https://localhost:${setup.nginx.port}`,
            "--ca-cert",
            `${setup.dir}/rogue-ca.pem`,
            "--client-cert",
            setup.pki.clients[0].cert,
            "--client-key",
            setup.pki.clients[0].key,
          ]);
          assert.equal(wrongCa.code, 1);
          assert.match(
            wrongCa.stderr,
            /TLS failed: the server certificate of https:\/\/localhost:\d+ does not verify/,
          );
          assert.equal(wrongCa.stderr.trim().split("\n").length, 1);
        },
      );

      big = await bigFile();
      const bigPath: string = big.path;
      const messageOnly = keys.filter((k) => digestSent(k) === undefined);
      assert.ok(messageOnly.length > 0);

      await t.step(
        "past the daemon's --max-body without a digest mode: refused up front, naming max_body",
        async () => {
          // Sparse: the client refuses it by its size and never reads it.
          const past = `${setup.dir}/past-max-body`;
          await Deno.writeFile(past, new Uint8Array());
          await Deno.truncate(past, RAISED_MAX_BODY + 1);
          for (const key of messageOnly) {
            const before = await accessLogLength(setup);
            const r = await runClient(setup, ["sign", "--key-label", key.label, past]);
            assert.equal(r.code, 1, r.text);
            assert.match(
              r.stderr,
              new RegExp(
                `is ${RAISED_MAX_BODY + 1} bytes; the server takes at most ${RAISED_MAX_BODY} ` +
                  "bytes \\(GET /token max_body\\)",
              ),
            );
            assert.deepEqual(await uploadSizes(setup, "/sign", before), []);
          }
          await Deno.remove(past);
        },
      );

      await t.step(
        "256 MiB without a digest mode, within the daemon's max_body: sent whole, verified",
        async () => {
          for (const key of messageOnly) await signAndCheck(setup, key, bigPath);
        },
      );

      await t.step({
        name:
          "256 MiB by digest where the key type has one: the upload is small, the audit says digest",
        fn: async () => {
          const digestKeys = keys.filter((k) => digestSent(k) !== undefined);
          assert.ok(digestKeys.length > 0);
          const expected = await fileDigests(bigPath, digestKeys);
          for (const key of digestKeys) {
            const before = await accessLogLength(setup);
            await signAndCheck(setup, key, bigPath);
            const sizes = await uploadSizes(setup, "/sign", before);
            assert.equal(sizes.length, 1);
            assert.ok(sizes[0] < SMALL_UPLOAD, `${key.label}: ${sizes[0]} bytes uploaded`);
            const line = (await readAuditLines(setup.daemon.auditDir))
              .filter((l) => l.event === "sign").at(-1)!;
            assert.equal(line.key, key.label);
            assert.equal(line.mode, "digest");
            assert.equal(line.digest, digestSent(key));
            assert.equal(line.digest_value, expected.get(key.label), key.label);
          }
        },
      });

      // Checked once the daemon has stopped: nothing is appended to the log while it is read.
      await setup.nginx.stop();
      assert.equal(await setup.daemon.stop(), 0, setup.daemon.stderr());
      await t.step("svcd audit verify passes over the daemon's audit folder", async () => {
        const verified = await runAuditVerify(setup.token, setup.daemon.auditDir);
        assert.equal(verified.code, 0, verified.text);
      });
    } finally {
      await big?.remove();
      await s?.stop();
    }
  },
});
