/**
 * OCSP figures, what the product serves: `svcd serve --public-socket` (CA key in the token, made by
 * `svcd ca init`) answering POST /ocsp, loaded by bench/httpload.c (a one-thread epoll client in
 * C, built here with gcc) in its own process with one connection per request, at c=1/4/16, cached
 * (no nonce) and live-signed (nonce), beside `openssl ocsp -index` in server mode (software key of
 * the same type, the same index lines, the same request shapes, loaded the same way over loopback
 * TCP) in the same run, as ratios, with the daemon's CPU per answer. Target: ≥ 3 ×
 * openssl at c=16 cached, ≥ 1 × for nonce. openssl signs every answer, with or without a nonce;
 * its server handles one connection at a time. The client is C because bench/load.ts (Deno) spends
 * more CPU per request than either server, on the same cores.
 *
 * A second table: the OCSP core alone (`Responder.answer` in-process, software key, no HTTP), with
 * parse/encode/sign µs — how far the core is from being the bottleneck.
 *
 * Run as root it re-runs itself in a fresh network namespace (only `lo`), because openssl's
 * responder binds every interface.
 *
 * @example
 * ```sh
 * deno run -A bench/ocsp.ts                   # ec-p256 CA, 3 s per figure
 * deno run -A bench/ocsp.ts --key ed25519 --seconds 3 --rounds 5
 * ```
 */
import { benchArgs, count, listOf, oneOf, positiveNumber, valueOption } from "./_args.ts";
import {
  encodeResponseData,
  formatIndexLine,
  IndexFileSource,
  parseOcspRequest,
  Responder,
} from "../lib/ocsp/mod.ts";
import { certIdFor, encodeOcspRequest, serialContent } from "../lib/ocsp/request.ts";
import { parseCertificate } from "../lib/ocsp/certificate.ts";
import { readCertificates } from "../lib/ocsp/certificate.ts";
import {
  isOpensslKeyType,
  opensslCa,
  type OpensslKeyType,
  withTempDir,
} from "../tests/support/ocsp.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { makeTestCa, publicListenerArgs } from "../tests/support/ca.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import type { LoadResult } from "./load.ts";
import { daemonCpu } from "./_proc_cpu.ts";
import { buildHttpload, type HttploadOptions, runHttpload } from "./_httpload.ts";
import { KEY_TYPES, type KeyTypeName } from "../lib/token/mod.ts";
import { spawnOpensslResponder } from "./_openssl_ocsp.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "OCSP: svcd serve --public-socket (CA key in the token) answering POST /ocsp, " +
    "loaded by bench/httpload.c at c=1/4/16, cached (no nonce) and live-signed (nonce), beside " +
    "openssl ocsp -index with the same key type, lines and requests, in the same run, as " +
    "ratios with the daemon's CPU per answer; then the OCSP core alone, in this process.",
  options: {
    key: {
      type: "string",
      default: "ec-p256",
      check: oneOf((Object.keys(KEY_TYPES) as KeyTypeName[]).filter(isOpensslKeyType)),
      help: "the CA's key type",
    },
    seconds: valueOption(positiveNumber, "3", "seconds per figure"),
    "public-threads": {
      type: "string",
      default: "1,2",
      check: listOf(count),
      help: "the --public-threads of svcd serve to run, each in turn",
    },
    entries: valueOption(count, "10000", "index.txt lines"),
    rounds: valueOption(count, "3", "rounds, interleaved"),
  },
  examples: [
    "deno run -A bench/ocsp.ts",
    "deno run -A bench/ocsp.ts --key ed25519 --seconds 3 --rounds 5",
  ],
});
const KEY = values.key as OpensslKeyType;
const DURATION_MS = Number(values.seconds) * 1000;
const ENTRIES = Number(values.entries);
const ROUNDS = Number(values.rounds);
const CONCURRENCY = [1, 4, 16];
/** Thread counts of the public listener to run (--public-threads); the default is the last. */
const THREADS = values["public-threads"].split(",").map(Number);
const DISTINCT = 256; // distinct certificates asked about

