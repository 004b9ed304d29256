/**
 * bench/httpload.c from TypeScript: built once per run with gcc, then run as its own process for
 * each figure. The benches that compare svcd with a C client (openssl's responder, p11-kit remote)
 * load svcd with it too, so that neither side pays for a JavaScript client: bench/load.ts spends
 * more CPU per request than the servers it measures, on the same cores.
 *
 * @example
 * ```ts
 * declare const tmpDir: string, sock: string, bodyFile: string;
 * const program = await buildHttpload(tmpDir);
 * const r = await runHttpload(program, { unix: sock, path: "/ocsp", bodyFile, concurrency: 16, seconds: 3 });
 * ```
 */
import type { LoadResult } from "./load.ts";

const SOURCE = new URL("./httpload.c", import.meta.url).pathname;

/** What one run is asked to do (see the comment at the top of bench/httpload.c). */
export interface HttploadOptions {
  /** A UNIX socket path, or… */
  unix?: string;
  /** …an IPv4 `IP:PORT`. */
  tcp?: string;
  path: string;
  bodyFile: string;
  headers?: string[];
  /** Slot i sends `X-SVC-Client-Subject: CN=bench<i mod N>,O=Bench`. */
  identities?: number;
  concurrency: number;
  seconds: number;
  /** Seconds of requests at the start that are not counted. 0.5 */
  warmup?: number;
  /** A command that runs the program, e.g. `setpriv` as the proxy's user (default: none). */
  runAs?: string[];
}

/**
 * Builds bench/httpload.c into `dir`; the path of the program.
 * @example const program = await buildHttpload(await Deno.makeTempDir());
 */
export async function buildHttpload(dir: string): Promise<string> {
  const out = `${dir}/httpload`;
  const cc = await new Deno.Command("gcc", {
    args: ["-O2", "-Wall", "-o", out, SOURCE],
    stderr: "piped",
  }).output();
  if (!cc.success) {
    throw new Error(`building bench/httpload.c failed:\n${new TextDecoder().decode(cc.stderr)}`);
  }
  return out;
}

/**
 * One run in its own process; its figures.
 * @example await runHttpload(program, { unix: sock, path: "/sign", bodyFile, identities: 16, concurrency: 16, seconds: 4 })
 */
export async function runHttpload(program: string, o: HttploadOptions): Promise<LoadResult> {
  const args = [
    ...(o.unix ? ["--unix", o.unix] : ["--tcp", o.tcp!]),
    "--path",
    o.path,
    "--body-file",
    o.bodyFile,
    ...(o.headers ?? []).flatMap((h) => ["--header", h]),
    ...(o.identities ? ["--identities", String(o.identities)] : []),
    "--concurrency",
    String(o.concurrency),
    "--seconds",
    String(o.seconds),
    "--warmup",
    String(o.warmup ?? 0.5),
  ];
  const [cmd, ...cmdArgs] = [...(o.runAs ?? []), program, ...args];
  const out = await new Deno.Command(cmd, { args: cmdArgs, stdout: "piped", stderr: "piped" })
    .output();
  if (out.code !== 0) {
    throw new Error(
      `httpload ${args.join(" ")} exited ${out.code}: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return JSON.parse(new TextDecoder().decode(out.stdout).trim());
}

/** The benches' /sign load: `clients` connections at a time, one identity each, key `key`. */
export interface SignLoadOptions {
  unix: string;
  bodyFile: string;
  key: string;
  clients: number;
  seconds: number;
}

/**
 * One /sign load of bench/compare.ts and bench/limit.ts: c = identities = `clients`, every request
 * counted (the caller warms the server up with a run of its own first).
 * @example
 * ```ts
 * declare const program: string, sock: string, bodyFile: string;
 * await runSignLoad(program, { unix: sock, bodyFile, key: "k-ec", clients: 16, seconds: 4 });
 * ```
 */
export function runSignLoad(program: string, o: SignLoadOptions): Promise<LoadResult> {
  return runHttpload(program, {
    unix: o.unix,
    path: "/sign",
    bodyFile: o.bodyFile,
    headers: [`X-SVC-Key: ${o.key}`],
    identities: o.clients,
    concurrency: o.clients,
    seconds: o.seconds,
    warmup: 0,
  });
}
