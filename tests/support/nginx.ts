/**
 * Debian's nginx with the packaged example configuration (packaging/nginx-svcd.conf) for proxy
 * tests: only paths and ports are changed, inside a minimal nginx.conf; workers run as www-data.
 *
 * @example
 * ```ts
 * import type { TestDaemon } from "./daemon.ts";
 * import type { Pki } from "./pki.ts";
 * declare const dir: string, pki: Pki, daemon: TestDaemon, body: Uint8Array;
 * const nginx = await startNginx(dir, pki, { authSocket: daemon.socket });
 * const res = await curlNginx(nginx, pki, pki.clients[0], "/sign", [["X-SVC-Key", "k"]], body);
 * await nginx.stop();
 * ```
 */
import assert from "node:assert/strict";
import type { Pki } from "./pki.ts";

const EXAMPLE = new URL("../../packaging/nginx-svcd.conf", import.meta.url);

/** Where the example's sockets are for this test (the public and metrics ones need not exist). */
export interface NginxSockets {
  authSocket: string;
  publicSocket?: string;
  metricsSocket?: string;
}

/**
 * A running nginx: the HTTPS port of the authenticated server, the HTTP ports of the public and
 * the metrics ones (all on 127.0.0.1).
 */
export interface TestNginx extends NginxPorts {
  /** Re-reads the configuration and the CRL (SIGHUP) and waits until new workers serve it. */
  reload(): Promise<void>;
  /** Rewrites the configuration from another example text (same paths and ports) and reloads. */
  reconfigure(example: string): Promise<void>;
  /** The configuration file nginx runs with (for `nginx -c FILE -s reload`, as an operator would). */
  configPath: string;
  /** The pids of the worker processes now. */
  workers(): Promise<number[]>;
  stop(): Promise<void>;
}

/** The loopback ports of the example's three servers: authenticated (TLS), public, metrics. */
export interface NginxPorts {
  port: number;
  publicPort: number;
  metricsPort: number;
}

/**
 * Free ports for {@link startNginx}, chosen before it starts: a test that must write a public URL
 * into what it makes (a certificate's AIA) knows the port first.
 */
export function freeNginxPorts(): NginxPorts {
  return { port: freePort(), publicPort: freePort(), metricsPort: freePort() };
}

/**
 * The example with test ports, and test paths when `pki` and `sockets` are given (without them the
 * example's own /etc/svcd/tls and /run/svcd paths stay: an installed package), inside a minimal
 * nginx.conf running as www-data.
 */
export async function nginxConfig(
  dir: string,
  pki: Pki | undefined,
  sockets: NginxSockets | undefined,
  ports: NginxPorts,
  example?: string,
  workerProcesses = "1",
): Promise<string> {
  const text = example ?? await Deno.readTextFile(EXAMPLE);
  const paths: Array<[string, string]> = [];
  if (sockets) {
    paths.push(
      ["unix:/run/svcd/auth.sock", `unix:${sockets.authSocket}`],
      ["unix:/run/svcd/public.sock", `unix:${sockets.publicSocket ?? `${dir}/public.sock`}`],
    );
  }
  // The metrics server: always on a test port of 127.0.0.1, so two tests' nginx never collide.
  const metrics: Array<[string, string]> = [
    ["listen 9464;", `listen 127.0.0.1:${ports.metricsPort};`],
    ["unix:/run/svcd/metrics.sock", `unix:${sockets?.metricsSocket ?? `${dir}/metrics.sock`}`],
  ];
  if (pki) {
    paths.push(
      ["/etc/svcd/tls/server.pem", pki.serverCert],
      ["/etc/svcd/tls/server.key", pki.serverKey],
      ["/etc/svcd/tls/client-ca.pem", pki.caCert],
      ["/var/lib/svcd/crl/full.pem", pki.crl],
    );
  }
  const site = replaceAll(text, [
    ...paths,
    ["listen 443 ssl;", `listen 127.0.0.1:${ports.port} ssl;`],
    ["listen 80;", `listen 127.0.0.1:${ports.publicPort};`],
    ...metrics.filter(([from]) => text.includes(from)),
  ]);
  return `user www-data;
worker_processes ${workerProcesses};
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  ${site}
}
`;
}

function replaceAll(text: string, pairs: Array<[string, string]>): string {
  for (const [from, to] of pairs) {
    assert.ok(text.includes(from), `the nginx example no longer contains '${from}'`);
    text = text.replaceAll(from, to);
  }
  return text;
}

