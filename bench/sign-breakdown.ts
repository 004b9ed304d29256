/**
 * Where the CPU of one /sign request goes. Three views, each from its own measurement:
 *
 * 1. The daemon under load (ec-p256, one connection per request): CPU µs per request by thread
 *    (from /proc) and instructions per request by thread (`perf stat`). Instructions are the
 *    figure to compare changes by on a shared machine: times swing 2× with other people's load,
 *    instruction counts by a few per cent.
 * 2. `perf record -e instructions` of the same daemon, split by thread and library: SoftHSM and
 *    the OpenSSL/libc it calls, V8/Deno and the JIT code, the kernel.
 * 3. The parts on their own, in this process (instructions per operation, main thread): the
 *    module's C_SignInit and C_Sign for the signing key and the audit HMAC key, the same through
 *    lib/token, an audit line with a free MAC, parsing a request, serialising a response.
 *
 * Needs `perf` (linux-perf) and permission to use it (root, or kernel.perf_event_paranoid ≤ 1);
 * without it only the /proc figures are printed.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/sign-breakdown.ts
 * node_modules/.bin/deno run -A bench/sign-breakdown.ts --seconds 5 --concurrency 16 --without audit
 * ```
 */
import { createHash } from "node:crypto";
import { benchArgs, count, listOf, oneOf, positiveNumber, valueOption } from "./_args.ts";
import { SWITCHABLE_PARTS } from "./serve.ts";
import { CKA, CKM, CKO, encodeMechanism, loadModule, ulongBytes } from "../ffi/pkcs11/mod.ts";
import { AuditLog } from "../lib/audit/mod.ts";
import { RequestReader } from "../lib/http/parse.ts";
import { serializeResponse } from "../lib/http/response.ts";
import { findObjects, openSession, type Token, utf8 } from "../lib/token/mod.ts";
import { startDaemon, type TestDaemon } from "../tests/support/daemon.ts";
import { makeTestToken, openTestToken, testTokenPin } from "../tests/support/token.ts";
import { runLoad } from "./load.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "Where the CPU of one /sign request goes: the daemon under load (CPU µs and, with " +
    "perf, instructions per request by thread), perf record of the same daemon by thread and " +
    "library, and the parts on their own in this process (instructions per operation). Without " +
    "a usable perf only the /proc figures.",
  options: {
    seconds: valueOption(positiveNumber, "3", "seconds per figure"),
    concurrency: valueOption(count, "16", "requests in flight"),
    without: {
      type: "string",
      default: "",
      check: listOf(oneOf(SWITCHABLE_PARTS)),
      help: "parts of the daemon switched off (bench/serve.ts)",
    },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/sign-breakdown.ts",
    "node_modules/.bin/deno run -A bench/sign-breakdown.ts --seconds 5 --concurrency 16 " +
    "--without audit",
  ],
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const SERVE = new URL("./serve.ts", import.meta.url).pathname;
const KEY = "k-ec";

/** Thread groups of a Deno process, by thread name. */
function threadGroup(name: string, tid: string, pid: number): string {
  if (tid === String(pid)) return "main";
  if (name.startsWith("tokio-runtime")) return "pool";
  if (name.startsWith("V8 ")) return "v8";
  return "other";
}

/** CPU seconds per thread group of `pid`, from /proc/<pid>/task/<tid>/stat. */
async function threadCpu(pid: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for await (const task of Deno.readDir(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = await Deno.readTextFile(`/proc/${pid}/task/${task.name}/stat`);
    } catch {
      continue; // the thread ended
    }
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const group = threadGroup(name, task.name, pid);
    out[group] = (out[group] ?? 0) + (Number(f[11]) + Number(f[12])) / 100; // USER_HZ
  }
  return out;
}

function perfWorks(): boolean {
  try {
    const r = new Deno.Command("perf", {
      args: ["stat", "-e", "instructions", "-x", ",", "true"],
      stdout: "null",
      stderr: "piped",
    }).outputSync();
    return r.success && /instructions/.test(new TextDecoder().decode(r.stderr)) &&
      !/not supported|not counted/.test(new TextDecoder().decode(r.stderr));
  } catch {
    return false;
  }
}

/** `perf stat` arguments: user and kernel instructions of each thread of `pid`, as CSV. */
function instructionsPerThread(pid: number): string[] {
  return ["stat", "--per-thread", "-x", ",", "-e", "instructions:u,instructions:k", "-p", `${pid}`];
}

/** Runs `perf` against `pid` while `work` runs; returns perf's stderr. */
async function perfDuring(args: string[], work: () => Promise<void>): Promise<string> {
  const perf = new Deno.Command("perf", { args, stdout: "null", stderr: "piped" }).spawn();
  // perf attaches to each thread on its own; give it a moment before the measured work.
  await new Promise((r) => setTimeout(r, 300));
  try {
    await work();
  } finally {
    perf.kill("SIGINT");
  }
  return new TextDecoder().decode((await perf.output()).stderr);
}

/** Instructions per thread group, user and kernel, from `perf stat --per-thread -x,` output. */
function parsePerThread(
  text: string,
  pid: number,
): Record<string, { user: number; kernel: number }> {
  const out: Record<string, { user: number; kernel: number }> = {};
  for (const line of text.split("\n")) {
    const f = line.split(",");
    if (f.length < 4 || !f[3]?.startsWith("instructions")) continue;
    const count = Number(f[1]);
    if (!Number.isFinite(count)) continue;
    const dash = f[0].lastIndexOf("-");
    const group = threadGroup(f[0].slice(0, dash), f[0].slice(dash + 1), pid);
    const slot = (out[group] ??= { user: 0, kernel: 0 });
    if (f[3].endsWith(":k")) slot.kernel += count;
    else slot.user += count;
  }
  return out;
}

function k(n: number): string {
  return `${(n / 1000).toFixed(0)}k`;
}

async function measureDaemon(daemon: TestDaemon, withPerf: boolean): Promise<void> {
  const load = { socket: daemon.socket, key: KEY, concurrency, seconds };
  await runLoad({ ...load, seconds: 1 }); // warm-up: JIT, pool sessions, key cache

  const before = await threadCpu(daemon.pid);
  let requests = 0;
  let rate = 0;
  const run = async () => {
    const r = await runLoad(load);
    requests = r.requests;
    rate = r.perSecond;
  };
  const perThread = withPerf
    ? parsePerThread(
      await perfDuring(instructionsPerThread(daemon.pid), run),
      daemon.pid,
    )
    : (await run(), undefined);
  const after = await threadCpu(daemon.pid);
  const us = (group: string) => ((after[group] ?? 0) - (before[group] ?? 0)) * 1e6 / requests;
  const all = Object.keys(after).reduce((s, g) => s + us(g), 0);
  console.log(`\n1. the daemon under load: ${rate.toFixed(0)} req/s, ${requests} requests`);
  console.log(
    `   CPU per request: ${all.toFixed(0)} µs = main thread ${
      us("main").toFixed(0)
    } + thread pool ` +
      `${us("pool").toFixed(0)} + V8 helpers ${us("v8").toFixed(0)} + other ${
        us("other").toFixed(0)
      } (the main thread caps the rate at 1 s ÷ its µs)`,
  );
  if (perThread) {
    const row = (g: string) => perThread[g] ?? { user: 0, kernel: 0 };
    const total = Object.values(perThread).reduce((s, v) => s + v.user + v.kernel, 0) / requests;
    console.log(
      `   instructions per request: ${k(total)} = ` +
        ["main", "pool", "v8", "other"].map((g) =>
          `${g} ${k(row(g).user / requests)} user + ${k(row(g).kernel / requests)} kernel`
        ).join(", "),
    );
  }
}

async function profileDaemon(daemon: TestDaemon): Promise<void> {
  const data = await Deno.makeTempFile({ prefix: "svcd-perf-", suffix: ".data" });
  try {
    await perfDuring(
      ["record", "-e", "instructions", "-c", "200000", "-o", data, "-p", String(daemon.pid)],
      async () => void await runLoad({ socket: daemon.socket, key: KEY, concurrency, seconds }),
    );
    const report = await new Deno.Command("perf", {
      args: ["report", "-i", data, "--no-children", "--sort", "comm,dso", "-g", "none", "-t", ";"],
      stdout: "piped",
      stderr: "null",
    }).output();
    const shares = new Map<string, number>();
    for (const line of new TextDecoder().decode(report.stdout).split("\n")) {
      const [share, comm, dso] = line.split(";").map((f) => f.trim());
      if (!share?.endsWith("%") || !comm || !dso) continue;
      // The main thread keeps the process's name; the others are named by what they are.
      const thread = threadGroup(comm, comm === "deno" ? String(daemon.pid) : "", daemon.pid);
      const key = `${thread.padEnd(5)} ${libraryRole(dso)}`;
      shares.set(key, (shares.get(key) ?? 0) + Number(share.slice(0, -1)));
    }
    console.log("\n2. where the daemon's instructions go (perf record -e instructions):");
    for (const [key, share] of [...shares].sort((a, b) => b[1] - a[1])) {
      if (share >= 0.5) console.log(`   ${share.toFixed(1).padStart(5)}%  ${key}`);
    }
  } finally {
    await Deno.remove(data).catch(() => {});
  }
}

/** What a shared object stands for in this daemon. */
function libraryRole(dso: string): string {
  if (dso.includes("softhsm")) return "SoftHSM itself";
  if (dso.includes("libcrypto")) return "OpenSSL (called by SoftHSM; node:crypto hashes)";
  if (dso.includes("libstdc++")) return "libstdc++ (SoftHSM)";
  if (dso.startsWith("libc.")) return "libc (mostly malloc/free for SoftHSM)";
  if (dso === "deno") return "V8 and the Deno runtime (builtins, GC, ops, FFI glue)";
  if (dso.startsWith("[JIT]")) return "JIT-compiled JavaScript";
  if (dso.includes("kernel")) return "kernel (syscalls: sockets, SoftHSM's file reads, fdatasync)";
  return dso;
}

/** Instructions per call of `op` (sync or async): this process's main thread, and all threads. */
async function perOp(n: number, op: () => unknown, warm = Math.min(2000, n)): Promise<PerOp> {
  for (let i = 0; i < warm; i++) await op();
  const text = await perfDuring(
    instructionsPerThread(Deno.pid),
    async () => {
      for (let i = 0; i < n; i++) await op();
    },
  );
  const groups = Object.entries(parsePerThread(text, Deno.pid));
  const sum = (rows: typeof groups) => rows.reduce((t, [, v]) => t + v.user + v.kernel, 0) / n;
  return { main: sum(groups.filter(([g]) => g === "main")), all: sum(groups) };
}

interface PerOp {
  main: number;
  all: number;
}

async function measureParts(token: Token, modulePath: string): Promise<void> {
  const mod = loadModule(modulePath);
  const s = openSession(mod, token.slotId);
  const find = (cls: number, label: string) =>
    findObjects(mod, s, [
      { type: CKA.CLASS, value: ulongBytes(cls) },
      { type: CKA.LABEL, value: utf8(label) },
    ])[0];
  const ecKey = find(CKO.PRIVATE_KEY, KEY);
  const macKey = find(CKO.SECRET_KEY, "svc-audit");
  const digest = createHash("sha256").update("message").digest();
  const line = new Uint8Array(330);
  const sig = new Uint8Array(64);
  const len = new BigUint64Array(1);
  const lenBytes = new Uint8Array(len.buffer);
  const ecdsa = encodeMechanism(CKM.ECDSA);
  const hmac = encodeMechanism(CKM.SHA256_HMAC);
  const rows: [string, PerOp][] = [];
  const add = async (name: string, n: number, op: () => unknown, warm?: number) =>
    void rows.push([name, await perOp(n, op, warm)]);

  // C_SignInit alone: nothing ends a sign operation but C_Sign, so each call gets a session of
  // its own, opened before and closed after the measured calls.
  const sessions = Array.from({ length: 2000 }, () => openSession(mod, token.slotId));
  let next = 0;
  const initOnly = (mech: Uint8Array, key: number) => () => {
    if (mod.fn.C_SignInit(sessions[next++ % sessions.length], mech, key) !== 0) {
      throw new Error("C_SignInit failed");
    }
  };
  const half = sessions.length / 2;
  await add("C_SignInit alone, ECDSA P-256 key", half, initOnly(ecdsa.bytes, ecKey), 0);
  await add("C_SignInit alone, HMAC svc-audit", half, initOnly(hmac.bytes, macKey), 0);
  for (const h of sessions) mod.fn.C_CloseSession(h);
  await add("C_SignInit + C_Sign, ECDSA P-256", 3000, () => {
    mod.fn.C_SignInit(s, ecdsa.bytes, ecKey);
    len[0] = 64n;
    mod.fn.C_Sign(s, digest, digest.length, sig, lenBytes);
  });
  await add("C_SignInit + C_Sign, HMAC svc-audit (SoftHSM)", 5000, () => {
    mod.fn.C_SignInit(s, hmac.bytes, macKey);
    len[0] = 32n;
    mod.fn.C_Sign(s, line, line.length, sig, lenBytes);
  });
  mod.fn.C_CloseSession(s);
  const key = (await token.key(KEY))!;
  await add(
    "token.sign, ec-p256 (pool, prehash, nonblocking C_Sign)",
    3000,
    () => token.sign(key, line),
  );
  await add("token.mac, svc-audit (pool, synchronous)", 5000, () => token.mac("svc-audit", line));

  const dir = await Deno.makeTempDir({ prefix: "svcd-breakdown-" });
  const zero = new Uint8Array(32);
  const log = await AuditLog.open({
    dir,
    keys: {
      mac: () => Promise.resolve(zero),
      signCheckpoint: () => Promise.resolve(new Uint8Array(64)),
    },
    login: {},
    checkpointEvery: 1_000_000,
  });
  const fields = {
    key: KEY,
    mechanism: "CKM_ECDSA",
    message_sha256: "ab".repeat(32),
    signature_sha256: "cd".repeat(32),
    request_id: "0123456789abcdef",
  };
  // 16 appenders at once, as under load, so lines share fdatasyncs: instructions per line.
  const batch = () =>
    Promise.all(Array.from({ length: 16 }, () => log.append("sign", "CN=bench3,O=Bench", fields)));
  const lines = await perOp(500, batch);
  rows.push([
    "audit line with a free MAC, 16 at once (format, chain, write, fdatasync share)",
    { main: lines.main / 16, all: lines.all / 16 },
  ]);
  await log.close();
  await Deno.remove(dir, { recursive: true });

  const request = new TextEncoder().encode(
    "POST /sign HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: CN=bench3,O=Bench\r\n" +
      `X-SVC-Key: ${KEY}\r\nContent-Length: 32\r\n\r\n${"x".repeat(32)}`,
  );
  const reader = new RequestReader({ maxHeaderBytes: 16384, maxBodyBytes: 1 << 20 });
  await add("parse a /sign request (RequestReader: node:_http_common + checks)", 20000, () => {
    reader.feed(request);
    reader.reset();
  });
  const response = {
    status: 200,
    headers: [
      ["Content-Type", "application/octet-stream"],
      ["X-SVC-Mechanism", "CKM_ECDSA"],
      ["X-SVC-Key-Type", "ec-p256"],
    ] as [string, string][],
    body: sig,
  };
  await add("serialise a /sign response", 20000, () => serializeResponse(response));

  console.log(
    "\n3. the parts on their own (instructions per operation, user + kernel, this process):",
  );
  console.log("     main    all  operation");
  for (const [name, n] of rows) {
    console.log(`   ${k(n.main).padStart(6)} ${k(n.all).padStart(6)}  ${name}`);
  }
}

if (import.meta.main) {
  const withPerf = perfWorks();
  if (!withPerf) console.log("perf is not usable here: instruction counts are left out");
  const made = await makeTestToken({ keys: { [KEY]: "ec-p256" } });
  const policy = Array.from({ length: concurrency }, (_, i) => `CN=bench${i},O=Bench\t${KEY}\n`)
    .join("");
  console.log(
    `/sign breakdown — ${made.module.name}, ec-p256, c=${concurrency}, ${seconds}s per figure, ` +
      `daemon ${values.without ? `without ${values.without}` : "as shipped"}`,
  );
  try {
    const daemon = await startDaemon({
      token: made,
      policy,
      command: [
        Deno.execPath(),
        "run",
        "-A",
        "--v8-flags=--perf-basic-prof",
        SERVE,
        ...(values.without ? ["--without", values.without] : []),
      ],
      args: ["--workers", "16"],
    });
    try {
      await measureDaemon(daemon, withPerf);
      if (withPerf) await profileDaemon(daemon);
    } finally {
      await daemon.stop();
      // V8 wrote the JIT symbol map for perf; it is of no use once the report is printed.
      await Deno.remove(`/tmp/perf-${daemon.pid}.map`).catch(() => {});
    }
    if (withPerf) {
      for (const [name, value] of Object.entries(made.env)) Deno.env.set(name, value);
      const token = openTestToken(made);
      try {
        await token.login(testTokenPin(made));
        await measureParts(token, made.modulePath);
      } finally {
        token.close();
      }
    }
  } finally {
    await made.cleanup();
  }
}
