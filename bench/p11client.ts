/**
 * The PKCS#11 client module (pkcs11-module, libsvcd-pkcs11.so) against p11-kit remote, on one
 * ECDSA P-256 key of one SoftHSM2 token, in the same run:
 *
 * - svcd: bench/p11load.c (16 threads, one session each, CKM_ECDSA over a 32-byte digest) →
 *   libsvcd-pkcs11.so → nginx (TLS with a client certificate, keep-alive) → svcd (grant check,
 *   durable audit line) → SoftHSM2;
 * - p11-kit remote: the same load → p11-kit-client.so → `p11-kit server` → SoftHSM2 (a UNIX socket,
 *   no TLS, no policy, no audit).
 *
 * - svcd alone (each round, for the breakdown): bench/httpload.c as nginx's user straight on svcd's
 *   socket, `threads` connections at a time, one request per connection, the same /sign as the
 *   client module sends (X-SVC-Digest sha-256, alice's subject): what svcd does without TLS, nginx
 *   or the client module on the same cores.
 *
 * The two run `--rounds` times, interleaved, and the medians are compared, since other work on a
 * shared machine moves every rate. nginx runs `worker_processes auto` (one worker per core, as
 * Debian's nginx.conf has it), not the tests' 1: `--nginx-workers N` changes it. `--serve-args`
 * adds options of `svcd serve` (comma-separated, e.g. `--threads,2`); `--without audit` runs the
 * daemon through bench/serve.ts without its audit log — a diagnostic of what the durable audit
 * line costs, never the product's figure. Per signature: the load process's CPU (what the client module
 * costs the signing program) and the server side's (svcd, or `p11-kit server`). Target: svcd ≥ 0.8 ×
 * p11-kit remote. Needs what tests/p11client_*_test.ts need (root, nginx, the built client module)
 * and gcc, libp11-kit-dev, p11-kit, p11-kit-modules.
 *
 * @example
 * ```sh
 * node_modules/.bin/deno run -A bench/p11client.ts --seconds 5 --rounds 3
 * node_modules/.bin/deno run -A bench/p11client.ts --without audit --serve-args=--threads,2
 * ```
 */
import { benchArgs, count, listOf, oneOf, positiveNumber, valueOption } from "./_args.ts";
import { buildCLoad, type CLoad, P11KIT_CLIENT, startP11KitServer } from "./_p11kit.ts";
import { cpuSeconds, daemonCpu } from "./_proc_cpu.ts";
import { buildHttpload, runHttpload } from "./_httpload.ts";
import { SWITCHABLE_PARTS } from "./serve.ts";
import { ALICE, CLIENT_MODULE, startClientBed } from "../tests/support/p11client.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "The PKCS#11 client module (libsvcd-pkcs11.so → nginx → svcd → SoftHSM2) against " +
    "p11-kit remote (p11-kit-client.so → p11-kit server → SoftHSM2) on one ECDSA P-256 key, the " +
    "same C load of --threads threads, in interleaved rounds with medians, with each side's CPU " +
    "per signature; and svcd alone (bench/httpload.c on its socket) for the breakdown.",
  options: {
    seconds: valueOption(positiveNumber, "5", "seconds per figure"),
    rounds: valueOption(count, "3", "rounds, interleaved"),
    threads: valueOption(count, "16", "threads of the C load"),
    "nginx-workers": {
      type: "string",
      default: "auto",
      check: {
        what: "auto or a whole number ≥ 1",
        placeholder: "auto|N",
        ok: (v) => v === "auto" || count.ok(v),
      },
      help: "nginx's worker_processes",
    },
    "serve-args": {
      type: "string",
      default: "",
      value: "A,B,…",
      help: "more options of svcd serve, comma separated, e.g. --serve-args=--threads,2",
    },
    without: {
      type: "string",
      default: "",
      check: listOf(oneOf(SWITCHABLE_PARTS)),
      help: "parts of the daemon switched off (bench/serve.ts; a diagnostic, never the " +
        "product's figure)",
    },
  },
  examples: [
    "node_modules/.bin/deno run -A bench/p11client.ts --seconds 5 --rounds 3",
    "node_modules/.bin/deno run -A bench/p11client.ts --without audit --serve-args=--threads,2",
  ],
});
const seconds = Number(values.seconds);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const KEY = "k-ec";
const nginxWorkers = values["nginx-workers"];
const serveArgs = values["serve-args"].split(",").filter(Boolean);
const without = values.without;
const BENCH_SERVE = new URL("./serve.ts", import.meta.url).pathname;
/** nginx's workers' user: svcd takes requests on its socket only from the proxy's uid. */
const AS_WWW_DATA = ["setpriv", "--reuid=33", "--regid=33", "--clear-groups"];

