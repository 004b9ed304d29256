/**
 * The package's `svcd-crl.path` and `svcd-crl-reload.service`, done as systemd does them where
 * systemd is not PID 1 (tests, CI). What is watched and what runs are read from the shipped files
 * in packaging/, so a test exercises what is shipped:
 *
 * - `PathChanged=` of the path unit is watched as systemd watches it: inotify on the file's folder,
 *   so a new file renamed over the name is seen; each change starts the `Unit=` it names once (a
 *   change while it runs starts it again afterwards, as systemd queues a start job).
 * - The service's `ExecStart=`, `systemctl try-reload-or-restart nginx.service`, is what systemctl
 *   does for a running nginx: nginx.service's reload, `nginx -s reload` — here with the test's
 *   configuration file.
 *
 * @example
 * ```ts
 * declare const crlPem: string, nginxConfig: string;
 * const unit = await startCrlPathUnit(crlPem, nginxConfig);
 * // … the CRL changes, nginx reloads …
 * await unit.stop();
 * ```
 */
import assert from "node:assert/strict";
import { basename, dirname } from "node:path";
import { readUnit } from "./unit.ts";
import { runCommand } from "./command.ts";

const PACKAGING = new URL("../../packaging/", import.meta.url).pathname;
const NGINX_EXAMPLE = `${PACKAGING}nginx-svcd.conf`;
/** systemctl verbs that reload a running service (try-: only a running one). */
const RELOAD_VERBS = ["reload", "try-reload-or-restart", "reload-or-restart"];

/** The stand-in, running. */
export interface CrlPathUnit {
  /** The path the shipped unit watches (PathChanged=). */
  readonly watches: string;
  /** How often the service ran (nginx was told to reload). */
  readonly runs: number;
  /** Stops watching; resolves once a run in progress is done, rejects if a run failed. */
  stop(): Promise<void>;
}

/** Where the unit files and the nginx example are: the source tree's, or a package's. */
export interface ShippedFiles {
  /** The folder of svcd-crl.path and the service it names (default packaging/). */
  units: string;
  /** The nginx example (default packaging/nginx-svcd.conf). */
  example: string;
}

/** The files in the source tree. */
export const SOURCE_TREE: ShippedFiles = { units: PACKAGING, example: NGINX_EXAMPLE };

/** The files as the package installs them. */
export const INSTALLED: ShippedFiles = {
  units: "/usr/lib/systemd/system/",
  example: "/usr/share/doc/svcd/nginx-svcd.conf",
};

/**
 * Starts the stand-in for the shipped path unit, watching `crlPem` where the unit watches its
 * PathChanged= path, and reloading the nginx that runs with `nginxConfig`. Fails when the shipped
 * path unit no longer watches the file the nginx example's `ssl_crl` reads, or when its service
 * runs a command the stand-in does not know.
 */
export async function startCrlPathUnit(
  crlPem: string,
  nginxConfig: string,
  shipped: ShippedFiles = SOURCE_TREE,
): Promise<CrlPathUnit> {
  const path = await readUnit(`${shipped.units}svcd-crl.path`, "Path");
  const watches = path.value("PathChanged");
  assert.ok(watches, "svcd-crl.path has no PathChanged=");
  const sslCrl = /^\s*ssl_crl\s+(\S+);/m.exec(await Deno.readTextFile(shipped.example))?.[1];
  assert.equal(watches, sslCrl, "svcd-crl.path does not watch the file nginx's ssl_crl reads");
  const serviceName = path.value("Unit");
  assert.ok(serviceName, "svcd-crl.path names no Unit=");
  const service = await readUnit(`${shipped.units}${serviceName}`);
  const reload = nginxReload(service.command("ExecStart", {}), nginxConfig);

  let runs = 0;
  let running: Promise<void> | undefined;
  let again = false;
  let failure: Error | undefined;
  const start = () => {
    if (running) {
      again = true;
      return;
    }
    running = (async () => {
      do {
        again = false;
        const r = await runCommand(reload[0], reload.slice(1));
        if (r.code !== 0) failure ??= new Error(`${reload.join(" ")}: ${r.text}`);
        runs++;
      } while (again);
      running = undefined;
    })();
  };
  const watcher = Deno.watchFs(dirname(crlPem), { recursive: false });
  const name = basename(crlPem);
  const watching = (async () => {
    for await (const event of watcher) {
      if (event.paths.some((p) => basename(p) === name && dirname(p) === dirname(crlPem))) start();
    }
  })();
  return {
    watches,
    get runs() {
      return runs;
    },
    stop: async () => {
      watcher.close();
      await watching;
      await running;
      if (failure) throw failure;
    },
  };
}

/** What the service's ExecStart= does to a running nginx, as argv for the test's nginx. */
function nginxReload(execStart: string[], nginxConfig: string): string[] {
  const [program, verb, unit] = execStart;
  const known = basename(program) === "systemctl" && RELOAD_VERBS.includes(verb) &&
    /^nginx(\.service)?$/.test(unit ?? "") && execStart.length === 3;
  assert.ok(
    known,
    `svcd-crl-reload.service runs '${execStart.join(" ")}', which the stand-in does not know: ` +
      "teach tests/support/crl_path_unit.ts what it does",
  );
  return ["/usr/sbin/nginx", "-c", nginxConfig, "-s", "reload"];
}
