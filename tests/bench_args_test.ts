/**
 * bench/_args.ts, the command line of every bench script: defaults, checks of given values,
 * positionals only where declared, `--help` winning over everything else, options passed on to
 * another command in their order, and a usage text that lists each option with its default.
 */
import assert from "node:assert/strict";
import {
  type Bench,
  type BenchOption,
  BenchUsageError,
  count,
  listOf,
  nonNegativeNumber,
  oneOf,
  parseBenchArgs,
  positiveNumber,
  usage,
  wholeNumber,
} from "../bench/_args.ts";

const BENCH = {
  url: "file:///repo/bench/example.ts",
  measures: "What the example measures.",
  options: {
    seconds: { type: "string", default: "3", check: positiveNumber, help: "seconds per figure" },
    rounds: { type: "string", default: "2", check: count, help: "rounds" },
    keys: {
      type: "string",
      default: "a,b",
      check: listOf(oneOf(["a", "b", "c"])),
      help: "key types",
    },
    c: { type: "string", multiple: true, default: ["1", "16"], check: count, help: "levels" },
    label: { type: "string", value: "LABEL", help: "a label" },
    quick: { type: "boolean", default: false, help: "fewer figures" },
  },
  examples: ["deno run -A bench/example.ts --rounds 3"],
} satisfies Bench<Record<string, BenchOption>>;

function problem(bench: Bench<Record<string, BenchOption>>, args: string[]): string {
  try {
    parseBenchArgs(bench, args);
  } catch (err) {
    assert.ok(err instanceof BenchUsageError, String(err));
    return err.message;
  }
  assert.fail(`${args.join(" ")} was taken`);
}

Deno.test("absent options take their defaults; given ones replace them", () => {
  const none = parseBenchArgs(BENCH, []);
  assert.equal(none.help, false);
  assert.deepEqual(none.values, {
    seconds: "3",
    rounds: "2",
    keys: "a,b",
    c: ["1", "16"],
    label: undefined,
    quick: false,
  });
  const given = parseBenchArgs(BENCH, ["--seconds=0.5", "--c", "64", "--quick", "--label", "x"]);
  assert.equal(given.values.seconds, "0.5");
  assert.deepEqual(given.values.c, ["64"]);
  assert.equal(given.values.quick, true);
  assert.equal(given.values.label, "x");
  // A default list is the script's own: parsing twice never shares one array.
  parseBenchArgs(BENCH, []).values.c.push("9");
  assert.deepEqual(parseBenchArgs(BENCH, []).values.c, ["1", "16"]);
});

Deno.test("--help and -h win over anything else on the line", () => {
  for (const args of [["--help"], ["-h"], ["--rounds", "0", "--help"], ["--no-such", "--help"]]) {
    assert.equal(parseBenchArgs(BENCH, args).help, true, args.join(" "));
  }
});

Deno.test("unknown options, missing values and stray arguments are usage errors", () => {
  assert.match(problem(BENCH, ["--no-such"]), /--no-such/);
  assert.match(problem(BENCH, ["--rounds"]), /--rounds/);
  assert.match(problem(BENCH, ["stray"]), /stray/);
  assert.match(problem(BENCH, ["--quick=yes"]), /--quick/);
});

Deno.test("every given value passes its option's check", () => {
  for (const bad of ["0", "-1", "1.5", "x", "", "1e3"]) {
    assert.match(problem(BENCH, [`--rounds=${bad}`]), /--rounds must be a whole number ≥ 1/, bad);
  }
  for (const bad of ["0", "-1", "abc", "", "."]) {
    assert.match(problem(BENCH, [`--seconds=${bad}`]), /--seconds must be a number > 0/, bad);
  }
  assert.match(problem(BENCH, ["--keys", "a,d"]), /--keys must be .* one of a, b, c, not 'a,d'/);
  assert.match(problem(BENCH, ["--keys", "a,,b"]), /--keys/);
  assert.match(
    problem(BENCH, ["--c", "16", "--c", "0"]),
    /--c must be a whole number ≥ 1, not '0'/,
  );
  for (const good of ["1", "16", "100000"]) assert.ok(count.ok(good), good);
  for (const good of ["0", "7"]) assert.ok(wholeNumber.ok(good), good);
  assert.equal(wholeNumber.ok("-1"), false);
  for (const good of ["0.5", "3", ".25"]) assert.ok(positiveNumber.ok(good), good);
  assert.ok(nonNegativeNumber.ok("0"));
  assert.equal(nonNegativeNumber.ok("-0.5"), false);
});

Deno.test("positionals are taken only by a bench that declares them", () => {
  const withPositionals = { ...BENCH, positionals: { value: "NAME=DIR…", help: "checkouts" } };
  const r = parseBenchArgs(withPositionals, ["a=.", "--rounds", "4", "b=/tmp"]);
  assert.deepEqual(r.positionals, ["a=.", "b=/tmp"]);
  assert.equal(r.values.rounds, "4");
});

Deno.test("passOn: the bench's own options come out, every other argument stays in order", () => {
  const serve = {
    url: "file:///repo/bench/serve.ts",
    measures: "A daemon.",
    options: {
      without: { type: "string", default: "", check: listOf(oneOf(["audit"])), help: "parts" },
      quick: { type: "boolean", default: false, help: "quick" },
    },
    passOn: "svcd serve",
    examples: [],
  } satisfies Bench<Record<string, BenchOption>>;
  const r = parseBenchArgs(serve, [
    "--socket",
    "/tmp/s.sock",
    "--without",
    "audit",
    "--workers=16",
    "--quick",
    "--threads",
    "2",
  ]);
  assert.equal(r.values.without, "audit");
  assert.equal(r.values.quick, true);
  assert.deepEqual(r.rest, ["--socket", "/tmp/s.sock", "--workers=16", "--threads", "2"]);
  assert.deepEqual(parseBenchArgs(serve, ["--without=audit", "--x"]).rest, ["--x"]);
  assert.match(problem(serve, ["--socket", "/s", "--without"]), /--without/);
  assert.match(problem(serve, ["--without", "budget"]), /--without must be .*audit/);
  assert.equal(parseBenchArgs(serve, ["--socket", "/s", "--help"]).help, true);
});

Deno.test("the usage names the script and lists each option, its default and its choices", () => {
  const text = usage(BENCH);
  assert.ok(text.includes("bench/example.ts"), text);
  assert.ok(text.includes("What the example measures."), text);
  for (const option of ["--seconds S", "--rounds N", "--keys NAME,…", "--label LABEL", "--help"]) {
    assert.ok(text.includes(option), `${option} missing:\n${text}`);
  }
  assert.match(text, /--rounds N +rounds \(default: 2\)/);
  assert.match(text, /--keys NAME,… +key types: a, b or c \(default: a,b\)/);
  assert.match(text, /--label LABEL +a label\n/, "no default shown for an option without one");
  assert.match(text, /--quick +fewer figures\n/, "no default shown for a switch");
  assert.ok(text.includes("deno run -A bench/example.ts --rounds 3"), text);
  for (const line of text.split("\n")) assert.ok(line.length <= 100, `too wide: ${line}`);
});