/**
 * svcd alone: its rate, its CPU per request and the requests it refused (a closed loop on one
 * identity can open its next connection before the daemon has counted the last one's answer
 * out, and a 17th request of the identity is refused).
 */
interface Direct {
  perSecond: number;
  serverCpuUs: number;
  errors: number;
}

/** One load run: the load's figures and the server side's CPU µs per signature. */
interface Figures extends CLoad {
  serverCpuUs: number;
  /** nginx's workers (svcd only). */
  proxyCpuUs: number;
}

async function children(pid: number): Promise<number[]> {
  const text = await Deno.readTextFile(`/proc/${pid}/task/${pid}/children`).catch(() => "");
  return text.trim().split(/\s+/).filter(Boolean).map(Number);
}

/** CPU seconds of a process and of its children, the running ones and the ones it has reaped. */
async function treeCpuSeconds(pid: number): Promise<number> {
  const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  let total = (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100; // USER_HZ
  for (const child of await children(pid)) total += await cpuSeconds(`/proc/${child}/stat`);
  return total;
}

/**
 * `p11-kit server` serves each connection in a child it forks: its CPU counts once the server has
 * reaped the children of the load that ended (waited for, at most 5 s).
 */
async function p11KitServerCpu(pid: number, before: number[]): Promise<number> {
  for (let i = 0; i < 1000; i++) {
    const now = await children(pid);
    if (!now.some((c) => !before.includes(c))) break;
    await new Promise((r) => setTimeout(r, 5));
  }
  return await treeCpuSeconds(pid);
}

async function runLoad(
  binary: string,
  args: { module: string; tokenLabel: string; pinFile: string; env: Record<string, string> },
  serverCpu: () => Promise<number>,
  proxyCpu: () => Promise<number> = () => Promise.resolve(0),
): Promise<Figures> {
  const before = await serverCpu();
  const proxyBefore = await proxyCpu();
  const out = await new Deno.Command(binary, {
    args: [args.module, args.tokenLabel, args.pinFile, KEY, String(threads), String(seconds)],
    env: args.env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`p11load: ${new TextDecoder().decode(out.stderr)}`);
  const load = JSON.parse(new TextDecoder().decode(out.stdout)) as CLoad;
  const used = await serverCpu() - before;
  const proxyUsed = await proxyCpu() - proxyBefore;
  return {
    ...load,
    serverCpuUs: used * 1e6 / load.signatures,
    proxyCpuUs: proxyUsed * 1e6 / load.signatures,
  };
}

function median(xs: number[]): number {
  const s = xs.toSorted((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

const f0 = (x: number) => x.toFixed(0);

/** The 1, 5 and 15 minute load averages, as /proc/loadavg gives them. */
function loadAverage(): string {
  return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
}

async function main(): Promise<void> {
  // One identity holds at most --workers minus one requests at once: 16 threads need 17.
  const bed = await startClientBed({ [KEY]: "ec-p256" }, {
    daemonArgs: ["--workers", String(threads + 1), ...serveArgs],
    daemonEntry: without ? [BENCH_SERVE, "--without", without] : undefined,
    nginxWorkers,
  });
  console.log(
    `load average ${loadAverage()}; nginx worker_processes ${nginxWorkers}; svcd serve ` +
      `--workers ${threads + 1} ${serveArgs.join(" ")}` +
      (without ? ` (bench/serve.ts --without ${without}: a diagnostic)` : ""),
  );
  const server = await startP11KitServer(bed.token, bed.dir);
  try {
    const binary = await buildCLoad(bed.dir);
    // The client module has no PIN (the client certificate is the credential); it takes any.
    const serverChildren = await children(server.pid);
    const nginxMaster = Number((await Deno.readTextFile(`${bed.dir}/nginx.pid`)).trim());
    const nginxCpu = () => treeCpuSeconds(nginxMaster);
    const noPin = `${bed.dir}/no-pin`;
    await Deno.writeTextFile(noPin, "");
    const svcdRun = () =>
      runLoad(
        binary,
        { module: CLIENT_MODULE, tokenLabel: "svcd", pinFile: noPin, env: bed.env },
        async () => (await daemonCpu(bed.daemon.pid)).all,
        nginxCpu,
      );
    const p11kitRun = () =>
      runLoad(
        binary,
        {
          module: P11KIT_CLIENT,
          tokenLabel: bed.token.tokenLabel,
          pinFile: `${bed.token.credentialsDir}/svc-pin`,
          env: { ...bed.token.env, ...server.env },
        },
        () => p11KitServerCpu(server.pid, serverChildren),
      );
    const httpload = await buildHttpload(bed.dir);
    const digestFile = `${bed.dir}/digest`;
    await Deno.writeFile(digestFile, new Uint8Array(32).fill(7));
    const directRun = async (): Promise<Direct> => {
      const before = (await daemonCpu(bed.daemon.pid)).all;
      const r = await runHttpload(httpload, {
        unix: bed.daemon.socket,
        path: "/sign",
        bodyFile: digestFile,
        headers: [`X-SVC-Key: ${KEY}`, "X-SVC-Digest: sha-256", `X-SVC-Client-Subject: ${ALICE}`],
        concurrency: threads,
        seconds,
        // Every request counts, as every request's CPU does (the daemon is warm by then).
        warmup: 0,
        runAs: AS_WWW_DATA,
      });
      const used = (await daemonCpu(bed.daemon.pid)).all - before;
      return {
        perSecond: r.perSecond,
        serverCpuUs: used * 1e6 / (r.requests + r.errors),
        errors: r.errors,
      };
    };
    const svcd: Figures[] = [];
    const p11kit: Figures[] = [];
    const direct: Direct[] = [];
    for (let round = 0; round < rounds; round++) {
      svcd.push(await svcdRun());
      p11kit.push(await p11kitRun());
      direct.push(await directRun());
      const [s, p, d] = [svcd.at(-1)!, p11kit.at(-1)!, direct.at(-1)!];
      console.log(
        `round ${round + 1}: client module → nginx → svcd ${f0(s.perSecond)}/s ` +
          `(client CPU ${f0(s.cpuUsPerSignature)} µs/sig, nginx ${f0(s.proxyCpuUs)}, ` +
          `svcd ${f0(s.serverCpuUs)} µs/sig); ` +
          `p11-kit remote ${f0(p.perSecond)}/s (client CPU ${f0(p.cpuUsPerSignature)} µs/sig, ` +
          `p11-kit server ${f0(p.serverCpuUs)} µs/sig); ratio ${
            (s.perSecond / p.perSecond).toFixed(2)
          }; svcd alone ${f0(d.perSecond)}/s (${f0(d.serverCpuUs)} µs/sig, ${d.errors} refused)`,
      );
    }
    const m = (xs: Figures[], f: (x: Figures) => number) => median(xs.map(f));
    const svcdRate = m(svcd, (x) => x.perSecond);
    const p11kitRate = m(p11kit, (x) => x.perSecond);
    console.log(`medians of ${rounds} rounds, ${threads} threads, ${seconds} s each:`);
    console.log(
      `  client module → nginx → svcd: ${f0(svcdRate)}/s; client CPU ` +
        `${f0(m(svcd, (x) => x.cpuUsPerSignature))} µs/sig; nginx CPU ` +
        `${f0(m(svcd, (x) => x.proxyCpuUs))} µs/sig; svcd CPU ` +
        `${f0(m(svcd, (x) => x.serverCpuUs))} µs/sig`,
    );
    console.log(
      `  p11-kit-client → p11-kit server: ${f0(p11kitRate)}/s; client CPU ` +
        `${f0(m(p11kit, (x) => x.cpuUsPerSignature))} µs/sig; p11-kit server CPU ` +
        `${f0(m(p11kit, (x) => x.serverCpuUs))} µs/sig`,
    );
    console.log(
      `  svcd alone (bench/httpload.c on its socket, no TLS): ` +
        `${f0(median(direct.map((x) => x.perSecond)))}/s; svcd CPU ` +
        `${f0(median(direct.map((x) => x.serverCpuUs)))} µs/sig`,
    );
    const ratio = svcdRate / p11kitRate;
    console.log(
      `  svcd / p11-kit remote: ${ratio.toFixed(2)} (target ≥ 0.8: ${
        ratio >= 0.8 ? "met" : "NOT met"
      })`,
    );
    console.log(`load average ${loadAverage()}`);
  } finally {
    await server.stop();
    await bed.stop();
  }
}

await main();
