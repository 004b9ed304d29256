/**
 * Starts `svcd serve` as a child process for integration tests and waits until it listens (it
 * prints "listening on" to stderr), never by sleeping.
 *
 * @example
 * ```ts
 * import { request } from "./http_client.ts";
 * import type { TestToken } from "./token.ts";
 * declare const token: TestToken;
 * const d = await startDaemon({ token, policy: "CN=a\tk\n" });
 * const res = await request(d.socket, {
 *   method: "POST",
 *   path: "/sign",
 *   headers: [["X-SVC-Client-Subject", "CN=a"], ["X-SVC-Key", "k"]],
 *   body: "message",
 * });
 * await d.stop();
 * ```
 */
import { moduleTempDir } from "./temp_dir.ts";

const MAIN = new URL("../../main.ts", import.meta.url).pathname;

/**
 * Makes the folder `path` as the package lays out /run/svcd: root's, setgid with the proxy's group
 * (`proxyGid`), mode 02750, so every socket the daemon creates there is the proxy's group's.
 */
export async function makeProxyWorkDir(path: string, proxyGid: number): Promise<string> {
  await Deno.mkdir(path);
  await Deno.chown(path, 0, proxyGid);
  await Deno.chmod(path, 0o2750);
  return path;
}

/** The parts of a test token the daemon needs (tests/support/token.ts makes one). */
export interface DaemonToken {
  dir: string;
  env: Record<string, string>;
  modulePath: string;
  tokenLabel: string;
  credentialsDir: string;
}

/** Options of a test daemon; `policy` is written to a file in a fresh folder. */
export interface DaemonOptions {
  token: DaemonToken;
  policy: string | Uint8Array;
  args?: string[];
  /** Reuse folders (audit, state, socket) of an earlier daemon, e.g. to test a restart. */
  workDir?: string;
  proxyUid?: number;
  /** Script and leading arguments to run instead of `main.ts serve` (bench/serve.ts). */
  entry?: string[];
  /** A whole command instead of `deno run -A main.ts serve` (the packaged `svcd serve`). */
  command?: string[];
  /**
   * Benches: V8 traces every garbage collection of every isolate (`--trace-gc`) into this file
   * (bench/_gc_trace.ts reads it). Not with `command`.
   */
  gcTraceFile?: string;
}

/** A running daemon. `stderr` accumulates its own log. */
export interface TestDaemon {
  socket: string;
  workDir: string;
  policyPath: string;
  auditDir: string;
  stateDir: string;
  pid: number;
  stderr(): string;
  /**
   * Waits until the daemon's log contains `text`, or `text(log)` holds (or it exits: then throws
   * with the log).
   */
  waitForLog(text: string | RegExp | ((log: string) => boolean)): Promise<void>;
  signal(sig: Deno.Signal): void;
  /** SIGTERM and wait; returns the exit code. */
  stop(): Promise<number>;
  status: Promise<Deno.CommandStatus>;
}

/**
 * The options of `svcd serve` for a daemon whose files live in `workDir` (socket `auth.sock`,
 * `policy`, `audit/`, `state/`) on a test token.
 */
export function serveArgs(
  token: Pick<DaemonToken, "modulePath" | "tokenLabel">,
  workDir: string,
  proxyUid: number | null,
): string[] {
  return [
    "--socket",
    `${workDir}/auth.sock`,
    "--proxy-uid",
    String(proxyUid ?? 0),
    "--policy",
    `${workDir}/policy`,
    "--module",
    token.modulePath,
    "--token",
    token.tokenLabel,
    "--audit-dir",
    `${workDir}/audit`,
    "--state-dir",
    `${workDir}/state`,
    // Test credentials are plain files on disk, which the daemon refuses as weak otherwise; the
    // tests of that refusal leave this out (tests/check_config_test.ts).
    "--allow-weak-credential",
  ];
}

/**
 * Spawns the daemon and resolves once it is listening; rejects with its log if it exits first.
 */
export async function startDaemon(opts: DaemonOptions): Promise<TestDaemon> {
  // Its files are still read after stop() (the audit log, the state): removed with the module.
  const workDir = opts.workDir ?? moduleTempDir("svcd-daemon-");
  const policyPath = `${workDir}/policy`;
  await Deno.writeFile(
    policyPath,
    typeof opts.policy === "string" ? new TextEncoder().encode(opts.policy) : opts.policy,
  );
  const socket = `${workDir}/auth.sock`;
  const auditDir = `${workDir}/audit`;
  const stateDir = `${workDir}/state`;
  const v8Flags = opts.gcTraceFile ? ["--v8-flags=--trace-gc"] : [];
  const [program, ...prefix] = opts.command ??
    [Deno.execPath(), "run", "-A", ...v8Flags, ...(opts.entry ?? [MAIN, "serve"])];
  const child = new Deno.Command(program, {
    args: [
      ...prefix,
      ...serveArgs(opts.token, workDir, opts.proxyUid ?? Deno.uid()),
      ...(opts.args ?? []),
    ],
    env: { ...opts.token.env, CREDENTIALS_DIRECTORY: opts.token.credentialsDir, NO_COLOR: "1" },
    stdin: "null",
    stdout: opts.gcTraceFile ? "piped" : "null",
    stderr: "piped",
  }).spawn();
  const traced = opts.gcTraceFile &&
    Deno.open(opts.gcTraceFile, { write: true, create: true, truncate: true })
      .then((file) => child.stdout.pipeTo(file.writable));
  let log = "";
  const waiters: Array<() => void> = [];
  const status = child.status;
  const pump = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      log += decoder.decode(chunk, { stream: true });
      for (const w of waiters.splice(0)) w();
    }
    for (const w of waiters.splice(0)) w();
  })();
  let exited = false;
  status.then(() => {
    exited = true;
  });
  const waitForLog = async (text: string | RegExp | ((log: string) => boolean)) => {
    const seen = () =>
      typeof text === "string"
        ? log.includes(text)
        : typeof text === "function"
        ? text(log)
        : text.test(log);
    while (!seen()) {
      if (exited) {
        await pump;
        if (seen()) return;
        throw new Error(`daemon exited before logging ${text}:\n${log}`);
      }
      await Promise.race([new Promise<void>((r) => waiters.push(r)), status]);
    }
  };
  await waitForLog("listening on");
  return {
    socket,
    workDir,
    policyPath,
    auditDir,
    stateDir,
    pid: child.pid,
    stderr: () => log,
    waitForLog,
    signal: (sig) => child.kill(sig),
    stop: async () => {
      if (!exited) child.kill("SIGTERM");
      const s = await status;
      await pump;
      await traced;
      return s.code;
    },
    status,
  };
}
