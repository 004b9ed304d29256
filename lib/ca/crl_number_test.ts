import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { runCommand, withTempUser } from "../../tests/support/command.ts";
import { denoAnyUserCanRun } from "../../tests/support/any_user.ts";
import { advanceCrlNumber, CrlNumberError } from "./crl_number.ts";

const MODULE = new URL("./crl_number.ts", import.meta.url).href;

/**
 * A process of its own taking `count` numbers from the counter, one after the other, once told to
 * go (a line on stdin, so that two such processes start together); prints them, space-separated.
 */
/** The taker's script, importing the counter's module from `module`. */
const takerScript = (module: string) => `
import { advanceCrlNumber } from ${JSON.stringify(module)};
const path = Deno.env.get("COUNTER"), lock = Deno.env.get("LOCK");
const count = Number(Deno.env.get("COUNT")), atLeast = BigInt(Deno.env.get("AT_LEAST"));
console.log("ready");
await Deno.stdin.read(new Uint8Array(8));
const taken = [];
for (let i = 0; i < count; i++) taken.push(await advanceCrlNumber(path, lock, atLeast));
console.log(taken.join(" "));
`;

interface Taker {
  /** Resolves once the process waits for its go. */
  ready: Promise<void>;
  go(): Promise<void>;
  /** The numbers it took, in order. */
  taken: Promise<bigint[]>;
}

