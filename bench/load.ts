/**
 * A closed-loop load generator for the daemon's UNIX socket: `concurrency` loops, each sending one
 * request per connection (the daemon closes every connection) for `seconds`, then prints one JSON
 * line with requests/s and latency percentiles. Runs as its own process so that it shares the
 * cores with the daemon the way a proxy would.
 *
 * @example
 * ```sh
 * deno run -A bench/load.ts --socket .demo/auth.sock --key demo-ec --concurrency 16 --seconds 5
 * deno run -A bench/load.ts --socket /tmp/echo.sock --path /echo --seconds 3 --warmup 0.5
 * deno run -A bench/load.ts --socket .demo/public.sock --path /ocsp --body-file req.der
 * deno run -A bench/load.ts --tcp 127.0.0.1:8888 --path / --body-file req.der   # openssl ocsp -port
 * ```
 */
import { benchArgs, count, nonNegativeNumber, positiveNumber, valueOption } from "./_args.ts";

/** One run's figures. */
export interface LoadResult {
  concurrency: number;
  requests: number;
  errors: number;
  seconds: number;
  perSecond: number;
  p50ms: number;
  p99ms: number;
}

const te = new TextEncoder();

function requestBytes(path: string, subject: string, key: string, body: Uint8Array): Uint8Array {
  const head = te.encode(
    `POST ${path} HTTP/1.1\r\nHost: svcd\r\nX-SVC-Client-Subject: ${subject}\r\n` +
      `X-SVC-Key: ${key}\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  const out = new Uint8Array(head.length + body.length);
  out.set(head);
  out.set(body, head.length);
  return out;
}

/** Where the requests go: a UNIX socket path, or `tcp:HOST:PORT` (another server, for comparison). */
function connectTo(target: string): Promise<Deno.Conn> {
  const tcp = /^tcp:(.+):(\d+)$/.exec(target);
  return tcp
    ? Deno.connect({ hostname: tcp[1], port: Number(tcp[2]) })
    : Deno.connect({ transport: "unix", path: target });
}

async function once(socket: string, bytes: Uint8Array, buf: Uint8Array): Promise<boolean> {
  const conn = await connectTo(socket);
  try {
    await conn.write(bytes);
    let first = true, ok = false;
    while (true) {
      const n = await conn.read(buf);
      if (n === null) break;
      if (first) ok = buf[9] === 0x32 && buf[10] === 0x30 && buf[11] === 0x30; // "200"
      first = false;
    }
    return ok;
  } finally {
    conn.close();
  }
}

/**
 * Runs the load; subjects are `CN=bench<i>` per loop so the per-identity cap does not apply.
 *
 * @example
 * ```ts
 * declare const socket: string;
 * const r = await runLoad({ socket, key: "k", concurrency: 16, seconds: 3 });
 * ```
 */
export async function runLoad(opts: {
  /** A UNIX socket path, or `tcp:HOST:PORT`. */
  socket: string;
  key: string;
  concurrency: number;
  seconds: number;
  path?: string;
  messageBytes?: number;
  /** A fixed body for every request (e.g. an OCSP request); default: random `messageBytes`. */
  body?: Uint8Array;
}): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + opts.seconds * 1000;
  const start = performance.now();
  await Promise.all(Array.from({ length: opts.concurrency }, async (_, i) => {
    const body = opts.body ?? crypto.getRandomValues(new Uint8Array(opts.messageBytes ?? 32));
    const bytes = requestBytes(opts.path ?? "/sign", `CN=bench${i},O=Bench`, opts.key, body);
    const buf = new Uint8Array(16384);
    while (performance.now() < end) {
      const t0 = performance.now();
      const ok = await once(opts.socket, bytes, buf).catch(() => false);
      latencies.push(performance.now() - t0);
      if (!ok) errors++;
    }
  }));
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  return {
    concurrency: opts.concurrency,
    requests: latencies.length,
    errors,
    seconds,
    perSecond: (latencies.length - errors) / seconds,
    p50ms: pct(0.5),
    p99ms: pct(0.99),
  };
}

if (import.meta.main) {
  const { values, exitWithUsage } = benchArgs({
    url: import.meta.url,
    measures: "A closed-loop load generator: --concurrency loops, each sending one request per " +
      "connection for --seconds, then one JSON line with requests/s and latency percentiles.",
    options: {
      socket: { type: "string", value: "PATH", help: "the UNIX socket to load" },
      tcp: { type: "string", value: "HOST:PORT", help: "a TCP server to load instead" },
      key: { type: "string", value: "LABEL", help: "X-SVC-Key of each request (needed for /sign)" },
      concurrency: valueOption(count, "16", "loops in flight"),
      seconds: valueOption(positiveNumber, "5", "seconds measured"),
      path: { type: "string", default: "/sign", value: "PATH", help: "the request path" },
      warmup: {
        type: "string",
        default: "0",
        check: nonNegativeNumber,
        help: "seconds of load before the measured run, unmeasured",
      },
      "body-file": {
        type: "string",
        value: "FILE",
        help: "a fixed body for every request (default: 32 random bytes per loop)",
      },
    },
    examples: [
      "deno run -A bench/load.ts --socket .demo/auth.sock --key demo-ec --concurrency 16 " +
      "--seconds 5",
      "deno run -A bench/load.ts --tcp 127.0.0.1:8888 --path / --body-file req.der",
    ],
  });
  // /sign needs a key; other paths (bench/http-echo.ts's /echo) ignore the header.
  const key = values.key ?? (values.path === "/sign" ? exitWithUsage("/sign needs --key") : "none");
  const socket = values.tcp
    ? `tcp:${values.tcp}`
    : values.socket ?? exitWithUsage("give --socket or --tcp");
  const opts = {
    socket,
    key,
    concurrency: Number(values.concurrency),
    seconds: Number(values.seconds),
    path: values.path,
    body: values["body-file"] ? Deno.readFileSync(values["body-file"]) : undefined,
  };
  // A fresh process: let the JIT settle before the measured run, unmeasured.
  const warmup = Number(values.warmup);
  if (warmup > 0) await runLoad({ ...opts, seconds: warmup });
  console.log(JSON.stringify(await runLoad(opts)));
}
