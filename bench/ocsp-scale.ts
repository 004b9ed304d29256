/**
 * The revocation database at scale: index.txt of 10 000, 100 000 and 1 000 000 lines (16-byte
 * serials, as `svcd ca` issues them), each served by `svcd serve --public-socket` (2 public threads)
 * and by `openssl ocsp -index` over the same lines, in the same run. For each: the server's RSS
 * once it answered, the time from start to ready (svcd: its "listening on" log line, after the
 * start-up checks, which read the database; openssl: its port accepts), the time from ready to the
 * first answer, the time from writing a revocation
 * (a new file renamed over the old, as `openssl ca -revoke` does) to the first answer that shows
 * it, and cached / nonce answers per second at c=16 (bench/httpload.c, one connection per request);
 * cached right after the revocation too. Before the servers: the compact reader alone
 * (`loadIndexBytes`, in this process, best of 3). Figures are printed, nothing is asserted; they
 * go to bench/BREAKDOWN.md with this command.
 *
 * @example
 * ```sh
 * deno run -A bench/ocsp-scale.ts [--sizes 10000,100000,1000000] [--seconds 3]
 * ```
 */
import { benchArgs, count, listOf, positiveNumber, valueOption } from "./_args.ts";
import { certIdFor, encodeOcspRequest, serialContent } from "../lib/ocsp/request.ts";
import { parseCertificate, readCertificates } from "../lib/ocsp/certificate.ts";
import { formatIndexLine } from "../lib/ocsp/index_db.ts";
import { createIndexMemory, loadIndexBytes } from "../lib/ocsp/index_compact.ts";
import { parseOcspResponse } from "../lib/ocsp/response.ts";
import { opensslCa, withTempDir } from "../tests/support/ocsp.ts";
import { makeTestToken } from "../tests/support/token.ts";
import { makeTestCa, publicListenerArgs } from "../tests/support/ca.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { request } from "../tests/support/http_client.ts";
import { buildHttpload, runHttpload } from "./_httpload.ts";
import { spawnOpensslResponder } from "./_openssl_ocsp.ts";

const { values } = benchArgs({
  url: import.meta.url,
  measures: "The revocation database at scale: index.txt of each size served by svcd serve " +
    "--public-socket and by openssl ocsp -index over the same lines, in the same run: RSS, time " +
    "to ready and to the first answer, time from a revocation to the first answer that shows it, " +
    "cached and nonce answers per second at c=16; first the compact reader alone.",
  options: {
    sizes: {
      type: "string",
      default: "10000,100000,1000000",
      check: listOf(count),
      help: "index.txt sizes in lines",
    },
    seconds: valueOption(positiveNumber, "3", "seconds per rate"),
  },
  examples: ["deno run -A bench/ocsp-scale.ts --sizes 10000,100000 --seconds 3"],
});
const SIZES = values.sizes.split(",").map(Number);
const SECONDS = Number(values.seconds);
const EXPIRES = Date.UTC(2035, 0, 1);

/** The serial of line i: 16 bytes, top bit clear. */
const serialOf = (i: number) => `4${i.toString(16).toUpperCase().padStart(31, "0")}`;

function indexText(lines: number, revoked?: number): string {
  const out: string[] = [];
  for (let i = 1; i <= lines; i++) {
    const serial = serialOf(i);
    const subject = `/C=DE/O=Example/CN=client-${i}.example.org`;
    out.push(formatIndexLine(
      i === revoked
        ? {
          status: "R",
          expires: EXPIRES,
          revokedAt: Date.UTC(2026, 0, 1),
          reason: 1,
          serial,
          subject,
        }
        : { status: "V", expires: EXPIRES, serial, subject },
    ));
  }
  return out.join("");
}

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) / 1024;
}

/** A server under test: how to ask it one request, and its process. */
interface Target {
  ask(body: Uint8Array): Promise<Uint8Array | null>;
}

function statusIn(der: Uint8Array | null): string | null {
  if (!der) return null;
  const r = parseOcspResponse(der);
  return r.status === "successful" ? r.basic!.singles[0].certStatus.status : null;
}

/** Asks until the answer has `want` (null: any successful answer); ms it took. */
async function until(target: Target, body: Uint8Array, want: string | null): Promise<number> {
  const start = performance.now();
  for (;;) {
    const got = statusIn(await target.ask(body).catch(() => null));
    if (got !== null && (want === null || got === want)) return performance.now() - start;
  }
}

