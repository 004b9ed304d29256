/**
 * OCSP responder figures: request parse time, and `Responder.answer` responses/s and p99 at
 * c=1/4/16 for cached answers (no nonce) and live-signed ones (nonce), beside `openssl ocsp -index`
 * in server mode on loopback in the same run (same CA key type, same index, same requests; openssl
 * signs every answer). Ours is measured in-process (no HTTP), openssl through its HTTP server, so
 * the ratio says how far the OCSP core is from being the bottleneck, not what /ocsp serves; the
 * daemon's /ocsp bench belongs with the public listener.
 *
 * Run as root it re-runs itself in a fresh network namespace (only `lo`), because openssl's
 * responder binds every interface.
 *
 * @example
 * ```sh
 * deno run -A bench/ocsp.ts                   # ec-p256 CA, 2 s per figure
 * deno run -A bench/ocsp.ts --key ed25519 --seconds 3
 * ```
 */
import { parseArgs } from "node:util";
import {
  encodeResponseData,
  formatIndexLine,
  IndexFileSource,
  parseOcspRequest,
  Responder,
} from "../lib/ocsp/mod.ts";
import { certIdFor, encodeOcspRequest, serialContent } from "../lib/ocsp/request.ts";
import { parseCertificate } from "../lib/ocsp/certificate.ts";
import { opensslCa, type OpensslKeyType, withTempDir } from "../tests/support/ocsp.ts";

const args = parseArgs({
  options: {
    key: { type: "string", default: "ec-p256" },
    seconds: { type: "string", default: "2" },
    entries: { type: "string", default: "10000" },
  },
});
const KEY = args.values.key as OpensslKeyType;
const DURATION_MS = Number(args.values.seconds) * 1000;
const ENTRIES = Number(args.values.entries);
const CONCURRENCY = [1, 4, 16];
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
  const proc = new Deno.Command("openssl", {
    args: [
      "ocsp",
      "-index",
      `${dir}/index.txt`,
      "-CA",
      `${dir}/ca.pem`,
      "-rsigner",
      `${dir}/ca.pem`,
      "-rkey",
      `${dir}/ca.key`,
      "-port",
      String(port),
      "-nmin",
      "60",
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn(); // deno-fmt-ignore
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
});
