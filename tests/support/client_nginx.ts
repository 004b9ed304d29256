/**
 * `svcd client …` run as a user runs it through the proxy: a subprocess with exactly the
 * permissions of deno.json's `client` task, SVCD_* in its environment naming nginx's port, the
 * proxy's CA and a client certificate of the test PKI.
 *
 * @example
 * ```ts
 * import { runClientThroughNginx } from "./client_nginx.ts";
 * import type { Pki } from "./pki.ts";
 * import type { TestNginx } from "./nginx.ts";
 * declare const nginx: TestNginx, pki: Pki;
 * const r = await runClientThroughNginx(nginx, pki, ["keys"]);
 * ```
 */
import type { Pki } from "./pki.ts";
import type { NginxPorts } from "./nginx.ts";
import { type CommandResult, runCommand } from "./command.ts";

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
