/**
 * bench/limit/svcd-limit from TypeScript: the reference server that does per request what svcd does
 * for POST /sign and nothing more (see the comment at the top of bench/limit/limit.c). Built with
 * make (as `make module` builds it), started on a test token, stopped with SIGTERM, which writes
 * its shutdown line and a final checkpoint.
 *
 * @example
 * ```ts
 * import type { TestToken } from "../tests/support/token.ts";
 * declare const token: TestToken, dir: string;
 * const server = await startLimit({ token, policy: "CN=a\tk-ec\n", dir, audit: true });
 * // … POST /sign on server.socket …
 * await server.stop(); // the audit folder is server.auditDir
 * ```
 */

const LIMIT_DIR = new URL("./limit/", import.meta.url).pathname;

/** The parts of a test token the server needs (tests/support/token.ts makes one). */
export interface LimitToken {
  env: Record<string, string>;
  modulePath: string;
  tokenLabel: string;
  credentialsDir: string;
}

/** How to start the server; its socket, policy and audit folder go into `dir`. */
export interface LimitOptions {
  token: LimitToken;
  policy: string;
  dir: string;
  /** The audit log on (in `dir`/limit-audit-N) or off. */
  audit: boolean;
  /** Worker threads (accept, parse, sign). 4 */
  threads?: number;
  /** As svcd's --workers: the per-identity cap is one less. 16 */
  workers?: number;
  /** Lines between signed checkpoints, as svcd's default. 1000 */
  checkpointEvery?: number;
  /** The uid allowed to connect. This process's. */
  proxyUid?: number;
}

/** A running server. */
export interface LimitServer {
  socket: string;
  /** The audit folder (undefined with the audit off). */
  auditDir?: string;
  pid: number;
  stderr(): string;
  /** Sends a signal (e.g. SIGKILL, to show no answer goes out before its line is durable). */
  signal(sig: Deno.Signal): void;
  /** How it ended. */
  status: Promise<Deno.CommandStatus>;
  /** SIGTERM and wait; the exit code. */
  stop(): Promise<number>;
}

/**
 * Builds bench/limit (make: only when a source changed); the path of the program.
 * @example const program = await buildLimit();
 */
export async function buildLimit(): Promise<string> {
  const out = await new Deno.Command("make", {
    args: ["--no-print-directory", "-s", "-C", LIMIT_DIR],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) {
    throw new Error(`building bench/limit failed:\n${new TextDecoder().decode(out.stderr)}`);
  }
  return `${LIMIT_DIR}build/svcd-limit`;
}

let servers = 0;

/**
 * Starts the server and resolves once it listens (it says so on stderr); rejects with its log if
 * it exits first.
 * @example
 * ```ts
 * import type { TestToken } from "../tests/support/token.ts";
 * declare const token: TestToken, dir: string;
 * const server = await startLimit({ token, policy: "CN=a\tk-ec\n", dir, audit: false });
 * ```
 */
export async function startLimit(o: LimitOptions): Promise<LimitServer> {
  const program = await buildLimit();
  const n = ++servers;
  const socket = `${o.dir}/limit-${n}.sock`;
  const policy = `${o.dir}/limit-${n}.policy`;
  await Deno.writeTextFile(policy, o.policy);
  const auditDir = o.audit ? `${o.dir}/limit-audit-${n}` : undefined;
  if (auditDir) await Deno.mkdir(auditDir, { mode: 0o750 });
  const child = new Deno.Command(program, {
    args: [
      ...["--socket", socket, "--proxy-uid", String(o.proxyUid ?? Deno.uid())],
      ...["--policy", policy, "--module", o.token.modulePath, "--token", o.token.tokenLabel],
      ...["--pin-file", `${o.token.credentialsDir}/svc-pin`],
      ...(auditDir ? ["--audit-dir", auditDir] : ["--no-audit"]),
      ...["--threads", String(o.threads ?? 4), "--workers", String(o.workers ?? 16)],
      ...["--checkpoint-every", String(o.checkpointEvery ?? 1000)],
    ],
    env: o.token.env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let log = "";
  let exited = false;
  const status = child.status.then((s) => {
    exited = true;
    return s;
  });
  let wake = () => {};
  const pump = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      log += decoder.decode(chunk, { stream: true });
      wake();
    }
  })();
  while (!log.includes("listening on")) {
    if (exited) {
      await pump;
      if (log.includes("listening on")) break;
      throw new Error(`svcd-limit exited before listening:\n${log}`);
    }
    await Promise.race([status, new Promise<void>((r) => wake = r)]);
  }
  return {
    socket,
    auditDir,
    pid: child.pid,
    stderr: () => log,
    signal: (sig) => child.kill(sig),
    status,
    stop: async () => {
      if (!exited) child.kill("SIGTERM");
      const s = await status;
      await pump;
      return s.code;
    },
  };
}
