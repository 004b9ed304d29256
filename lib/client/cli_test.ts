/**
 * `svcd client` against a stand-in svcd (tests/support/fake_svcd.ts) that speaks the digest-mode
 * wire contract: what is sent in which mode, the local check before a signature is written, the
 * refusals and retries, the formats — each signature checked by a verifier the client does not use
 * (node:crypto, openssl's DER form, @noble's plain ML-DSA verify of the message).
 */
import assert from "node:assert/strict";
import { constants, createHash, createPublicKey, verify as nodeVerify } from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { runClientCommand } from "./cli.ts";
import { muHasher } from "./mu.ts";
import { rsaPkcs1v15Verify, rsaPssVerify } from "./verify.ts";
import { ecdsaDer, ecdsaRaw } from "./format.ts";
import { terminalProgress } from "./hash.ts";
import { verifyIndependently } from "../../tests/support/oracle.ts";
import { fakeKey } from "../../tests/support/fake_svcd.ts";
import { client, withFake } from "../../tests/support/fake_client.ts";

const MLDSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

function spkiKey(spki: Uint8Array) {
  return createPublicKey({ key: Buffer.from(spki), format: "der", type: "spki" });
}

const DIGEST_CASES = [
  { type: "ec-p256", digests: ["sha-256", "sha-384", "sha-512"], sent: "sha-256", length: 32 },
  { type: "ec-p384", digests: ["sha-256", "sha-384", "sha-512"], sent: "sha-384", length: 48 },
  { type: "rsa-3072", digests: ["sha-256", "sha-384", "sha-512"], sent: "sha-256", length: 32 },
  {
    type: "rsa-3072-pkcs1v15",
    digests: ["sha-256", "sha-384", "sha-512"],
    sent: "sha-256",
    length: 32,
  },
  { type: "ml-dsa-44", digests: ["ml-dsa-mu"], sent: "ml-dsa-mu", length: 64 },
  { type: "ml-dsa-65", digests: ["ml-dsa-mu"], sent: "ml-dsa-mu", length: 64 },
  { type: "ml-dsa-87", digests: ["ml-dsa-mu"], sent: "ml-dsa-mu", length: 64 },
];

/** The independent check of a file's signature, over the message. */
function independentlyValid(
  type: string,
  key: ReturnType<typeof fakeKey>,
  message: Uint8Array,
  signature: Uint8Array,
): boolean {
  if (type.startsWith("ec-")) {
    return nodeVerify(type === "ec-p256" ? "sha256" : "sha384", message, {
      key: spkiKey(key.publicKeySpki!),
      dsaEncoding: "ieee-p1363",
    }, signature);
  }
  if (type === "rsa-3072") {
    return nodeVerify("sha256", message, {
      key: spkiKey(key.publicKeySpki!),
      padding: constants.RSA_PKCS1_PSS_PADDING,
      saltLength: 32,
    }, signature);
  }
  if (type === "rsa-3072-pkcs1v15") {
    return nodeVerify("sha256", message, {
      key: spkiKey(key.publicKeySpki!),
      padding: constants.RSA_PKCS1_PADDING,
    }, signature);
  }
  return MLDSA[type as keyof typeof MLDSA].verify(signature, message, key.publicKeyRaw);
}

for (const c of DIGEST_CASES) {
  Deno.test(`sign ${c.type}: sends only its ${c.sent} digest; the signature verifies over the file`, async () => {
    const key = fakeKey("k", c.type, c.digests);
    await withFake([key], async (fake, dir) => {
      const message = crypto.getRandomValues(new Uint8Array(3000));
      await Deno.writeFile(`${dir}/f`, message);
      fake.messages.push(message);
      const r = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
      assert.equal(r.code, 0, r.err);
      const sign = fake.requests.find((q) => q.path === "/sign")!;
      assert.equal(sign.headers["x-svc-digest"], c.sent);
      assert.equal(sign.body.length, c.length);
      const signature = await Deno.readFile(`${dir}/f.sig`);
      assert.ok(independentlyValid(c.type, key, message, signature));
      assert.match(r.out[0], new RegExp(`digest ${c.sent}`));
    });
  });
}

