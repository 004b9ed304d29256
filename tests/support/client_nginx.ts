/**
 * What `svcd client` meets on a client host, for its end-to-end tests and benches: a test token,
 * the daemon granting every key to one client subject, and Debian's nginx in front with the test
 * PKI's client certificates ({@link startClientStack}); and `svcd client …` run as a user runs it
 * ({@link runClientThroughNginx}): a subprocess with exactly the permissions of deno.json's
 * `client` task, SVCD_* in its environment naming nginx's port, the proxy's CA and a client
 * certificate.
 *
 * @example
 * ```ts
 * import { runClientThroughNginx, startClientStack } from "./client_nginx.ts";
 * const stack = await startClientStack({ keys: { k: "ec-p256" }, prefix: "svcd-x-" });
 * const r = await runClientThroughNginx(stack.nginx, stack.pki, ["keys"]);
 * await stack.stop();
 * ```
 */
import { makePki, type Pki } from "./pki.ts";
import { type NginxPorts, startNginx, type TestNginx } from "./nginx.ts";
import { type CommandResult, runCommand } from "./command.ts";
import { makeTestToken, type TestToken } from "./token.ts";
import { makeProxyWorkDir, startDaemon, type TestDaemon } from "./daemon.ts";

/** The client certificate's subject, granted every key of the token. */
export const CLIENT_SUBJECT = "CN=alice,O=Example,C=DE";
/** nginx's workers run as www-data: the daemon's --proxy-uid. */
const WWW_DATA = 33;

/** A running token, daemon and nginx. */
export interface ClientStack {
  token: TestToken;
  pki: Pki;
  daemon: TestDaemon;
  nginx: TestNginx;
  /** A temporary folder (0711) removed by `stop()`. */
  dir: string;
  /** Stops nginx and the daemon, removes the token and the folder. */
  stop(): Promise<void>;
}

/** What {@link startClientStack} makes. */
export interface ClientStackOptions {
  /** Key pairs to create, label → key type (a type the module lacks is left out). */
  keys: Record<string, string>;
  /** The temporary folder's name prefix. */
  prefix: string;
  /**
   * More `svcd serve` arguments; given the folder and the token, so they may name files made
   * there (a CA folder on the token).
   */
  daemonArgs?: (dir: string, token: TestToken) => Promise<string[]> | string[];
  /** nginx's configuration text in place of the packaged example. */
  example?: (dir: string) => Promise<string>;
}

/** Token, daemon (every key granted to {@link CLIENT_SUBJECT}) and nginx, in that order. */
export async function startClientStack(opts: ClientStackOptions): Promise<ClientStack> {
  const token = await makeTestToken({ keys: opts.keys });
  const dir = await Deno.makeTempDir({ prefix: opts.prefix });
  const parts: { daemon?: TestDaemon; nginx?: TestNginx } = {};
  const stop = async () => {
    await parts.nginx?.stop().catch(() => {});
    await parts.daemon?.stop().catch(() => {});
    await token.cleanup();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  };
  try {
    await Deno.chmod(dir, 0o711);
    const pki = await makePki(dir, [CLIENT_SUBJECT]);
    const workDir = await makeProxyWorkDir(`${dir}/daemon`, WWW_DATA);
    const daemon = parts.daemon = await startDaemon({
      token,
      workDir,
      proxyUid: WWW_DATA,
      policy: token.keys.map((k) => `${CLIENT_SUBJECT}\t${k}\n`).join(""),
      args: await opts.daemonArgs?.(dir, token) ?? [],
    });
    const example = await opts.example?.(dir);
    const nginx = parts.nginx = await startNginx(dir, pki, { authSocket: daemon.socket }, example);
    return { token, pki, daemon, nginx, dir, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/** The permission flags of deno.json's `client` task. */
export async function clientFlags(): Promise<string[]> {
  const task: string = JSON.parse(await Deno.readTextFile(CONFIG)).tasks.client;
  return task.replace(/^deno run /, "").replace(/ main\.ts client$/, "").split(" ");
}

/** `svcd client ARGS` with the task's permissions and the first client certificate of `pki`. */
export async function runClientThroughNginx(
  nginx: NginxPorts,
  pki: Pki,
  args: string[],
): Promise<CommandResult> {
  const client = pki.clients[0];
  return await runCommand(
    Deno.execPath(),
    ["run", ...await clientFlags(), MAIN, "client", ...args],
    {
      env: {
        SVCD_ADDR: `https://localhost:${nginx.port}`,
        SVCD_CACERT: pki.caCert,
        SVCD_CLIENT_CERT: client.cert,
        SVCD_CLIENT_KEY: client.key,
        NO_COLOR: "1",
      },
    },
  );
}
