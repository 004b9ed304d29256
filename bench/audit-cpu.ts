/**
 * CPU per audit line with the real token key (SoftHSM2 `svc-audit`): 16 appenders in a closed loop
 * in this process, once with fdatasync replaced by nothing (the line, its chain and its share of
 * the token MAC alone) and once with fdatasync; with lines per group. Given checkouts of this
 * repository (NAME=DIR, each with node_modules), measures each one's lib/audit and lib/token in
 * turn, `--rounds` times interleaved: a before/after on a shared machine.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/audit-cpu.ts
 * node_modules/.bin/deno run -A bench/audit-cpu.ts before=/tmp/before after=. --rounds 3
 * ```
 */
import { benchArgs, count, valueOption } from "./_args.ts";
import { checkouts } from "./_checkouts.ts";
import { makeTestToken } from "../tests/support/token.ts";

const { values, positionals, exitWithUsage } = benchArgs({
  url: import.meta.url,
  measures: "CPU per audit line with the real token key (SoftHSM2 svc-audit): 16 appenders in a " +
    "closed loop in this process, with fdatasync replaced by nothing and with fdatasync, with " +
    "lines per group; for each checkout given, its lib/audit and lib/token in turn.",
  positionals: {
    value: "[NAME=DIR…]",
    help: "checkouts of this repository to measure in turn, each with node_modules " +
      "(default: this=.)",
  },
  options: {
    rounds: valueOption(count, "1", "rounds, interleaved"),
    lines: valueOption(count, "20000", "lines per measurement"),
  },
  examples: [
    "node_modules/.bin/deno run -A bench/audit-cpu.ts",
    "node_modules/.bin/deno run -A bench/audit-cpu.ts before=/tmp/before after=. --rounds 3",
  ],
});
const trees = checkouts(positionals.length > 0 ? positionals : ["this=."], exitWithUsage);
const FIELDS = {
  key: "k-ec",
  mechanism: "CKM_ECDSA",
  message_sha256: "ab".repeat(32),
  signature_sha256: "cd".repeat(32),
  request_id: "0123456789abcdef",
};

/** µs of CPU per line and lines per group for one checkout's audit log on the logged-in token. */
async function measure(
  dir: string,
  token: Awaited<ReturnType<typeof makeTestToken>>,
): Promise<string> {
  const { AuditLog, auditKeysFromToken } = await import(`${dir}/lib/audit/mod.ts`);
  const { Token } = await import(`${dir}/lib/token/mod.ts`);
  const t = Token.open({ modulePath: token.modulePath, tokenLabel: token.tokenLabel });
  await t.login(Token.readPinCredential(token.credentialsDir));
  const parts: string[] = [];
  try {
    for (const realSync of [false, true]) {
      const logDir = await Deno.makeTempDir({ prefix: "bench-audit-cpu-" });
      const log = await AuditLog.open({
        dir: logDir,
        keys: auditKeysFromToken(t),
        login: {},
        checkpointEvery: 1e9,
        ...(realSync ? {} : { sync: () => Promise.resolve() }),
      });
      const n = realSync ? Math.ceil(Number(values.lines) / 2) : Number(values.lines);
      let next = 0;
      const appender = async () => {
        while (next < n) {
          next++;
          await log.append("sign", "CN=bench3,O=Bench", FIELDS);
        }
      };
      await Promise.all(Array.from({ length: 16 }, appender)); // warm-up
      next = 0;
      const cpu0 = process.cpuUsage();
      const s0 = log.stats();
      await Promise.all(Array.from({ length: 16 }, appender));
      const cpu = process.cpuUsage(cpu0);
      const s1 = log.stats();
      const group = (s1.lines - s0.lines) / (s1.syncs - s0.syncs);
      parts.push(
        `${realSync ? "with fdatasync" : "no fdatasync"} ${
          ((cpu.user + cpu.system) / n).toFixed(1)
        } µs ` +
          `(${group.toFixed(1)} lines/group)`,
      );
      await log.close();
      await Deno.remove(logDir, { recursive: true });
    }
  } finally {
    t.close();
  }
  return parts.join(", ");
}

if (import.meta.main) {
  const token = await makeTestToken();
  try {
    for (const [name, value] of Object.entries(token.env)) Deno.env.set(name, value);
    console.log("CPU per audit line (this process, all threads), 16 appenders, token svc-audit");
    for (let round = 1; round <= Number(values.rounds); round++) {
      for (const { name, dir } of trees) {
        console.log(`  ${name.padEnd(10)} ${await measure(dir, token)}`);
      }
    }
  } finally {
    await token.cleanup();
  }
}