for (const type of ["ed25519", "composite-mldsa65-ed25519", "ec-p256"]) {
  Deno.test(`sign ${type} without a digest mode: the file itself is sent and verified here`, async () => {
    // ec-p256 here stands for a daemon that lists no digests at all (no "digests" field).
    const key = fakeKey("k", type, type === "ec-p256" ? undefined : []);
    await withFake([key], async (fake, dir) => {
      const message = crypto.getRandomValues(new Uint8Array(2000));
      await Deno.writeFile(`${dir}/f`, message);
      const r = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
      assert.equal(r.code, 0, r.err);
      const sign = fake.requests.find((q) => q.path === "/sign")!;
      assert.equal(sign.headers["x-svc-digest"], undefined);
      assert.deepEqual(sign.body, message);
      const signature = await Deno.readFile(`${dir}/f.sig`);
      const publicKey = { raw: key.publicKeyRaw, spki: key.publicKeySpki };
      assert.ok(await verifyIndependently(type, publicKey, message, signature));
      assert.match(r.out[0], /\(.*, message\)/);
    });
  });
}

Deno.test("sign: a file larger than the server's max_body with no digest mode is refused before any POST, naming the limit", async () => {
  await withFake([fakeKey("ed", "ed25519", [])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/small`, new Uint8Array(1000));
    await Deno.writeFile(`${dir}/big`, new Uint8Array(1001));
    const r = await client(fake, ["sign", "--key-label", "ed", `${dir}/small`, `${dir}/big`]);
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /big is 1001 bytes; the server takes at most 1000 bytes \(GET \/token max_body\)/,
    );
    assert.match(r.err, /nothing was signed.*ask the operator to raise svcd's --max-body/);
    assert.deepEqual(fake.requests.map((q) => `${q.method} ${q.path}`), ["GET /token"]);
    await assert.rejects(Deno.stat(`${dir}/small.sig`));

    // A file of exactly max_body is sent whole, and signed.
    const ok = await client(fake, ["sign", "--key-label", "ed", `${dir}/small`]);
    assert.equal(ok.code, 0, ok.err);
    const sent = fake.requests.filter((q) => q.path === "/sign");
    assert.deepEqual(sent.map((q) => q.body.length), [1000]);
    await Deno.stat(`${dir}/small.sig`);
  }, { maxBody: 1000 });
});

Deno.test("sign: --max-body only lowers the server's max_body; a server without max_body gets the 1 MiB default", async () => {
  await withFake([fakeKey("ed", "ed25519", [])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(2000));
    const raised = await client(fake, [
      "sign",
      "--key-label",
      "ed",
      "--max-body",
      "5000",
      `${dir}/f`,
    ]);
    assert.equal(raised.code, 1);
    assert.match(
      raised.err,
      /f is 2000 bytes; the server takes at most 1000 bytes \(GET \/token max_body\)/,
    );
    const lowered = await client(fake, [
      "sign",
      "--key-label",
      "ed",
      "--max-body",
      "500",
      `${dir}/f`,
    ]);
    assert.equal(lowered.code, 1);
    assert.match(lowered.err, /f is 2000 bytes; --max-body allows at most 500 bytes/);
    assert.match(lowered.err, /raise --max-body \(the server takes up to 1000 bytes\)/);
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);

    fake.maxBody = undefined;
    await Deno.writeFile(`${dir}/big`, new Uint8Array((1 << 20) + 1));
    const old = await client(fake, ["sign", "--key-label", "ed", `${dir}/big`]);
    assert.equal(old.code, 1);
    assert.match(
      old.err,
      /big is 1048577 bytes; the server takes at most 1048576 bytes \(svcd's default/,
    );
    const given = await client(fake, [
      "sign",
      "--key-label",
      "ed",
      "--max-body",
      "1000",
      `${dir}/f`,
    ]);
    assert.match(given.err, /f is 2000 bytes; --max-body allows at most 1000 bytes/);
    assert.equal(fake.requests.filter((q) => q.path === "/sign").length, 0);
    const within = await client(fake, ["sign", "--key-label", "ed", `${dir}/f`]);
    assert.equal(within.code, 0, within.err);
  }, { maxBody: 1000 });
});

Deno.test("verify --remote: the file and its signature must fit max_body together, checked before sending", async () => {
  const key = fakeKey("ed", "ed25519", []);
  await withFake([key], async (fake, dir) => {
    const message = new Uint8Array(1000 - 64 + 1);
    await Deno.writeFile(`${dir}/f`, message);
    await Deno.writeFile(`${dir}/f.sig`, key.signMessage(message));
    const r = await client(fake, [
      "verify",
      "--remote",
      "--key-label",
      "ed",
      `${dir}/f`,
      `${dir}/f.sig`,
    ]);
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /f is 937 bytes \(1001 with the signature\); the server takes at most 1000/,
    );
    assert.match(r.err, /nothing was sent\. Verify it here instead \(without --remote\)/);
    assert.equal(fake.requests.filter((q) => q.path === "/verify").length, 0);
  }, { maxBody: 1000 });
});

Deno.test("413 for a body within the server's max_body: the proxy takes less, and the message says so", async () => {
  await withFake([fakeKey("ed", "ed25519", [])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(100));
    fake.overrides.push((q) =>
      q.path === "/sign" ? { status: 413, body: "<html>413</html>" } : undefined
    );
    const r = await client(fake, ["sign", "--key-label", "ed", `${dir}/f`]);
    assert.equal(r.code, 1);
    assert.match(
      r.err,
      /\(413\), though the server takes at most 1000 bytes \(GET \/token max_body\)/,
    );
    assert.match(r.err, /client_max_body_size/);
  }, { maxBody: 1000 });
});

Deno.test("sign: a signature that does not verify locally is never written; exit 1", async () => {
  await withFake([fakeKey("k", "ec-p256", ["sha-256"])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(100));
    fake.overrides.push((q) =>
      q.path === "/sign" ? { status: 200, body: new Uint8Array(64).fill(7) } : undefined
    );
    const r = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
    assert.equal(r.code, 1);
    assert.match(r.err, /does not verify with the public key of 'k': nothing was written/);
    await assert.rejects(Deno.stat(`${dir}/f.sig`));
  });
});

Deno.test("429 and 503 are retried after Retry-After, at most --retries times", async () => {
  await withFake([fakeKey("k", "ec-p256", ["sha-256"])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(100));
    let busy = 2;
    fake.overrides.push((q) =>
      q.path === "/sign" && busy-- > 0
        ? { status: busy === 1 ? 429 : 503, headers: { "Retry-After": busy === 1 ? "7" : "1" } }
        : undefined
    );
    const ok = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
    assert.equal(ok.code, 0, ok.err);
    assert.deepEqual(ok.waits, [7, 1]);
    fake.overrides.push((q) =>
      q.path === "/sign" ? { status: 429, headers: { "Retry-After": "2" } } : undefined
    );
    const no = await client(fake, ["sign", "--key-label", "k", "--retries", "1", `${dir}/f`]);
    assert.equal(no.code, 1);
    assert.deepEqual(no.waits, [2]);
    assert.equal(no.err.trim().split("\n").length, 1);
    assert.match(no.err, /throttling this client \(429, Retry-After 2 s\) after 1 retry/);
  });
});

Deno.test("503 past its retries, 403 from svcd, 403 from the proxy: one line each with what to do", async () => {
  await withFake([fakeKey("k", "ec-p256", ["sha-256"])], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new Uint8Array(100));
    let answer: { status: number; headers?: Record<string, string>; body?: string } = {
      status: 503,
      headers: { "Retry-After": "1" },
    };
    fake.overrides.push((q) => q.path === "/sign" ? answer : undefined);
    const busy = await client(fake, ["sign", "--key-label", "k", "--retries", "0", `${dir}/f`]);
    assert.equal(busy.code, 1);
    assert.match(busy.err, /svcd is busy \(503, Retry-After 1 s\): run again later/);
    answer = {
      status: 403,
      headers: { "Content-Type": "application/problem+json" },
      body: '{"type":"about:blank","title":"Forbidden","status":403}',
    };
    const refused = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
    assert.match(refused.err, /svcd refused key 'k' \(403\).*'svcd client keys' lists yours/);
    answer = { status: 403, headers: { "Content-Type": "text/html" }, body: "<html>403</html>" };
    const proxy = await client(fake, ["sign", "--key-label", "k", `${dir}/f`]);
    assert.match(proxy.err, /the proxy refused the client certificate \(403\)/);
    for (const r of [busy, refused, proxy]) assert.equal(r.err.trim().split("\n").length, 1);
  });
});

Deno.test("sign --format der gives openssl's X9.62 form; base64 the raw bytes; der is ECDSA only", async () => {
  const key = fakeKey("k", "ec-p384", ["sha-384"]);
  await withFake([key, fakeKey("ed", "ed25519", [])], async (fake, dir) => {
    const message = new TextEncoder().encode("formats");
    await Deno.writeFile(`${dir}/f`, message);
    const der = await client(fake, ["sign", "--key-label", "k", "--format", "der", `${dir}/f`]);
    assert.equal(der.code, 0, der.err);
    const sig = await Deno.readFile(`${dir}/f.sig`);
    assert.ok(nodeVerify("sha384", message, spkiKey(key.publicKeySpki!), sig)); // DER by default
    const b64 = await client(fake, [
      "sign",
      "--key-label",
      "k",
      "--format",
      "base64",
      "--out",
      `${dir}/f.b64`,
      `${dir}/f`,
    ]);
    assert.equal(b64.code, 0, b64.err);
    const raw = Uint8Array.fromBase64((await Deno.readTextFile(`${dir}/f.b64`)).trim());
    assert.equal(raw.length, 96);
    const v = await client(fake, [
      "verify",
      "--key-label",
      "k",
      "--format",
      "base64",
      `${dir}/f`,
      `${dir}/f.b64`,
    ]);
    assert.equal(v.code, 0, v.err);
    const ed = await client(fake, ["sign", "--key-label", "ed", "--format", "der", `${dir}/f`]);
    assert.equal(ed.code, 2);
    assert.match(ed.err, /--format der is the ECDSA signature form/);
  });
});

Deno.test("verify: a SIG that does not parse in its --format is not valid: exit 1, one line why", async () => {
  const key = fakeKey("k", "ec-p384", ["sha-384"]);
  await withFake([key], async (fake, dir) => {
    await Deno.writeFile(`${dir}/f`, new TextEncoder().encode("formats"));
    assert.equal((await client(fake, ["sign", "--key-label", "k", `${dir}/f`])).code, 0);
    const der = ecdsaDer(await Deno.readFile(`${dir}/f.sig`));
    const cases: Array<[string, string, Uint8Array, RegExp]> = [
      ["base64", "b64", new TextEncoder().encode("not*base64!\n"), /is not base64/],
      ["der", "der", new TextEncoder().encode("not DER at all"), /is not a DER ec-p384 ECDSA/],
      ["der", "cut", der.subarray(0, der.length - 1), /is not a DER ec-p384 ECDSA/],
    ];
    for (const [format, ext, bytes, why] of cases) {
      const sig = `${dir}/f.${ext}`;
      await Deno.writeFile(sig, bytes);
      for (const remote of [[], ["--remote"]]) {
        const before = fake.requests.length;
        const args = ["verify", ...remote, "--key-label", "k", "--format", format, `${dir}/f`, sig];
        const r = await client(fake, args);
        assert.equal(r.code, 1, `${args.join(" ")}: ${r.err}`);
        assert.deepEqual(r.out, ["Verification failure"]);
        assert.equal(r.err.trim().split("\n").length, 1, r.err);
        assert.match(r.err, new RegExp(`^svcd client verify: ${sig} `));
        assert.match(r.err, why);
        assert.match(r.err, new RegExp(`\\(--format ${format}\\): the signature is not valid\\n$`));
        // Nothing about the signature went to svcd.
        assert.ok(!fake.requests.slice(before).some((q) => q.path === "/verify"));
      }
    }
    // The same file in its right format still verifies, so the refusals above are the parsing.
    await Deno.writeFile(`${dir}/f.der`, der);
    const ok = await client(fake, [
      "verify",
      "--key-label",
      "k",
      "--format",
      "der",
      `${dir}/f`,
      `${dir}/f.der`,
    ]);
    assert.equal(ok.code, 0, ok.err);
  });
});

Deno.test("verify: 0 when valid, 1 when not; --remote sends the signature then the digest", async () => {
  const key = fakeKey("k", "ml-dsa-65", ["ml-dsa-mu"]);
  await withFake([key], async (fake, dir) => {
    const message = crypto.getRandomValues(new Uint8Array(5000));
    await Deno.writeFile(`${dir}/f`, message);
    await Deno.writeFile(`${dir}/f.sig`, key.signMessage(message));
    const ok = await client(fake, ["verify", "--key-label", "k", `${dir}/f`, `${dir}/f.sig`]);
    assert.equal(ok.code, 0, ok.err);
    assert.deepEqual(ok.out, ["Verified OK"]);
    await Deno.writeFile(`${dir}/g`, new Uint8Array([...message, 1]));
    const bad = await client(fake, ["verify", "--key-label", "k", `${dir}/g`, `${dir}/f.sig`]);
    assert.equal(bad.code, 1);
    assert.deepEqual(bad.out, ["Verification failure"]);
    let valid = true;
    fake.overrides.push((q) => q.path === "/verify" ? { status: valid ? 200 : 422 } : undefined);
    const remote = await client(fake, [
      "verify",
      "--remote",
      "--key-label",
      "k",
      `${dir}/f`,
      `${dir}/f.sig`,
    ]);
    assert.equal(remote.code, 0, remote.err);
    const seen = fake.requests.find((q) => q.path === "/verify")!;
    assert.equal(seen.headers["x-svc-digest"], "ml-dsa-mu");
    assert.equal(seen.headers["x-svc-signature-length"], "3309");
    const mu = muHasher(key.publicKeyRaw);
    mu.update(message);
    assert.deepEqual(seen.body.subarray(3309), mu.digest());
    valid = false;
    const no = await client(fake, [
      "verify",
      "--remote",
      "--key-label",
      "k",
      `${dir}/f`,
      `${dir}/f.sig`,
    ]);
    assert.equal(no.code, 1);
  });
});

Deno.test("keys: labels, types and digest modes; --out-dir writes each public key as PEM", async () => {
  const ec = fakeKey("web", "ec-p256", ["sha-256", "sha-384", "sha-512"]);
  await withFake([ec, fakeKey("ed", "ed25519", [])], async (fake, dir) => {
    const r = await client(fake, ["keys", "--out-dir", dir]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out.join("\n"), /web\s+ec-p256\s+sha-256,sha-384,sha-512/);
    assert.match(r.out.join("\n"), /ed\s+ed25519\s+none \(message mode\)/);
    const pem = await Deno.readTextFile(`${dir}/web.pem`);
    const der = createPublicKey(pem).export({ format: "der", type: "spki" });
    assert.deepEqual(new Uint8Array(der), ec.publicKeySpki);
  });
});

Deno.test("settings: from the environment; HTTPS needs its files; plain HTTP needs --insecure-http", async () => {
  await withFake([fakeKey("k", "ec-p256", ["sha-256"])], async (fake) => {
    const fromEnv = await runClientCommand(["keys", "--insecure-http"], {
      print: () => {},
      env: { SVCD_ADDR: `unix:${fake.socket}` },
    });
    assert.equal(fromEnv, 0);
    const errors: string[] = [];
    const original = console.error;
    console.error = (m: string) => void errors.push(m);
    try {
      const cases: Array<[string[], Record<string, string>, RegExp]> = [
        [["keys"], {}, /no address: give --addr/],
        [["keys", "--addr", `unix:${fake.socket}`], {}, /--insecure-http allows plain HTTP/],
        [
          ["keys", "--addr", "https://h"],
          { SVCD_CACERT: "ca" },
          /--client-cert FILE \(or SVCD_CLIENT_CERT\)/,
        ],
        [["sign", "--addr", "https://h", "f"], {}, /--key-label L is required/],
        [["verify", "--key-label", "k", "f"], {}, /verify needs FILE and SIG/],
        [
          ["keys", "--retries", "x", "--addr", "https://h"],
          {},
          /--retries must be a whole number from 0 to 100 \(got 'x'\)/,
        ],
      ];
      for (const [args, env, message] of cases) {
        errors.length = 0;
        assert.equal(await runClientCommand(args, { env, print: () => {} }), 2, args.join(" "));
        assert.match(errors.join("\n"), message);
      }
      errors.length = 0;
      const missing = await runClientCommand(["keys", "--addr", "https://localhost:1"], {
        env: { SVCD_CACERT: "/nonexistent/ca.pem", SVCD_CLIENT_CERT: "c", SVCD_CLIENT_KEY: "k" },
        print: () => {},
      });
      assert.equal(missing, 1);
      assert.match(errors[0], /cannot read \/nonexistent\/ca.pem \(--ca-cert or SVCD_CACERT\)/);
    } finally {
      console.error = original;
    }
  });
});

Deno.test("--insecure-http takes a unix: socket only: http:// over TCP is a usage error, nothing sent", async () => {
  // A plain HTTP server on loopback: the client must not even connect to it.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  let connections = 0;
  const accepting = (async () => {
    for await (const conn of listener) {
      connections++;
      conn.close();
    }
  })();
  const errors: string[] = [];
  const original = console.error;
  console.error = (m: string) => void errors.push(m);
  try {
    const cases: Array<[string[], Record<string, string>]> = [
      [["keys", "--insecure-http", "--addr", `http://127.0.0.1:${port}`], {}],
      [["keys", "--insecure-http"], { SVCD_ADDR: `http://localhost:${port}/` }],
      [["keys", "--addr", `HTTP://127.0.0.1:${port}`], {}],
    ];
    for (const [args, env] of cases) {
      errors.length = 0;
      assert.equal(await runClientCommand(args, { env, print: () => {} }), 2, args.join(" "));
      assert.equal(errors.length, 1, errors.join("\n"));
      assert.match(errors[0], /is plain HTTP over TCP: reach svcd through its proxy/);
      assert.match(errors[0], /--addr https:\/\/HOST\[:PORT\] with a client certificate/);
      assert.match(errors[0], /--insecure-http takes only unix:\/PATH/);
    }
  } finally {
    console.error = original;
    listener.close();
    await accepting.catch(() => {});
  }
  assert.equal(connections, 0);
});

