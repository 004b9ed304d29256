/**
 * Cross-checks the test module's ML-DSA core (tests/module/src/mldsa.c, driven through
 * tests/module/build/mldsa_cli) against @noble/post-quantum for ML-DSA-44/65/87.
 */
import assert from "node:assert/strict";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { readSharedJson } from "../support/testdata.ts";

const CLI = new URL("./build/mldsa_cli", import.meta.url).pathname;
const LEVELS = [
  { level: 44, noble: ml_dsa44, pk: 1312, sig: 2420 },
  { level: 65, noble: ml_dsa65, pk: 1952, sig: 3309 },
  { level: 87, noble: ml_dsa87, pk: 2592, sig: 4627 },
] as const;
const ZERO_RND = new Uint8Array(32);

function hex(b: Uint8Array): string {
  return b.length === 0 ? "-" : b.toHex();
}

function random(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

/** Sends command lines to the C driver in one run and returns its answer lines. */
async function cli(lines: string[]): Promise<string[]> {
  try {
    await Deno.stat(CLI);
  } catch {
    throw new Error(`${CLI} is missing: build it with 'make -C tests/module'`);
  }
  const child = new Deno.Command(CLI, { stdin: "piped", stdout: "piped" }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(lines.join("\n") + "\n"));
  await writer.close();
  const out = await child.output();
  assert.equal(out.code, 0, "mldsa_cli exited non-zero");
  const answers = new TextDecoder().decode(out.stdout).trim().split("\n");
  assert.equal(answers.length, lines.length);
  for (const a of answers) assert.ok(!a.startsWith("error"), a);
  return answers;
}

function flip(b: Uint8Array, at: number): Uint8Array {
  const c = b.slice();
  c[at] ^= 0x01;
  return c;
}

const messages = [new Uint8Array(0), new Uint8Array([0x61]), random(1000)];
const contexts = [new Uint8Array(0), new Uint8Array([7]), random(255)];

for (const { level, noble, pk: pkLen, sig: sigLen } of LEVELS) {
  Deno.test(`ML-DSA-${level}: the same seed gives byte-identical keys to noble`, async () => {
    const seeds = [new Uint8Array(32), new Uint8Array(32).fill(0xff), random(32), random(32)];
    const answers = await cli(seeds.map((s) => `keygen ${level} ${hex(s)}`));
    seeds.forEach((seed, i) => {
      const [pk, sk] = answers[i].split(" ");
      const want = noble.keygen(seed);
      assert.equal(pk, want.publicKey.toHex());
      assert.equal(sk, want.secretKey.toHex());
      assert.equal(pk.length / 2, pkLen);
    });
  });

  Deno.test(`ML-DSA-${level}: deterministic signatures are byte-identical to noble's`, async () => {
    const { secretKey } = noble.keygen(random(32));
    const cases = messages.flatMap((m) => contexts.map((c) => ({ m, c })));
    const answers = await cli(
      cases.map(({ m, c }) =>
        `sign ${level} ${hex(secretKey)} ${hex(m)} ${hex(c)} ${hex(ZERO_RND)}`
      ),
    );
    cases.forEach(({ m, c }, i) => {
      const want = noble.sign(m, secretKey, { context: c, extraEntropy: false });
      assert.equal(answers[i].length / 2, sigLen);
      assert.equal(answers[i], want.toHex());
    });
  });

  Deno.test(`ML-DSA-${level}: each side verifies the other's hedged signatures`, async () => {
    const { publicKey, secretKey } = noble.keygen(random(32));
    const m = random(77), c = random(13);
    // Ours, hedged with fresh randomness: two signatures of one message differ, noble accepts both.
    const ours = await cli([
      `sign ${level} ${hex(secretKey)} ${hex(m)} ${hex(c)} ${hex(random(32))}`,
      `sign ${level} ${hex(secretKey)} ${hex(m)} ${hex(c)} ${hex(random(32))}`,
    ]);
    assert.notEqual(ours[0], ours[1]);
    for (const s of ours) {
      assert.ok(noble.verify(Uint8Array.fromHex(s), m, publicKey, { context: c }));
    }
    const theirs = noble.sign(m, secretKey, { context: c });
    const verdict = await cli([
      `verify ${level} ${hex(publicKey)} ${hex(m)} ${hex(c)} ${hex(theirs)}`,
    ]);
    assert.deepEqual(verdict, ["1"]);
  });

  Deno.test(`ML-DSA-${level}: a changed byte in message, context or signature fails`, async () => {
    const { publicKey, secretKey } = noble.keygen(random(32));
    const m = random(64), c = random(9);
    const sig = noble.sign(m, secretKey, { context: c });
    // Positions: challenge hash, z, the hint indices and the hint counters at the very end.
    const positions = [0, 40, 1000, sigLen - 30, sigLen - 1];
    const tampered: [Uint8Array, Uint8Array, Uint8Array][] = [
      [flip(m, 5), c, sig],
      [m, flip(c, 0), sig],
      [m, new Uint8Array(0), sig],
      ...positions.map((at): [Uint8Array, Uint8Array, Uint8Array] => [m, c, flip(sig, at)]),
      [m, c, sig.subarray(0, sigLen - 1)],
    ];
    const answers = await cli([
      `verify ${level} ${hex(publicKey)} ${hex(m)} ${hex(c)} ${hex(sig)}`,
      ...tampered.map(([tm, tc, ts]) =>
        `verify ${level} ${hex(publicKey)} ${hex(tm)} ${hex(tc)} ${hex(ts)}`
      ),
    ]);
    assert.deepEqual(answers, ["1", ...tampered.map(() => "0")]);
    for (const [tm, tc, ts] of tampered) {
      assert.equal(noble.verify(ts, tm, publicKey, { context: tc }), false);
    }
  });
}

Deno.test("ML-DSA: a context over 255 bytes is refused, 255 is accepted", async () => {
  const { secretKey } = ml_dsa44.keygen(random(32));
  const child = new Deno.Command(CLI, { stdin: "piped", stdout: "piped" }).spawn();
  const w = child.stdin.getWriter();
  const line = (n: number) => `sign 44 ${hex(secretKey)} 00 ${hex(random(n))} ${hex(ZERO_RND)}\n`;
  await w.write(new TextEncoder().encode(line(256) + line(255)));
  await w.close();
  const [refused, accepted] = new TextDecoder().decode((await child.output()).stdout).split("\n");
  assert.equal(refused, "error: context longer than 255 bytes");
  assert.equal(accepted.length, 2420 * 2);
});

Deno.test("ML-DSA-65: the composite draft's ML-DSA-65 vector (seed → pk, both signatures)", async () => {
  const data = await readSharedJson<
    {
      m: string;
      ctx: string;
      tests: Array<{ tcId: string; pk: string; sk: string; s: string; sWithContext: string }>;
    }
  >("composite-sigs-draft19.json");
  const v = data.tests.find((t) => t.tcId === "id-ML-DSA-65")!;
  const b64 = (s: string) => Uint8Array.fromBase64(s);
  const [m, c, pk] = [b64(data.m), b64(data.ctx), b64(v.pk)];
  const answers = await cli([
    `keygen 65 ${hex(b64(v.sk))}`,
    `verify 65 ${hex(pk)} ${hex(m)} - ${hex(b64(v.s))}`,
    `verify 65 ${hex(pk)} ${hex(m)} ${hex(c)} ${hex(b64(v.sWithContext))}`,
    `verify 65 ${hex(pk)} ${hex(m)} - ${hex(b64(v.sWithContext))}`,
  ]);
  assert.equal(answers[0].split(" ")[0], pk.toHex());
  assert.deepEqual(answers.slice(1), ["1", "1", "0"]);
});