async function postTcp(port: number, body: Uint8Array): Promise<Uint8Array | null> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    const head = new TextEncoder().encode(
      `POST / HTTP/1.0\r\nContent-Type: application/ocsp-request\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    await conn.write(Uint8Array.from([...head, ...body]));
    const chunks: number[] = [];
    const buf = new Uint8Array(16384);
    for (let n; (n = await conn.read(buf)) !== null;) chunks.push(...buf.subarray(0, n));
    const all = Uint8Array.from(chunks);
    const split = all.findIndex((_, i) =>
      all[i] === 13 && all[i + 1] === 10 && all[i + 2] === 13 && all[i + 3] === 10
    );
    return split < 0 ? null : all.subarray(split + 4);
  } finally {
    conn.close();
  }
}

/** Resolves once openssl says it accepts connections (an empty connection would spin it). */
async function untilAccepting(proc: Deno.ChildProcess): Promise<void> {
  let said = "";
  const decoder = new TextDecoder();
  const reader = proc.stderr.getReader();
  while (!said.includes("waiting for OCSP client connections")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`openssl ocsp ended before accepting: ${said}`);
    said += decoder.decode(value, { stream: true });
  }
  reader.releaseLock();
  void proc.stderr.pipeTo(new WritableStream()); // drained from now on
}

/** The compact reader alone over `bytes`: the best of three loads, ms. */
function readerMs(bytes: Uint8Array): number {
  const memory = createIndexMemory(Math.max(1, bytes.length >> 6));
  let best = Infinity;
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    loadIndexBytes(memory, bytes);
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

async function writeAtomically(path: string, text: string): Promise<void> {
  await Deno.writeTextFile(`${path}.new`, text);
  await Deno.rename(`${path}.new`, path);
}

const rows: string[] = [];
await withTempDir("ocsp-scale-", async (dir) => {
  const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
  try {
    const httpload = await buildHttpload(dir);
    const ours = await makeTestCa(token, { keyLabel: "ca", keyType: "ec-p256" });
    const theirs = await opensslCa(dir, "ec-p256");
    for (const size of SIZES) {
      const target = Math.floor(size / 2);
      const text = indexText(size);
      const revokedText = indexText(size, target);
      const encoded = new TextEncoder().encode(text);
      const bytes = encoded.length;
      rows.push(
        `${String(size).padStart(8)} lines ${(bytes / 2 ** 20).toFixed(1).padStart(6)} MiB  ` +
          `reader alone (loadIndexBytes, best of 3) ${readerMs(encoded).toFixed(0)} ms`,
      );
      console.log(rows.at(-1));
      const requests = (issuerDer: Uint8Array) => {
        const certIds = [certIdFor(parseCertificate(issuerDer), serialContent(serialOf(target)))];
        return {
          plain: encodeOcspRequest({ certIds }),
          nonce: encodeOcspRequest({ certIds, nonce: new Uint8Array(16).fill(7) }),
        };
      };
      for (const who of ["svcd", "openssl"] as const) {
        const index = who === "svcd" ? `${ours.dir}/index.txt` : `${dir}/index.txt`;
        await Deno.writeTextFile(index, text);
        const req = requests(
          who === "svcd" ? readCertificates(Deno.readFileSync(ours.caPem))[0].der : theirs.der,
        );
        const socket = `${dir}/public.sock`;
        const port = 20000 + Math.floor(Math.random() * 20000);
        const start = performance.now();
        let pid: number, stop: () => Promise<void>, t: Target;
        let ready: Promise<void> = Promise.resolve();
        if (who === "svcd") {
          const workDir = await Deno.makeTempDir({ dir });
          const daemon = await startDaemon({
            token,
            workDir,
            policy: "CN=bench,O=Bench\tk-ec\n",
            args: [...publicListenerArgs(ours, socket), "--public-threads", "2"],
          });
          pid = daemon.pid;
          stop = async () => void await daemon.stop();
          t = {
            ask: async (body) => {
              const r = await request(socket, {
                method: "POST",
                path: "/ocsp",
                headers: [["Content-Type", "application/ocsp-request"]],
                body,
              });
              return r.status === 200 ? r.body : null;
            },
          };
        } else {
          const proc = spawnOpensslResponder(dir, index, port);
          pid = proc.pid;
          stop = async () => {
            proc.kill();
            await proc.status;
          };
          t = { ask: (body) => postTcp(port, body) };
          ready = untilAccepting(proc);
        }
        try {
          await ready;
          const readyMs = performance.now() - start;
          const firstMs = await until(t, req.plain, "good");
          const rss = rssMiB(pid);
          await writeAtomically(index, revokedText);
          const revokeMs = await until(t, req.plain, "revoked");
          const rssAfter = rssMiB(pid);
          const where = who === "svcd"
            ? { unix: socket, path: "/ocsp" }
            : { tcp: `127.0.0.1:${port}`, path: "/" };
          const load = async (file: Uint8Array) => {
            const path = `${dir}/request.der`;
            Deno.writeFileSync(path, file);
            const r = await runHttpload(httpload, {
              ...where,
              bodyFile: path,
              concurrency: 16,
              seconds: SECONDS,
            });
            return `${r.perSecond.toFixed(0)}/s${r.errors ? ` (${r.errors} errors)` : ""}`;
          };
          const cachedAfterRevocation = await load(req.plain);
          const cached = await load(req.plain);
          const nonce = await load(req.nonce);
          rows.push(
            `${String(size).padStart(8)} lines ${(bytes / 2 ** 20).toFixed(1).padStart(6)} MiB  ` +
              `${who.padEnd(7)} RSS ${rss.toFixed(0).padStart(4)} MiB (${
                rssAfter.toFixed(0)
              } after the revocation)  start to ready ${
                readyMs.toFixed(0).padStart(5)
              } ms, then first answer ${firstMs.toFixed(0).padStart(4)} ms  ` +
              `revocation seen ${revokeMs.toFixed(0).padStart(5)} ms  c=16 cached ` +
              `${cachedAfterRevocation} right after it, then ${cached}, nonce ${nonce}`,
          );
          console.log(rows.at(-1));
        } finally {
          await stop();
        }
      }
    }
  } finally {
    await token.cleanup();
  }
});
const load = Deno.loadavg().map((x) => x.toFixed(1)).join(" ");
console.log(`\nload average at the end: ${load}`);
for (const r of rows) console.log(r);