Deno.test("μ: ml_dsa.internal.sign over the client's μ is @noble's plain signature of the message", () => {
  for (const dsa of [ml_dsa44, ml_dsa65, ml_dsa87]) {
    const { secretKey, publicKey } = dsa.keygen();
    const message = crypto.getRandomValues(new Uint8Array(10000));
    const mu = muHasher(publicKey);
    // Fed in uneven pieces, as a file is read.
    mu.update(message.subarray(0, 1));
    mu.update(message.subarray(1, 4097));
    mu.update(message.subarray(4097));
    const sig = dsa.internal.sign(mu.digest(), secretKey, { externalMu: true });
    assert.ok(dsa.verify(sig, message, publicKey));
  }
});

Deno.test("RSA-PSS over a digest: node:crypto's signatures for SHA-256/384/512 verify, others not", async () => {
  const { generateKeyPairSync, sign } = await import("node:crypto");
  const pair = generateKeyPairSync("rsa", { modulusLength: 3072 });
  const spki = new Uint8Array(pair.publicKey.export({ format: "der", type: "spki" }));
  const message = new TextEncoder().encode("pss");
  for (const hash of ["sha256", "sha384", "sha512"] as const) {
    const sig = new Uint8Array(sign(hash, message, {
      key: pair.privateKey,
      padding: constants.RSA_PKCS1_PSS_PADDING,
      saltLength: constants.RSA_PSS_SALTLEN_DIGEST,
    }));
    const name = `sha-${hash.slice(3)}` as "sha-256" | "sha-384" | "sha-512";
    const digest = createHash(hash).update(message).digest();
    assert.ok(rsaPssVerify(spki, name, digest, sig), hash);
    const other = createHash(hash).update("other").digest();
    assert.ok(!rsaPssVerify(spki, name, other, sig));
    sig[10] ^= 1;
    assert.ok(!rsaPssVerify(spki, name, digest, sig));
  }
});

