/**
 * Instructions per audit line with the real token key (SoftHSM2 `svc-audit`), counted by valgrind
 * (callgrind, every thread, user space), for machines where `perf stat` has no hardware counters
 * (a VM without a PMU). 16 appenders in a closed loop, as the daemon's requests at c=16; the count
 * is the difference between a long and a short run, so start-up and JIT warm-up cancel out.
 * Also prints fdatasyncs and seals (token MACs) per line.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/audit-instructions.ts            # 2000 and 6000 lines
 * node_modules/.bin/deno run -A bench/audit-instructions.ts --short 1000 --long 3000
 * ```
 */
import { benchArgs, count, valueOption } from "./_args.ts";
import { auditKeysFromToken, AuditLog } from "../lib/audit/mod.ts";
import { Token } from "../lib/token/mod.ts";
import { makeTestToken } from "../tests/support/token.ts";

const { values, exitWithUsage } = benchArgs({
  url: import.meta.url,
  measures: "Instructions per audit line with the real token key (SoftHSM2 svc-audit), counted " +
    "by valgrind (callgrind, every thread, user space) as the difference between a long and a " +
    "short run of 16 appenders; also fdatasyncs and seals (token MACs) per line.",
  options: {
    short: valueOption(count, "2000", "lines of the short run"),
    long: valueOption(count, "6000", "lines of the long run"),
    lines: {
      type: "string",
      check: count,
      help: "one measured run of N lines (what the bench runs inside valgrind, with --module, " +
        "--token and --plain-credential-dir)",
    },
    module: { type: "string", value: "PATH", help: "the PKCS#11 module of a measured run" },
    token: { type: "string", value: "LABEL", help: "the token label of a measured run" },
    "plain-credential-dir": {
      type: "string",
      value: "DIR",
      help: "the folder with svc-pin of a measured run",
    },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/audit-instructions.ts",
    "node_modules/.bin/deno run -A bench/audit-instructions.ts --short 1000 --long 3000",
  ],
});
if (Number(values.long) <= Number(values.short)) {
  exitWithUsage("--long must be more lines than --short: the count is their difference");
}
if (values.lines && !(values.module && values.token && values["plain-credential-dir"])) {
  exitWithUsage("--lines needs --module, --token and --plain-credential-dir");
}

const FIELDS = {
  key: "k-ec",
  mechanism: "CKM_ECDSA",
  message_sha256: "ab".repeat(32),
  signature_sha256: "cd".repeat(32),
};

/** Appends `lines` lines with 16 appenders; prints the log's counters as JSON. */
async function appendLines(lines: number): Promise<void> {
  const token = Token.open({ modulePath: values.module!, tokenLabel: values.token! });
  await token.login(Token.readPinCredential(values["plain-credential-dir"]!));
  const dir = await Deno.makeTempDir({ prefix: "bench-audit-instr-" });
  const log = await AuditLog.open({ dir, keys: auditKeysFromToken(token), login: {} });
  let next = 0;
  const worker = async () => {
    while (next < lines) {
      const id = next++;
      await log.append("sign", "CN=bench,O=Example", { ...FIELDS, request_id: `r${id}` });
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  const stats = log.stats() as { lines: number; syncs: number; seals?: number };
  await log.close();
  token.close();
  await Deno.remove(dir, { recursive: true });
  console.log(JSON.stringify(stats));
}

/** Runs one measured run under callgrind; its instruction count and counters. */
async function countedRun(
  lines: number,
  token: {
    modulePath: string;
    tokenLabel: string;
    credentialsDir: string;
    env: Record<string, string>;
  },
): Promise<{ instructions: number; syncs: number; seals?: number }> {
  const out = await new Deno.Command("valgrind", {
    args: [
      "--tool=callgrind",
      "--smc-check=all-non-file",
      "--callgrind-out-file=/dev/null",
      Deno.execPath(),
      "run",
      "-A",
      import.meta.filename!,
      "--lines",
      String(lines),
      "--module",
      token.modulePath,
      "--token",
      token.tokenLabel,
      "--plain-credential-dir",
      token.credentialsDir,
    ],
    env: token.env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const err = new TextDecoder().decode(out.stderr);
  const collected = /Collected : (\d+)/.exec(err);
  if (!out.success || !collected) throw new Error(`the run under valgrind failed:\n${err}`);
  const stats = JSON.parse(new TextDecoder().decode(out.stdout).trim().split("\n").at(-1)!);
  return { instructions: Number(collected[1]), syncs: stats.syncs, seals: stats.seals };
}

if (import.meta.main) {
  if (values.lines) {
    await appendLines(Number(values.lines));
  } else {
    const short = Number(values.short);
    const long = Number(values.long);
    const token = await makeTestToken();
    try {
      console.log(`audit lines under callgrind: ${short} and ${long} lines, 16 appenders`);
      const a = await countedRun(short, token);
      const b = await countedRun(long, token);
      const n = long - short;
      const perLine = (b.instructions - a.instructions) / n;
      const seals = a.seals === undefined
        ? "one MAC per line"
        : `${((b.seals! - a.seals!) / n).toFixed(3)} seals/line`;
      console.log(
        `${(perLine / 1000).toFixed(1)} k instructions per line (all threads, user space); ` +
          `${((b.syncs - a.syncs) / n).toFixed(3)} fdatasync/line; ${seals}`,
      );
    } finally {
      await token.cleanup();
    }
  }
}