if (Deno.uid() === 0 && !Deno.env.get("SVCD_BENCH_NETNS")) {
  const self = new URL(import.meta.url).pathname;
  const child = new Deno.Command("unshare", {
    args: [
      "-n",
      "--",
      "sh",
      "-c",
      'ip link set lo up && exec "$@"',
      "sh",
      Deno.execPath(),
      "run",
      "-A",
      self,
      ...Deno.args,
    ],
    env: { SVCD_BENCH_NETNS: "1" },
    stdin: "null",
  }).spawn();
  Deno.exit((await child.status).code);
}

interface Figure {
  perSec: number;
  p50Us: number;
  p99Us: number;
}

async function load(c: number, call: (i: number) => Promise<void>): Promise<Figure> {
  const latencies: number[] = [];
  const end = performance.now() + DURATION_MS;
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      await call(next++);
      latencies.push(performance.now() - t);
    }
  }));
  const elapsed = performance.now() - start;
  latencies.sort((a, b) => a - b);
  const q = (p: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] * 1000);
  return { perSec: Math.round(latencies.length / (elapsed / 1000)), p50Us: q(0.5), p99Us: q(0.99) };
}

// Ready when it says so on stderr: a probe connection that sends nothing would wedge its
// one-at-a-time server. stderr is drained for the whole run (it logs every request).
async function opensslServer(dir: string, port: number) {
  const proc = spawnOpensslResponder(dir, `${dir}/index.txt`, port);
  const reader = proc.stderr.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  while (!seen.includes("waiting for OCSP client connections")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`openssl ocsp did not start: ${seen}`);
    seen += value;
  }
  (async () => {
    while (!(await reader.read()).done);
  })();
  return proc;
}

