/**
 * One run, one key (ECDSA P-256 on SoftHSM2), three ways to sign with it, as ratios:
 *
 * - raw C_Sign: the binding (Token.sign, 16 in flight: both cores) and a C loop on 2 threads
 *   (bench/p11load.c); the CPU of one C_SignInit + C_Sign from the C loop on one thread;
 * - p11-kit remote: `p11-kit server` (Debian's p11-kit) in front of SoftHSM2 and a C load of 16
 *   threads through p11-kit-client.so (no HTTP, no policy, no audit);
 * - svcd /sign at c=16 with 16 identities, one connection per request, audit on and off
 *   (bench/serve.ts), with the daemon's CPU per request from /proc; loaded by bench/httpload.c
 *   (C, one epoll thread), as p11-kit is by a C client: a JavaScript client would take a core's
 *   worth of the two from the daemon;
 * - the same with audit on for each `--threads` of `--threads-list` (0: the main thread serves the
 *   socket; N: N request Workers, the main thread keeps budget, cap and audit), each with its CPU
 *   per request per thread: the busiest thread's µs per request bounds the rate at 1e6 ÷ that
 *   however many cores there are. With `--taskset`, each also pinned to one core (`taskset -c 0`)
 *   and to two (`-c 0,1`), the load generator unpinned. `--svcd-only` runs only these;
 * - the audit's cost, step by step (bench/serve.ts `--audit-stand-in`): audit off; answers that
 *   wait for a later turn with no log at all (`next-turn`); the real log on a disk that syncs at
 *   once (`instant-disk`); audit on. `--audit-ladder` runs only these.
 *
 * Targets: svcd ≥ 1.5 × p11-kit remote; audit on ≥ 0.85 × audit off; daemon CPU per
 * /sign ≤ 3 × the CPU of one raw C_Sign. The parts run `--rounds` times, interleaved, and the
 * medians are compared, since other work on a shared machine moves every rate.
 *
 * Needs gcc and libp11-kit-dev (to build the C load) and p11-kit + p11-kit-modules (Makefile
 * APT_PACKAGES).
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/compare.ts
 * node_modules/.bin/deno run -A bench/compare.ts --seconds 5 --rounds 3
 * ```
 */
import { benchArgs, count, listOf, positiveNumber, valueOption, wholeNumber } from "./_args.ts";
import { measureRawSign } from "./raw-sign.ts";
import { buildCLoad, type CLoad, P11KIT_CLIENT, startP11KitServer } from "./_p11kit.ts";
import { buildHttpload, runSignLoad } from "./_httpload.ts";
import { contextSwitches, daemonCpu, threadCpu } from "./_proc_cpu.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import {
  makeTestToken,
  openTestToken,
  type TestToken,
  testTokenPin,
} from "../tests/support/token.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "One key (ECDSA P-256 on SoftHSM2), three ways to sign with it, as ratios: raw " +
    "C_Sign (the binding and a C loop), p11-kit remote (p11-kit server and a C load of 16 " +
    "threads), and svcd /sign at c=16 with 16 identities (C load), audit on and off, by " +
    "--threads, and the audit's cost step by step; medians of interleaved rounds.",
  options: {
    seconds: valueOption(positiveNumber, "4", "seconds per figure"),
    rounds: valueOption(count, "2", "rounds, interleaved"),
    "threads-list": {
      type: "string",
      default: "0,1,2",
      check: listOf(wholeNumber),
      help: "the --threads of svcd serve to measure; 0: the main thread serves the socket",
    },
    taskset: {
      type: "boolean",
      default: false,
      help: "also pin each --threads variant to one core and to two (the load unpinned)",
    },
    "svcd-only": { type: "boolean", default: false, help: "only the --threads variants" },
    "audit-ladder": {
      type: "boolean",
      default: false,
      help: "only the audit's cost, step by step",
    },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/compare.ts",
    "node_modules/.bin/deno run -A bench/compare.ts --seconds 5 --rounds 3",
  ],
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const threadsList = values["threads-list"].split(",").map(Number);
const pinnings: (string | undefined)[] = values.taskset ? ["0", "0,1"] : [undefined];
const KEY = "k-ec";
const CLIENTS = 16;
const SERVE = new URL("./serve.ts", import.meta.url).pathname;

