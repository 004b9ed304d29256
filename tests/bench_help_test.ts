/**
 * Every bench script answers `--help` with its usage and exit 0, and an unknown option with what
 * was wrong, the same usage and exit 2, before it starts any work. The scripts are found by listing
 * bench/, so a new entry script (any bench/*.ts not marked `_` as a module for others) fails here
 * until it parses its command line through bench/_args.ts.
 */
import assert from "node:assert/strict";

const BENCH = new URL("../bench/", import.meta.url).pathname;
/** A bench that ignored `--help` would start measuring: it fails here instead of running on. */
const DEADLINE_MS = 60_000;

/** bench/*.ts meant to be run: not a test, not a module marked `_` for other scripts. */
function entryScripts(): string[] {
  return [...Deno.readDirSync(BENCH)]
    .filter((e) => e.isFile && e.name.endsWith(".ts"))
    .map((e) => e.name)
    .filter((name) => !name.startsWith("_") && !name.endsWith("_test.ts"))
    .sort();
}

/** `deno run -A bench/<script> args…`, killed at the deadline. */
async function runBench(script: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${BENCH}${script}`, ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(DEADLINE_MS),
  }).output();
  const decoder = new TextDecoder();
  return {
    code: out.code,
    signal: out.signal,
    stdout: decoder.decode(out.stdout),
    stderr: decoder.decode(out.stderr),
  };
}

Deno.test("bench/ has entry scripts to check", () => {
  assert.ok(entryScripts().length >= 10, `only ${entryScripts().join(", ")}`);
});

for (const script of entryScripts()) {
  Deno.test(`bench/${script}: --help prints its usage and exits 0, an unknown option exits 2`, async () => {
    const source = Deno.readTextFileSync(`${BENCH}${script}`);
    assert.match(source, /from "\.\/_args\.ts"/, `${script} does not parse through ./_args.ts`);

    const help = await runBench(script, ["--help"]);
    assert.equal(help.signal, null, `${script} --help still ran at the deadline: ${help.stderr}`);
    assert.equal(help.code, 0, `${script} --help: ${help.stderr}`);
    assert.equal(help.stderr, "", `${script} --help wrote to stderr`);
    assert.ok(
      help.stdout.includes(`bench/${script}`),
      `the usage names the script:\n${help.stdout}`,
    );
    assert.ok(help.stdout.includes("--help"), `the usage lists --help:\n${help.stdout}`);

    const wrong = await runBench(script, ["--no-such-option"]);
    assert.equal(wrong.signal, null, `${script} --no-such-option still ran at the deadline`);
    assert.equal(wrong.code, 2, `${script} --no-such-option: ${wrong.stdout}${wrong.stderr}`);
    assert.ok(wrong.stderr.includes("--no-such-option"), `says what was wrong:\n${wrong.stderr}`);
    assert.ok(
      wrong.stderr.includes(help.stdout.trim()),
      `the error ends with the usage --help prints:\n${wrong.stderr}`,
    );
  });
}

Deno.test("a bad value: what was wrong and the usage, exit 2, nothing started", async () => {
  const r = await runBench("hold-timer.ts", ["--calls", "0"]);
  assert.equal(r.code, 2, r.stdout + r.stderr);
  assert.match(r.stderr, /--calls/);
  assert.match(r.stderr, /'0'/);
  assert.ok(r.stderr.includes("bench/hold-timer.ts"), r.stderr);
  assert.equal(r.stdout, "", "the bench printed figures: it ran");
});