async function postToOpenssl(port: number, body: Uint8Array): Promise<void> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const head = new TextEncoder().encode(
      `POST / HTTP/1.0\r\nContent-Type: application/ocsp-request\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    const msg = new Uint8Array(head.length + body.length);
    msg.set(head);
    msg.set(body, head.length);
    await conn.write(msg);
    const buf = new Uint8Array(16384);
    let got = 0;
    for (;;) {
      const n = await conn.read(buf.subarray(got));
      if (n === null) break;
      got += n;
    }
    if (!new TextDecoder().decode(buf.subarray(0, 12)).startsWith("HTTP/1.0 200")) {
      throw new Error(`openssl answered ${new TextDecoder().decode(buf.subarray(0, got))}`);
    }
  } finally {
    conn.close();
  }
}

await withTempDir("ocsp-bench-", async (dir) => {
  const ca = await opensslCa(dir, KEY);
  const exp = Date.UTC(2035, 0, 1);
  const lines: string[] = [];
  for (let i = 1; i <= ENTRIES; i++) {
    const serial = i.toString(16).toUpperCase().padStart(6, "0");
    lines.push(formatIndexLine(
      i % 10 === 0
        ? {
          status: "R",
          expires: exp,
          revokedAt: Date.UTC(2026, 0, 1),
          reason: 1,
          serial,
          subject: `/CN=c${i}`,
        }
        : { status: "V", expires: exp, serial, subject: `/CN=c${i}` },
    ));
  }
  await Deno.writeTextFile(`${dir}/index.txt`, lines.join(""));
  const served = await servedTable(dir, ca.der);
  const issuer = parseCertificate(ca.der);
  const serialBytes = (i: number) => serialContent(i.toString(16));
  const plain = Array.from(
    { length: DISTINCT },
    (_, i) => encodeOcspRequest({ certIds: [certIdFor(issuer, serialBytes(i + 1))] }),
  );
  const withNonce = Array.from(
    { length: 4096 },
    (_, i) =>
      encodeOcspRequest({
        certIds: [certIdFor(issuer, serialBytes((i % DISTINCT) + 1))],
        nonce: crypto.getRandomValues(new Uint8Array(16)),
      }),
  );

  // Parse time.
  const sample = withNonce[0];
  for (let i = 0; i < 20000; i++) parseOcspRequest(sample);
  const n = 200000;
  let t = performance.now();
  for (let i = 0; i < n; i++) parseOcspRequest(sample);
  const parseUs = ((performance.now() - t) * 1000) / n;
  const parsed = parseOcspRequest(sample);
  const fields = {
    responderKeyHash: new Uint8Array(20),
    producedAt: Date.now(),
    answers: [{
      certId: parsed.certIds[0].der,
      certStatus: { status: "good" as const },
      thisUpdate: Date.now(),
      nextUpdate: Date.now() + 3600_000,
    }],
    nonce: parsed.nonce,
  };
  t = performance.now();
  for (let i = 0; i < n / 10; i++) encodeResponseData(fields);
  const encodeUs = ((performance.now() - t) * 10000) / n;
  const tbs = encodeResponseData(fields);
  t = performance.now();
  for (let i = 0; i < 500; i++) await ca.signer.sign(tbs);
  const signUs = ((performance.now() - t) * 1000) / 500;

  const responder = new Responder({
    source: new IndexFileSource(`${dir}/index.txt`),
    issuer: ca.der,
    signer: ca.signer,
  });
  t = performance.now();
  for (const r of plain) await responder.answer(r); // fill the cache
  const fillMs = performance.now() - t;

  const port = 20000 + Math.floor(Math.random() * 20000);
  const server = await opensslServer(dir, port);
  const rows: string[] = [];
  try {
    for (const c of CONCURRENCY) {
      const cached = await load(c, async (i) => void await responder.answer(plain[i % DISTINCT]));
      const live = await load(
        c,
        async (i) => void await responder.answer(withNonce[i % withNonce.length]),
      );
      const ossl = await load(c, (i) => postToOpenssl(port, withNonce[i % withNonce.length]));
      rows.push(
        `c=${String(c).padEnd(2)}  cached ${String(cached.perSec).padStart(7)}/s p99 ${
          String(cached.p99Us).padStart(6)
        } µs | ` +
          `nonce ${String(live.perSec).padStart(6)}/s p99 ${String(live.p99Us).padStart(6)} µs | ` +
          `openssl ${String(ossl.perSec).padStart(5)}/s p99 ${
            String(ossl.p99Us).padStart(6)
          } µs | ` +
          `ratio cached ${(cached.perSec / ossl.perSec).toFixed(1)}×, nonce ${
            (live.perSec / ossl.perSec).toFixed(1)
          }×`,
      );
    }
  } finally {
    server.kill();
    await server.status;
  }
  console.log(
    `OCSP responder bench — ${KEY} CA (software key via Web Crypto), ${ENTRIES} index lines, ${DISTINCT} distinct certificates`,
  );
  console.log(
    `parse: ${parseUs.toFixed(2)} µs per ${sample.length}-byte request (1 CertID + nonce)`,
  );
  console.log(
    `encode tbsResponseData: ${encodeUs.toFixed(2)} µs; raw software signature: ${
      signUs.toFixed(0)
    } µs`,
  );
  console.log(`load average while running: ${Deno.loadavg().map((x) => x.toFixed(1)).join(" ")}`);
  console.log(`cache fill: ${DISTINCT} signatures in ${fillMs.toFixed(0)} ms`);
  console.log(
    `Responder.answer in-process vs openssl ocsp -index over HTTP on loopback (${
      DURATION_MS / 1000
    } s each):`,
  );
  for (const r of rows) console.log(r);
  console.log(
    `\nwhat /ocsp serves — svcd serve --public-socket (CA key ${KEY} in the test token) vs ` +
      `openssl ocsp -index (software key), bench/httpload.c, one connection per request, ${
        DURATION_MS / 1000
      } s each, median of ${ROUNDS} interleaved rounds; CPU = the server's CPU per answer:`,
  );
  for (const r of served) console.log(r);
});

/** The run with the median requests/s (its p99 with it). */
function median<T extends LoadResult>(runs: T[]): T {
  return [...runs].sort((a, b) => a.perSecond - b.perSecond)[Math.floor(runs.length / 2)];
}

/** A load run, with the server's CPU µs per answer (all its threads) during it. */
async function loadMeasured(
  httpload: string,
  pid: number,
  args: HttploadOptions,
): Promise<Measured> {
  const before = (await daemonCpu(pid)).all;
  const result = await runHttpload(httpload, args);
  const cpu = (await daemonCpu(pid)).all - before;
  // The warm-up's answers are not counted but cost CPU too: count them at the same rate.
  const answers = result.perSecond * (result.seconds + 0.5);
  return { ...result, cpuUs: answers > 0 ? (cpu * 1e6) / answers : 0 };
}

