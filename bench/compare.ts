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
 *   worth of the two from the daemon.
 *
 * Targets of issue 11: svcd ≥ 1.5 × p11-kit remote; audit on ≥ 0.85 × audit off; daemon CPU per
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
import { parseArgs } from "node:util";
import { measureRawSign } from "./raw-sign.ts";
import { buildHttpload, runHttpload } from "./httpload.ts";
import { daemonCpu } from "./proc_cpu.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import {
  makeTestToken,
  openTestToken,
  type TestToken,
  testTokenPin,
} from "../tests/support/token.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    seconds: { type: "string", default: "4" },
    rounds: { type: "string", default: "2" },
  },
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const KEY = "k-ec";
const CLIENTS = 16;
const P11KIT_CLIENT = "/usr/lib/x86_64-linux-gnu/pkcs11/p11-kit-client.so";
const SERVE = new URL("./serve.ts", import.meta.url).pathname;
const LOAD_C = new URL("./p11load.c", import.meta.url).pathname;

/** What bench/p11load prints. */
interface CLoad {
  signatures: number;
  perSecond: number;
  cpuUsPerSignature: number;
}

async function buildCLoad(dir: string): Promise<string> {
  const out = `${dir}/p11load`;
  const cc = await new Deno.Command("gcc", {
    args: ["-O2", "-std=c11", "-I/usr/include/p11-kit-1", "-o", out, LOAD_C, "-ldl", "-lpthread"],
    stderr: "piped",
  }).output();
  if (!cc.success) {
    throw new Error(
      `building bench/p11load.c failed (needs gcc and libp11-kit-dev):\n` +
        new TextDecoder().decode(cc.stderr),
    );
  }
  return out;
}

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

/** `p11-kit server` for the token, in the foreground; resolves once its socket exists. */
async function startP11KitServer(token: TestToken, dir: string) {
  const socket = `${dir}/p11-kit.sock`;
  const server = new Deno.Command("p11-kit", {
    args: [
      "server",
      "-f",
      "--provider",
      token.modulePath,
      "-n",
      socket,
      `pkcs11:token=${token.tokenLabel}`,
    ],
    env: token.env,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await Deno.stat(socket)).isSocket) break;
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      server.kill("SIGKILL");
      throw new Error("p11-kit server did not create its socket within 10 s");
    }
    await new Promise((r) => setTimeout(r, 20)); // polling a file the server creates
  }
  return {
    env: { P11_KIT_SERVER_ADDRESS: `unix:path=${socket}` },
    async stop() {
      server.kill("SIGTERM");
      await server.status;
    },
  };
}

/** /sign req/s and daemon CPU µs per request at c=16, 16 identities, for one daemon variant. */
async function svcd(
  token: TestToken,
  policy: string,
  without: string[],
  load: { httpload: string; bodyFile: string },
): Promise<{ perSecond: number; cpuUs: number; mainUs: number; errors: number }> {
  const daemon = await startDaemon({
    token,
    policy,
    entry: [SERVE, ...(without.length > 0 ? ["--without", without.join(",")] : [])],
    args: ["--workers", String(CLIENTS)],
  });
  try {
    const signLoad = (secs: number) =>
      runHttpload(load.httpload, {
        unix: daemon.socket,
        path: "/sign",
        bodyFile: load.bodyFile,
        headers: [`X-SVC-Key: ${KEY}`],
        identities: CLIENTS,
        concurrency: CLIENTS,
        seconds: secs,
        warmup: 0,
      });
    await signLoad(0.5);
    const before = await daemonCpu(daemon.pid);
    const measured = await signLoad(seconds);
    const after = await daemonCpu(daemon.pid);
    const n = measured.requests;
    return {
      perSecond: measured.perSecond,
      cpuUs: (after.all - before.all) * 1e6 / n,
      mainUs: (after.main - before.main) * 1e6 / n,
      errors: measured.errors,
    };
  } finally {
    await daemon.stop();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const f0 = (x: number) => x.toFixed(0);
const f2 = (x: number) => x.toFixed(2);

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
      const server = await startP11KitServer(token, dir);
      try {
        const remote = await cLoad(binary, P11KIT_CLIENT, token, CLIENTS, { env: server.env });
        add("p11-kit remote /s", remote.perSecond);
      } finally {
        await server.stop();
      }
      const on = await svcd(token, policy, [], load);
      const off = await svcd(token, policy, ["audit"], load);
      if (on.errors + off.errors > 0) {
        console.log(`  (errors: audit on ${on.errors}, off ${off.errors})`);
      }
      add("svcd audit on /s", on.perSecond);
      add("svcd audit on CPU µs/req", on.cpuUs);
      add("svcd audit on main µs/req", on.mainUs);
      add("svcd audit off /s", off.perSecond);
      add("svcd audit off CPU µs/req", off.cpuUs);
      console.log(
        `  round ${round + 1}: raw C ${f0(c2.perSecond)}/s, p11-kit ${
          f0(rows["p11-kit remote /s"].at(-1)!)
        }/s, ` +
          `svcd on ${f0(on.perSecond)}/s (${f0(on.cpuUs)} µs CPU/req), off ${
            f0(off.perSecond)
          }/s ` +
          `(${f0(off.cpuUs)} µs)`,
      );
    }
    const m = (name: string) => median(rows[name]);
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
  } finally {
    await token.cleanup();
    await Deno.remove(dir, { recursive: true });
  }
}