/** A free loopback TCP port. */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/**
 * Starts nginx with the example for `sockets` in `dir` (which www-data must be able to enter) and
 * waits until it accepts. `workerProcesses` is nginx's `worker_processes`: 1 for tests (one
 * worker's CPU is one process to read), `auto` for benches (one per core, as Debian's nginx.conf).
 * `ports` default to free ones.
 */
export async function startNginx(
  dir: string,
  pki: Pki | undefined,
  sockets: NginxSockets | undefined,
  example?: string,
  workerProcesses = "1",
  ports: NginxPorts = freeNginxPorts(),
): Promise<TestNginx> {
  const config = (text?: string) => nginxConfig(dir, pki, sockets, ports, text, workerProcesses);
  await Deno.writeTextFile(`${dir}/nginx.conf`, await config(example));
  const child = new Deno.Command("/usr/sbin/nginx", {
    args: ["-c", `${dir}/nginx.conf`, "-g", "daemon off;"],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  let exited = false;
  child.status.then(() => exited = true);
  await waitForPort(ports.port, () => exited, stderr);
  const reload = async () => {
    const before = await workerPids(child.pid);
    child.kill("SIGHUP");
    // The reload is done when none of the old workers is left and a new one runs.
    for (let i = 0; i < 4000; i++) {
      const now = await workerPids(child.pid);
      if (now.length > 0 && !now.some((p) => before.includes(p))) return;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error("nginx did not replace its workers after SIGHUP");
  };
  return {
    ...ports,
    configPath: `${dir}/nginx.conf`,
    workers: () => workerPids(child.pid),
    reload,
    reconfigure: async (text: string) => {
      await Deno.writeTextFile(`${dir}/nginx.conf`, await config(text));
      await reload();
    },
    stop: async () => {
      if (!exited) child.kill("SIGQUIT");
      await child.status;
      await stderr;
    },
  };
}

async function workerPids(master: number): Promise<number[]> {
  const text = await Deno.readTextFile(`/proc/${master}/task/${master}/children`).catch(() => "");
  return text.trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Waits until the port accepts (or nginx exits: then fails with its error output). */
async function waitForPort(
  port: number,
  exited: () => boolean,
  stderr: Promise<string>,
): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (exited()) throw new Error(`nginx exited: ${await stderr}`);
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  throw new Error("nginx did not start listening");
}

/** What curl got. */
export interface CurlResult {
  status: number;
  body: Uint8Array;
}

/**
 * curl's TLS options for the test nginx: the CA that checks the server's certificate and, where
 * given, the client's certificate and key.
 *
 * @example
 * ```ts
 * declare const pki: { caCert: string; clients: Array<{ cert: string; key: string }> };
 * const args = ["-sS", ...curlTlsArgs(pki.caCert, pki.clients[0]), "https://localhost:8443/token"];
 * ```
 */
export function curlTlsArgs(caCert: string, client?: { cert: string; key: string }): string[] {
  return ["--cacert", caCert, ...(client ? ["--cert", client.cert, "--key", client.key] : [])];
}

/**
 * A request through nginx's authenticated server with curl, with a client certificate or none;
 * the server certificate is checked against `tls.caCert`, for `tls.host` (default localhost).
 */
export async function curlNginx(
  nginx: Pick<TestNginx, "port">,
  tls: { caCert: string; host?: string },
  client: { cert: string; key: string } | undefined,
  path: string,
  headers: Array<[string, string]>,
  body?: Uint8Array,
): Promise<CurlResult> {
  const dir = await Deno.makeTempDir();
  try {
    const args = [
      "-sS",
      ...curlTlsArgs(tls.caCert, client),
      ...(tls.host ? ["--resolve", `${tls.host}:${nginx.port}:127.0.0.1`] : []),
      "-o",
      `${dir}/body`,
      "-w",
      "%{http_code}",
      ...headers.flatMap(([n, v]) => ["-H", `${n}: ${v}`]),
      ...(body ? ["--data-binary", `@${dir}/in`] : []),
      `https://${tls.host ?? "localhost"}:${nginx.port}${path}`,
    ];
    if (body) await Deno.writeFile(`${dir}/in`, body);
    const out = await new Deno.Command("curl", { args, stdout: "piped", stderr: "piped" })
      .output();
    const status = Number(new TextDecoder().decode(out.stdout));
    const respBody = await Deno.readFile(`${dir}/body`).catch(() => new Uint8Array());
    return { status, body: respBody };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