// The daemon with its public listener over a token CA, and openssl's responder over the openssl
// CA in `dir` (same index lines), both loaded by bench/load.ts processes.
async function servedTable(dir: string, opensslCaDer: Uint8Array): Promise<string[]> {
  const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
  const work = await Deno.makeTempDir({ prefix: "svcd-ocsp-bench-" });
  const rows: string[] = [];
  const daemons: Awaited<ReturnType<typeof startDaemon>>[] = [];
  try {
    const httpload = await buildHttpload(work);
    const ca = await makeTestCa(token, { keyLabel: "ca", keyType: KEY });
    await Deno.copyFile(`${dir}/index.txt`, `${ca.dir}/index.txt`);
    // One daemon per thread count, all started first (an idle one costs nothing), so the rounds
    // below interleave them with openssl.
    for (const threads of THREADS) {
      const workDir = `${work}/threads-${threads}`;
      await Deno.mkdir(workDir);
      daemons.push(
        await startDaemon({
          token,
          workDir,
          policy: "CN=bench,O=Bench\tk-ec\n",
          args: [
            ...publicListenerArgs(ca, `${workDir}/public.sock`),
            "--public-threads",
            String(threads),
          ],
        }),
      );
    }
    const port = 20000 + Math.floor(Math.random() * 20000);
    const server = await opensslServer(dir, port);
    try {
      const files = (name: string, issuerDer: Uint8Array) => {
        const issuer = parseCertificate(issuerDer);
        const certIds = [certIdFor(issuer, serialContent("2A"))]; // a V line
        const cached = `${work}/${name}-cached.der`;
        const nonce = `${work}/${name}-nonce.der`;
        Deno.writeFileSync(cached, encodeOcspRequest({ certIds }));
        Deno.writeFileSync(
          nonce,
          encodeOcspRequest({ certIds, nonce: new Uint8Array(16).fill(7) }),
        );
        return { cached, nonce };
      };
      const ours = files("svcd", readCertificates(Deno.readFileSync(ca.caPem))[0].der);
      const theirs = files("openssl", opensslCaDer);
      const targets = [
        ...THREADS.map((threads, i) => ({
          name: `svcd ${threads} thread${threads > 1 ? "s" : ""}`,
          pid: daemons[i].pid,
          where: { unix: `${work}/threads-${threads}/public.sock`, path: "/ocsp" },
          files: ours,
        })),
        {
          name: "openssl",
          pid: server.pid,
          where: { tcp: `127.0.0.1:${port}`, path: "/" },
          files: theirs,
        },
      ];
      for (const concurrency of CONCURRENCY) {
        // Interleaved rounds, medians: the machine is shared, and a burst of other work during
        // one series would otherwise decide its ratio.
        const runs = targets.map(() => ({ cached: [] as Measured[], nonce: [] as Measured[] }));
        for (let round = 0; round < ROUNDS; round++) {
          for (const kind of ["cached", "nonce"] as const) {
            for (const [i, t] of targets.entries()) {
              runs[i][kind].push(
                await loadMeasured(httpload, t.pid, {
                  ...t.where,
                  bodyFile: t.files[kind],
                  concurrency,
                  seconds: DURATION_MS / 1000,
                }),
              );
            }
          }
        }
        const openssl = runs.at(-1)!;
        for (const kind of ["cached", "nonce"] as const) {
          const theirs = median(openssl[kind]);
          const cells = targets.slice(0, -1).map((t, i) => {
            const ours = median(runs[i][kind]);
            return `${t.name} ${fmt(ours)} = ${(ours.perSecond / theirs.perSecond).toFixed(1)} ×`;
          });
          rows.push(
            `c=${String(concurrency).padEnd(2)} ${kind.padEnd(6)} openssl ${fmt(theirs)} | ${
              cells.join(" | ")
            }`,
          );
        }
      }
    } finally {
      server.kill();
      await server.status;
    }
  } finally {
    for (const d of daemons) await d.stop();
    await token.cleanup();
    await Deno.remove(work, { recursive: true });
  }
  return rows;
}

type Measured = LoadResult & { cpuUs: number };

function fmt(r: Measured): string {
  return `${r.perSecond.toFixed(0).padStart(6)}/s p99 ${r.p99ms.toFixed(2).padStart(5)} ms ${
    r.cpuUs.toFixed(0).padStart(4)
  } µs CPU${r.errors ? ` (${r.errors} errors)` : ""}`;
}