Deno.test("RSA PKCS #1 v1.5 over a digest: node:crypto's signatures for SHA-256/384/512 verify, others not", async () => {
  const { generateKeyPairSync, sign } = await import("node:crypto");
  const pair = generateKeyPairSync("rsa", { modulusLength: 3072 });
  const spki = new Uint8Array(pair.publicKey.export({ format: "der", type: "spki" }));
  const message = new TextEncoder().encode("pkcs1v15");
  const pss = new Uint8Array(sign("sha256", message, {
    key: pair.privateKey,
    padding: constants.RSA_PKCS1_PSS_PADDING,
  }));
  const sha256 = createHash("sha256").update(message).digest();
  assert.ok(!rsaPkcs1v15Verify(spki, "sha-256", sha256, pss), "a PSS signature");
  for (const hash of ["sha256", "sha384", "sha512"] as const) {
    const sig = new Uint8Array(sign(hash, message, {
      key: pair.privateKey,
      padding: constants.RSA_PKCS1_PADDING,
    }));
    const name = `sha-${hash.slice(3)}` as "sha-256" | "sha-384" | "sha-512";
    const digest = createHash(hash).update(message).digest();
    assert.ok(rsaPkcs1v15Verify(spki, name, digest, sig), hash);
    const other = createHash(hash).update("other").digest();
    assert.ok(!rsaPkcs1v15Verify(spki, name, other, sig));
    if (hash !== "sha256") assert.ok(!rsaPkcs1v15Verify(spki, "sha-256", sha256, sig));
    assert.ok(!rsaPkcs1v15Verify(spki, name, digest, sig.subarray(1)), "short");
    sig[10] ^= 1;
    assert.ok(!rsaPkcs1v15Verify(spki, name, digest, sig));
  }
});

Deno.test("ECDSA DER: round trip, minimal integers, high bits padded", () => {
  const raw = new Uint8Array(64);
  raw[0] = 0x80; // r needs a leading zero
  raw[63] = 1; // s is 1
  const der = ecdsaDer(raw);
  assert.equal(der.toHex(), "3026022100" + "80" + "00".repeat(31) + "020101");
  assert.deepEqual(ecdsaRaw(der, 32), raw);
  assert.equal(ecdsaRaw(der.subarray(0, der.length - 1), 32), undefined);
});

Deno.test("progress bar: redrawn as bytes arrive, ends at 100% with a newline", () => {
  let text = "";
  const p = terminalProgress("f", 1000, (t) => void (text += t));
  p.advance(500);
  p.advance(500);
  p.done();
  assert.match(text, /hashing f \[#{15} {15}\] {2}50%/);
  assert.match(text, /\[#{30}\] 100% .*\n$/);
});
