/**
 * Load generator for bench/http-echo.ts: `c` client loops, each opening one UNIX connection per
 * request (as the proxy does with keepalive off), sending a 32-byte POST and reading to the close.
 * Prints one JSON line: {c, requests, errors, seconds, rps, p50Ms, p99Ms}.
 *
 * @example
 * ```sh
 * deno run -A bench/http-load.ts --path /tmp/s.sock --c 16 --seconds 3
 * ```
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    path: { type: "string" },
    c: { type: "string", default: "16" },
    seconds: { type: "string", default: "3" },
    warmup: { type: "string", default: "0.5" },
  },
});
if (!values.path) {
  console.error("usage: http-load.ts --path SOCKET [--c N] [--seconds S] [--warmup S]");
  Deno.exit(2);
}
const path = values.path;
const concurrency = Number(values.c);
const seconds = Number(values.seconds);
const warmup = Number(values.warmup);

const request = new TextEncoder().encode(
  "POST /echo HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: CN=bench\r\nContent-Length: 32\r\n\r\n" +
    "0123456789abcdef0123456789abcdef",
);

/** One exchange; returns the bytes received (the response must end with the 32-byte body). */
async function once(buf: Uint8Array): Promise<number> {
  const conn = await Deno.connect({ transport: "unix", path });
  try {
    await conn.write(request);
    let total = 0;
    for (;;) {
      const n = await conn.read(buf);
      if (n === null) break;
      total += n;
    }
    return total;
  } finally {
    conn.close();
  }
}

const latencies: number[] = [];
let errors = 0;
let measuring = false;
let stop = false;

async function loop(): Promise<void> {
  const buf = new Uint8Array(4096);
  while (!stop) {
    const t0 = performance.now();
    try {
      const got = await once(buf);
      if (got < 32) errors++;
      else if (measuring) latencies.push(performance.now() - t0);
    } catch {
      errors++;
    }
  }
}

const loops = Array.from({ length: concurrency }, () => loop());
await new Promise((r) => setTimeout(r, warmup * 1000));
measuring = true;
const start = performance.now();
await new Promise((r) => setTimeout(r, seconds * 1000));
measuring = false;
const elapsed = (performance.now() - start) / 1000;
stop = true;
await Promise.all(loops);
latencies.sort((a, b) => a - b);
const pct = (p: number) =>
  latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))];
console.log(JSON.stringify({
  c: concurrency,
  requests: latencies.length,
  errors,
  seconds: Number(elapsed.toFixed(2)),
  rps: Math.round(latencies.length / elapsed),
  p50Ms: Number(pct(0.5).toFixed(3)),
  p99Ms: Number(pct(0.99).toFixed(3)),
}));