async function cLoad(
  binary: string,
  module: string,
  token: TestToken,
  threads: number,
  extra: { env?: Record<string, string>; copy?: boolean } = {},
): Promise<CLoad> {
  const out = await new Deno.Command(binary, {
    args: [
      module,
      token.tokenLabel,
      `${token.credentialsDir}/svc-pin`,
      KEY,
      String(threads),
      String(seconds),
      "0",
      extra.copy ? "copy" : "token",
    ],
    env: { ...token.env, ...extra.env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`p11load failed: ${new TextDecoder().decode(out.stderr)}`);
  }
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** One daemon variant's figures: req/s and CPU µs per request, in all and per thread. */
interface SvcdFigures {
  perSecond: number;
  cpuUs: number;
  mainUs: number;
  /** µs per request by thread name (bench/_proc_cpu.ts threadCpu). */
  threadUs: Map<string, number>;
  /** Context switches per request, all threads. */
  switches: number;
  errors: number;
  /** Keys the daemon moved to the thread pool during the run (--inline-sign-limit-us). */
  pooled: string[];
}

/** The C load generator and the message it sends. */
interface SignLoad {
  httpload: string;
  bodyFile: string;
}

/**
 * /sign req/s and daemon CPU µs per request at c=16, 16 identities, for one daemon variant:
 * bench/serve.ts's own options (`--without`, `--audit-stand-in`), `--threads` (undefined: the
 * default), pinned to `cpus`.
 */
async function svcd(
  token: TestToken,
  policy: string,
  benchOptions: string[],
  load: SignLoad,
  threads?: number,
  cpus?: string,
): Promise<SvcdFigures> {
  const script = [SERVE, ...benchOptions];
  const daemon = await startDaemon({
    token,
    policy,
    ...(cpus === undefined
      ? { entry: script }
      : { command: ["taskset", "-c", cpus, Deno.execPath(), "run", "-A", ...script] }),
    args: [
      "--workers",
      String(CLIENTS),
      ...(threads === undefined ? [] : ["--threads", String(threads)]),
    ],
  });
  try {
    const signLoad = (secs: number) =>
      runSignLoad(load.httpload, {
        unix: daemon.socket,
        bodyFile: load.bodyFile,
        key: KEY,
        clients: CLIENTS,
        seconds: secs,
      });
    await signLoad(0.5);
    const before = await daemonCpu(daemon.pid);
    const threadsBefore = await threadCpu(daemon.pid);
    const switchesBefore = await contextSwitches(daemon.pid);
    const measured = await signLoad(seconds);
    const after = await daemonCpu(daemon.pid);
    const threadsAfter = await threadCpu(daemon.pid);
    const switches = (await contextSwitches(daemon.pid) - switchesBefore) / measured.requests;
    const n = measured.requests;
    const threadUs = new Map(
      [...threadsAfter].map(([name, s]) => [name, (s - (threadsBefore.get(name) ?? 0)) * 1e6 / n]),
    );
    return {
      perSecond: measured.perSecond,
      cpuUs: (after.all - before.all) * 1e6 / n,
      mainUs: (after.main - before.main) * 1e6 / n,
      threadUs,
      switches,
      errors: measured.errors,
      // A set: with --threads N each Worker's token moves the key and says so.
      pooled: [
        ...new Set(
          [...daemon.stderr().matchAll(/keys: (.+?) signs on the thread pool/g)].map((m) => m[1]),
        ),
      ],
    };
  } finally {
    await daemon.stop();
  }
}

/** ", k moved to the thread pool" when the daemon moved keys there during the run, else "". */
function pooledNote(f: SvcdFigures): string {
  return f.pooled.length > 0 ? `, ${f.pooled.join(" and ")} moved to the thread pool` : "";
}

/** The name of a `--threads` variant, pinned or not. */
function variantName(threads: number, cpus: string | undefined): string {
  const t = threads === 0 ? "threads 0 (main thread serves)" : `threads ${threads}`;
  return cpus === undefined ? t : `${t}, taskset -c ${cpus}`;
}

/** Runs every `--threads` variant once, files its figures under `add`; one line each. */
async function threadVariants(
  token: TestToken,
  policy: string,
  load: SignLoad,
  add: (name: string, x: number) => void,
): Promise<string[]> {
  const lines: string[] = [];
  for (const cpus of pinnings) {
    for (const threads of threadsList) {
      const name = variantName(threads, cpus);
      const f = await svcd(token, policy, [], load, threads, cpus);
      add(`${name} /s`, f.perSecond);
      add(`${name} CPU µs/req`, f.cpuUs);
      add(`${name} errors`, f.errors);
      const workers = [...f.threadUs].filter(([n]) => n.startsWith("worker-")).map(([, us]) => us);
      add(`${name} main µs/req`, f.threadUs.get("main") ?? 0);
      add(`${name} busiest Worker µs/req`, workers.length ? Math.max(...workers) : 0);
      add(`${name} Workers µs/req`, workers.reduce((a, b) => a + b, 0));
      add(`${name} pool µs/req`, f.threadUs.get("tokio-runtime-w") ?? 0);
      add(`${name} V8 helpers µs/req`, f.threadUs.get("V8 DefaultWorke") ?? 0);
      add(`${name} switches/req`, f.switches);
      const perThread = [...f.threadUs].filter(([, us]) => us >= 1)
        .map(([n, us]) => `${n} ${f0(us)}`).join(", ");
      lines.push(
        `${name}: ${f0(f.perSecond)}/s, ${f0(f.cpuUs)} µs CPU/req (${perThread})` +
          (f.errors > 0 ? `, ${f.errors} errors` : "") + pooledNote(f),
      );
    }
  }
  return lines;
}

/** The medians of the `--threads` variants, one line each. */
function threadSummary(m: (name: string) => number): string[] {
  const col = (x: number, w = 5) => f0(x).padStart(w);
  const lines = [
    "svcd /sign c=16, 16 identities, audit on, by --threads (µs of CPU per request, medians):",
    `  ${"variant".padEnd(46)} ${"req/s".padStart(6)} ${"all".padStart(5)} ${"main".padStart(5)} ` +
    `${"max W".padStart(5)} ${"Ws".padStart(5)} ${"pool".padStart(5)} ${"V8".padStart(4)} ` +
    `${"cs".padStart(4)}  bound`,
  ];
  for (const cpus of pinnings) {
    for (const threads of threadsList) {
      const name = variantName(threads, cpus);
      const busiest = Math.max(m(`${name} main µs/req`), m(`${name} busiest Worker µs/req`));
      lines.push(
        `  ${name.padEnd(46)} ${col(m(`${name} /s`), 6)} ${col(m(`${name} CPU µs/req`))} ` +
          `${col(m(`${name} main µs/req`))} ${col(m(`${name} busiest Worker µs/req`))} ` +
          `${col(m(`${name} Workers µs/req`))} ${col(m(`${name} pool µs/req`))} ` +
          `${col(m(`${name} V8 helpers µs/req`), 4)} ${
            m(`${name} switches/req`).toFixed(1).padStart(4)
          }` +
          `  ${f0(1e6 / busiest)}/s`,
      );
    }
  }
  lines.push(
    "  (max W: the busiest Worker thread; Ws: all Worker threads; cs: context switches per " +
      "request, all threads; bound: 1e6 ÷ the busiest thread's µs, the rate no number of cores " +
      "lifts)",
  );
  return lines;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const f0 = (x: number) => x.toFixed(0);
const f2 = (x: number) => x.toFixed(2);

/** The steps of the audit's cost: bench/serve.ts options of each, from none of it to all of it. */
const AUDIT_STEPS: [name: string, benchOptions: string[]][] = [
  ["audit off", ["--without", "audit"]],
  ["next turn, no log", ["--audit-stand-in", "next-turn"]],
  ["log, instant disk", ["--audit-stand-in", "instant-disk"]],
  ["audit on", []],
];

/**
 * One round of the audit steps; adds `svcd <step> /s`, `… CPU µs/req`, `… main µs/req` and
 * `… switches/req`. The round's line ({@link auditStepLine}) names the keys each step pooled.
 */
async function auditSteps(
  token: TestToken,
  policy: string,
  load: SignLoad,
  add: (name: string, x: number) => void,
): Promise<Map<string, SvcdFigures>> {
  const figures = new Map<string, SvcdFigures>();
  for (const [name, benchOptions] of AUDIT_STEPS) {
    const f = await svcd(token, policy, benchOptions, load);
    figures.set(name, f);
    add(`svcd ${name} /s`, f.perSecond);
    add(`svcd ${name} CPU µs/req`, f.cpuUs);
    add(`svcd ${name} main µs/req`, f.mainUs);
    add(`svcd ${name} switches/req`, f.switches);
  }
  return figures;
}

/** The medians of the audit steps, each as a ratio to audit off. */
function auditStepSummary(m: (name: string) => number): string[] {
  const off = m("svcd audit off /s");
  const lines = [
    "the audit's cost on /sign, step by step (medians; µs per request):",
    `  ${"step".padEnd(20)} ${"req/s".padStart(6)} ${"÷ off".padStart(6)} ${"all".padStart(5)} ` +
    `${"main".padStart(5)} ${"cs".padStart(4)}`,
  ];
  for (const [name] of AUDIT_STEPS) {
    lines.push(
      `  ${name.padEnd(20)} ${f0(m(`svcd ${name} /s`)).padStart(6)} ` +
        `${f2(m(`svcd ${name} /s`) / off).padStart(6)} ${
          f0(m(`svcd ${name} CPU µs/req`)).padStart(5)
        } ` +
        `${f0(m(`svcd ${name} main µs/req`)).padStart(5)} ${
          m(`svcd ${name} switches/req`).toFixed(1).padStart(4)
        }`,
    );
  }
  lines.push(
    "  (next turn: answers released a turn later, as by a barrier, with no line written; " +
      "instant disk: the real log, its fdatasync done at once; cs: context switches per request)",
  );
  return lines;
}

/** A round's audit steps on one line. */
function auditStepLine(figures: Map<string, SvcdFigures>): string {
  return [...figures].map(([name, f]) =>
    `${name} ${f0(f.perSecond)}/s (${f0(f.cpuUs)} µs, main ${f0(f.mainUs)})${pooledNote(f)}`
  ).join("; ");
}

if (import.meta.main) {
  const dir = await Deno.makeTempDir({ prefix: "svcd-compare-" });
  const token = await makeTestToken({ keys: { [KEY]: "ec-p256" } });
  const policy = Array.from({ length: CLIENTS }, (_, i) => `CN=bench${i},O=Bench\t${KEY}\n`).join(
    "",
  );
  try {
    const binary = await buildCLoad(dir);
    const bodyFile = `${dir}/message`;
    Deno.writeFileSync(bodyFile, crypto.getRandomValues(new Uint8Array(32)));
    const load = { httpload: await buildHttpload(dir), bodyFile };
    console.log(
      `compare — ${token.module.name}, ec-p256, ${seconds} s per figure, ${rounds} round(s), ` +
        `medians; ${navigator.hardwareConcurrency} cores`,
    );

    const t = openTestToken(token);
    let binding: number;
    try {
      await t.login(testTokenPin(token));
      const f = await measureRawSign(t, token.modulePath, (await t.key(KEY))!, {
        durationMs: seconds * 1000,
      });
      binding = f.binding16PerSec;
    } finally {
      t.close();
    }

    const rows: Record<string, number[]> = {};
    const add = (name: string, x: number) => (rows[name] ??= []).push(x);
    const m = (name: string) => median(rows[name]);
    for (let round = 0; round < rounds && values["svcd-only"]; round++) {
      console.log(`  round ${round + 1}:`);
      for (const line of await threadVariants(token, policy, load, add)) console.log(`    ${line}`);
    }
    for (let round = 0; round < rounds && values["audit-ladder"]; round++) {
      console.log(
        `  round ${round + 1}: ${auditStepLine(await auditSteps(token, policy, load, add))}`,
      );
    }
    if (values["svcd-only"]) console.log("\n" + threadSummary(m).join("\n"));
    else if (values["audit-ladder"]) console.log("\n" + auditStepSummary(m).join("\n"));
    else await fullComparison({ binary, dir, token, policy, load, binding, add, m });
  } finally {
    await token.cleanup();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Every figure of the issue's comparison, `rounds` times interleaved, then the medians. */
async function fullComparison(
  { binary, dir, token, policy, load, binding, add, m }: {
    binary: string;
    dir: string;
    token: TestToken;
    policy: string;
    load: SignLoad;
    binding: number;
    add: (name: string, x: number) => void;
    m: (name: string) => number;
  },
): Promise<void> {
  {
    for (let round = 0; round < rounds; round++) {
      const c2 = await cLoad(binary, token.modulePath, token, 2);
      add("raw C 2 threads /s", c2.perSecond);
      const c2copy = await cLoad(binary, token.modulePath, token, 2, { copy: true });
      add("raw C 2 threads, session copy /s", c2copy.perSecond);
      add(
        "raw C_Sign CPU µs (token object)",
        (await cLoad(binary, token.modulePath, token, 1)).cpuUsPerSignature,
      );
      add(
        "raw C_Sign CPU µs (session copy)",
        (await cLoad(binary, token.modulePath, token, 1, { copy: true })).cpuUsPerSignature,
      );
      let p11kit = 0;
      const server = await startP11KitServer(token, dir);
      try {
        const remote = await cLoad(binary, P11KIT_CLIENT, token, CLIENTS, { env: server.env });
        add("p11-kit remote /s", remote.perSecond);
        p11kit = remote.perSecond;
      } finally {
        await server.stop();
      }
      const steps = await auditSteps(token, policy, load, add);
      const on = steps.get("audit on")!;
      const off = steps.get("audit off")!;
      if (on.errors + off.errors > 0) {
        console.log(`  (errors: audit on ${on.errors}, off ${off.errors})`);
      }
      const variants = await threadVariants(token, policy, load, add);
      console.log(
        `  round ${round + 1}: raw C ${f0(c2.perSecond)}/s, p11-kit ${f0(p11kit)}/s, ` +
          `svcd on ${f0(on.perSecond)}/s (${f0(on.cpuUs)} µs CPU/req), off ${
            f0(off.perSecond)
          }/s ` +
          `(${f0(off.cpuUs)} µs)`,
      );
      console.log(`    ${auditStepLine(steps)}`);
      for (const line of variants) console.log(`    ${line}`);
    }
    console.log(
      `\nraw C_Sign: binding c=16 ${f0(binding)}/s, C loop 2 threads ${
        f0(m("raw C 2 threads /s"))
      }/s (token object), ${f0(m("raw C 2 threads, session copy /s"))}/s (session copy)`,
    );
    console.log(
      `raw C_SignInit + C_Sign CPU, 1 thread: ${f2(m("raw C_Sign CPU µs (token object)"))} µs ` +
        `(token object), ${f2(m("raw C_Sign CPU µs (session copy)"))} µs (session copy)`,
    );
    console.log(`p11-kit remote, 16 threads: ${f0(m("p11-kit remote /s"))}/s`);
    console.log(
      `svcd /sign c=16, 16 identities: audit on ${f0(m("svcd audit on /s"))}/s ` +
        `(${f0(m("svcd audit on CPU µs/req"))} µs CPU/req, main thread ${
          f0(m("svcd audit on main µs/req"))
        }), ` +
        `audit off ${f0(m("svcd audit off /s"))}/s (${f0(m("svcd audit off CPU µs/req"))} µs)`,
    );
    console.log(threadSummary(m).join("\n"));
    console.log(auditStepSummary(m).join("\n"));
    const raw = Math.max(binding, m("raw C 2 threads /s"), m("raw C 2 threads, session copy /s"));
    const ratios: [string, number, string][] = [
      ["svcd (audit on) / p11-kit remote", m("svcd audit on /s") / m("p11-kit remote /s"), "≥ 1.5"],
      ["audit on / audit off", m("svcd audit on /s") / m("svcd audit off /s"), "≥ 0.85"],
      [
        "daemon CPU per /sign / raw C_Sign CPU (token object)",
        m("svcd audit on CPU µs/req") / m("raw C_Sign CPU µs (token object)"),
        "≤ 3",
      ],
      [
        "daemon CPU per /sign / raw C_Sign CPU (session copy)",
        m("svcd audit on CPU µs/req") / m("raw C_Sign CPU µs (session copy)"),
        "(stricter)",
      ],
      ["svcd (audit on) / raw C_Sign", m("svcd audit on /s") / raw, ""],
    ];
    console.log("\nratios:");
    for (const [name, value, target] of ratios) {
      console.log(`  ${name.padEnd(54)} ${f2(value).padStart(6)}  ${target}`);
    }
  }
}