function startTaker(env: Record<string, string>): Taker {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["eval", takerScript(MODULE)],
    env: { ...env, NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  const readLine = async () => {
    while (!text.includes("\n")) {
      const { value, done } = await lines.read();
      if (done) throw new Error(`taker ended early: ${text}`);
      text += value;
    }
    const at = text.indexOf("\n");
    const line = text.slice(0, at);
    text = text.slice(at + 1);
    return line;
  };
  const stderr = new Response(child.stderr).text();
  return {
    ready: readLine().then((line) => assert.equal(line, "ready")),
    go: async () => {
      const writer = child.stdin.getWriter();
      await writer.write(new TextEncoder().encode("go\n"));
      await writer.close();
    },
    taken: (async () => {
      const line = await readLine().catch(async (err) => {
        throw new Error(`${err.message}\n${await stderr}`);
      });
      const status = await child.status;
      assert.equal(status.code, 0, await stderr);
      return line.split(" ").map(BigInt);
    })(),
  };
}

async function counterValue(path: string): Promise<string> {
  return (await Deno.readTextFile(path)).trim();
}

Deno.test("crl number: a new counter starts at the larger of 1 and the time given; the next is stored in openssl's hex", async () => {
  const dir = moduleTempDir("svcd-crlnumber-");
  const counter = `${dir}/crlnumber`, lock = `${dir}/.lock`;
  assert.equal(await advanceCrlNumber(counter, lock, 0n), 1n);
  assert.equal(await counterValue(counter), "02");
  assert.equal(await advanceCrlNumber(counter, lock, 0n), 2n);
  assert.equal(await counterValue(counter), "03");
  // A time ahead of the counter wins, and the counter follows it.
  const ms = 1767225600000n;
  assert.equal(await advanceCrlNumber(counter, lock, ms), ms);
  assert.equal(await counterValue(counter), (ms + 1n).toString(16).toUpperCase().padStart(12, "0"));
  // A counter ahead of the time (openssl ca -gencrl, another node) wins.
  await Deno.writeTextFile(counter, "FFFFFFFFFFFF\n");
  assert.equal(await advanceCrlNumber(counter, lock, ms), 0xffffffffffffn);
  assert.equal(await counterValue(counter), "01000000000000");
  // openssl's lower-case and odd-length forms are read too.
  await Deno.writeTextFile(counter, "abc");
  assert.equal(await advanceCrlNumber(counter, lock, 1n), 0xabcn);
  assert.equal(await counterValue(counter), "0ABD");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("crl number: a counter that holds no number is refused and left as it was", async () => {
  const dir = moduleTempDir("svcd-crlnumber-");
  const counter = `${dir}/crlnumber`, lock = `${dir}/.lock`;
  for (const bad of ["", "12 34\n", "0x12\n", "G1\n", "1".repeat(41) + "\n"]) {
    await Deno.writeTextFile(counter, bad);
    await assert.rejects(advanceCrlNumber(counter, lock, 5n), CrlNumberError, JSON.stringify(bad));
    assert.equal(await Deno.readTextFile(counter), bad);
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test("crl number: two processes sharing the counter never take the same number, and each takes larger ones", async () => {
  const dir = moduleTempDir("svcd-crlnumber-");
  const count = 150;
  const env = { COUNTER: `${dir}/crlnumber`, LOCK: `${dir}/.lock`, COUNT: String(count) };
  // The counter alone orders them (a time of 1 never wins), and the time too (every process
  // asks for at least the same time, so only the counter keeps their numbers apart).
  for (const atLeast of ["1", String(Date.now())]) {
    const takers = [
      startTaker({ ...env, AT_LEAST: atLeast }),
      startTaker({ ...env, AT_LEAST: atLeast }),
    ];
    await Promise.all(takers.map((t) => t.ready));
    await Promise.all(takers.map((t) => t.go()));
    const [a, b] = await Promise.all(takers.map((t) => t.taken));
    for (const taken of [a, b]) {
      assert.equal(taken.length, count);
      for (let i = 1; i < taken.length; i++) {
        assert.ok(taken[i] > taken[i - 1], `${taken[i]} after ${taken[i - 1]}`);
      }
    }
    const all = [...a, ...b];
    assert.equal(new Set(all).size, 2 * count, "a number was taken twice");
    // They did take turns: each took numbers between two of the other's.
    const [minA, maxA, minB, maxB] = [a[0], a.at(-1)!, b[0], b.at(-1)!];
    assert.ok(minA < maxB && minB < maxA, "the two processes never ran at the same time");
    const max = all.reduce((x, y) => (x > y ? x : y));
    assert.equal(BigInt("0x" + await counterValue(env.COUNTER)), max + 1n);
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test({
  name:
    "crl number: a user who may write the counter but not its folder (root's) advances it in place",
  ignore: Deno.uid() !== 0,
  fn: () =>
    withTempUser("svcd-n", "svcd-crlnumber-runas-", async ({ uid }, dir) => {
      await Deno.chmod(dir, 0o755);
      const folder = `${dir}/ca`;
      await Deno.mkdir(folder, { mode: 0o755 });
      const counter = `${folder}/crlnumber`, lock = `${folder}/.crlnumber.lock`;
      await Deno.writeTextFile(counter, "10\n");
      (await Deno.open(lock, { write: true, create: true })).close();
      for (const path of [counter, lock]) {
        await Deno.chown(path, 0, uid);
        await Deno.chmod(path, 0o664);
      }
      const denoDir = `${dir}/deno`;
      await Deno.mkdir(denoDir);
      await Deno.chown(denoDir, uid, null);
      // The user may not read this checkout (a clone in a 0700 temp folder, as CI makes): the
      // taker runs Deno from a folder it can read and imports a copy of the counter's module and
      // its one import from there.
      const deno = denoAnyUserCanRun(dir);
      const source = `${dir}/source`;
      await Deno.mkdir(source, { mode: 0o755 });
      for (const file of ["crl_number.ts", "atomic.ts"]) {
        await Deno.copyFile(new URL(`./${file}`, import.meta.url), `${source}/${file}`);
        await Deno.chmod(`${source}/${file}`, 0o644);
      }
      // The taker as that user, with its own Deno cache; stdin closed, so it goes at once.
      const takeAsUser = (count: number) =>
        runCommand("setpriv", [
          `--reuid=${uid}`,
          `--regid=${uid}`,
          "--clear-groups",
          "env",
          `DENO_DIR=${denoDir}`,
          `COUNTER=${counter}`,
          `LOCK=${lock}`,
          `COUNT=${count}`,
          "AT_LEAST=1",
          deno,
          "eval",
          takerScript(new URL(`file://${source}/crl_number.ts`).href),
        ]);
      const taker = await takeAsUser(2);
      assert.equal(taker.code, 0, taker.text);
      assert.deepEqual(taker.stdout.trim().split("\n"), ["ready", "16 17"]);
      assert.equal(await counterValue(counter), "12");
      const info = await Deno.stat(counter);
      assert.equal(info.uid, 0, "the counter is still root's: it was rewritten, not replaced");
      assert.equal(info.gid, uid);
      // Where it may write neither, it takes nothing (the daemon then counts in its own folder).
      await Deno.chmod(counter, 0o644);
      const refused = await takeAsUser(1);
      assert.notEqual(refused.code, 0, refused.text);
      assert.equal(await counterValue(counter), "12");
    }),
});
