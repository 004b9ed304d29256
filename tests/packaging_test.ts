/**
 * The Debian package on this host, from `dpkg -i` to the first signature through nginx with a
 * client certificate, then removal and purge. It follows docs/operations.md: the blocks
 * marked `<!-- script: NAME -->` there run verbatim as root (token init as the svcd user on
 * Debian's SoftHSM, a key, the client CA, a client, the policy, the audit log checks).
 *
 * systemd is not PID 1 here, so `systemctl start svcd` is done as the installed unit says (read from
 * it, tests/support/unit.ts): User=/Group= and the user's groups (setpriv), Environment= and
 * EnvironmentFile=, UMask=, LimitNOFILE=, StateDirectory=/LogsDirectory=; LoadCredentialEncrypted=
 * as systemd does it — `systemd-creds decrypt` into a ramfs mounted for the purpose (if no ramfs
 * can be mounted the test says so and uses --allow-weak-credential); Type=notify through a
 * notification socket (start is done at READY=1); ExecStartPre= (check-config) then ExecStart=.
 * `systemd-analyze verify` checks the installed unit. nginx runs the installed example as www-data.
 * Removal stops the daemon (prerm, no service manager) and purge removes the users.
 *
 * Everything made is removed at the end, also on failure; runs are serialised by a lock file
 * (another worktree's test would share the host's package database and users).
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { verifyIndependently } from "./support/oracle.ts";
import { runCommand } from "./support/command.ts";
import { forgetTestTokenEnvironment } from "./support/token.ts";
import { listenNotify, type NotifySocket } from "./support/notify.ts";
import { mountFs, type TestMount } from "./support/mounts.ts";
import { curlNginx, startNginx, type TestNginx } from "./support/nginx.ts";
import { asUnitWould, makeUnitDirectories, readUnit } from "./support/unit.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const DOC = `${ROOT}docs/operations.md`;
const UNIT = "/usr/lib/systemd/system/svcd.service";
const TOKENS = "/var/lib/softhsm/tokens";
const CLIENT = "CN=client1,O=Example,C=DE";
const te = new TextEncoder();

const canRun = Deno.uid() === 0 && await exists("/usr/sbin/nginx") &&
  await exists("/usr/lib/softhsm/libsofthsm2.so") && await exists("/usr/bin/dpkg");

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/**
 * An operator's root shell: only these variables, never what earlier tests in this process set
 * (a SOFTHSM2_CONF of a removed test token would point SoftHSM elsewhere).
 */
const OPERATOR_ENV = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/root",
  LANG: "C.UTF-8",
  NO_COLOR: "1",
  DEBIAN_FRONTEND: "noninteractive",
};

function host(program: string, args: string[]) {
  return runCommand(program, args, { cwd: ROOT, env: OPERATOR_ENV, clearEnv: true });
}

function sh(script: string) {
  return host("bash", ["-euo", "pipefail", "-c", script]);
}

/** The shell block the guide marks `<!-- script: name -->`. */
function docScript(doc: string, name: string): string {
  const m = new RegExp(`<!-- script: ${name} -->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(doc);
  assert.ok(m, `docs/operations.md has no script block '${name}'`);
  return m[1];
}

async function runDocScript(doc: string, name: string) {
  const r = await sh(docScript(doc, name));
  assert.equal(r.code, 0, `docs/operations.md '${name}' failed:\n${r.text}`);
  return r;
}

async function getent(db: string, key: string): Promise<string | undefined> {
  const r = await host("getent", [db, key]);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

async function processesOf(uid: number): Promise<number[]> {
  const pids: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    const st = await Deno.stat(`/proc/${e.name}`).catch(() => undefined);
    if (st?.uid === uid) pids.push(Number(e.name));
  }
  return pids;
}

async function tokenFolders(): Promise<Set<string>> {
  const names = new Set<string>();
  for await (const e of Deno.readDir(TOKENS)) names.add(e.name);
  return names;
}

Deno.test({
  name:
    "package: dpkg -i, the guide's steps, the unit's start, /sign through nginx, audit, removal",
  ignore: !canRun,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const lock = await Deno.open("/run/lock/svcd-package-test.lock", { create: true, write: true });
    await lock.lock(true);
    // The guide's commands run as on a fresh host: no SOFTHSM2_CONF left by an earlier test file.
    forgetTestTokenEnvironment();
    const doc = await Deno.readTextFile(DOC);
    const work = moduleTempDir("svcd-package-");
    await Deno.chmod(work, 0o711); // nginx workers (www-data) keep their temp files below it
    const tokensBefore = await tokenFolders();
    let credentials: TestMount | undefined;
    let notify: NotifySocket | undefined;
    let daemon: Deno.ChildProcess | undefined;
    let daemonLog = Promise.resolve("");
    let nginx: TestNginx | undefined;
    try {
      assert.equal(
        (await host("dpkg-query", ["-W", "svcd"])).code,
        1,
        "a svcd package is installed on this host already; the test will not touch it",
      );
      const build = await host("bash", ["packaging/build-deb.sh"]);
      assert.equal(build.code, 0, build.text);
      const deb = /deb: (\S+\.deb)/.exec(build.text)![1];

      await t.step(
        "dpkg -i: users, groups, socket folder, policy; dependencies declared",
        async () => {
          const info = await host("dpkg-deb", ["-f", deb, "Depends"]);
          assert.match(info.stdout, /adduser/);
          assert.match(info.stdout, /systemd \(>= 250\)/);
          const install = await host("dpkg", ["-i", deb]);
          assert.equal(install.code, 0, install.text);
          assert.ok(await getent("passwd", "svcd"));
          assert.match((await getent("group", "svcd-proxy"))!, /:www-data$|[:,]www-data(,|$)/);
          assert.match((await getent("group", "softhsm"))!, /[:,]svcd(,|$)/);
          const run = await Deno.stat("/run/svcd");
          assert.equal(run.mode! & 0o7777, 0o2750);
          assert.equal((await getent("group", String(run.gid)))?.split(":")[0], "svcd-proxy");
          const policy = await Deno.stat("/etc/svcd/policy");
          assert.equal(policy.mode! & 0o777, 0o640);
        },
      );

      await t.step("systemd-analyze verify accepts the installed unit", async () => {
        const v = await host("systemd-analyze", ["verify", UNIT]);
        assert.equal(v.code, 0, v.text);
      });

      await t.step(
        "the guide: token init as svcd, a key, the client CA, a client, the policy, public side",
        async () => {
          const init = await runDocScript(doc, "token-init");
          assert.match(init.stdout, /not shown/);
          for (const name of await tokenFolders()) {
            if (tokensBefore.has(name)) continue;
            const owner = (await Deno.stat(`${TOKENS}/${name}`)).uid;
            assert.equal(owner, Number((await getent("passwd", "svcd"))!.split(":")[2]));
          }
          assert.equal((await Deno.stat("/etc/svcd/svc-pin.cred")).mode! & 0o777, 0o600);
          await runDocScript(doc, "keygen");
          await runDocScript(doc, "pki");
          await runDocScript(doc, "new-client");
          await runDocScript(doc, "policy");
          await runDocScript(doc, "public");
        },
      );

      const unit = await readUnit(UNIT);
      const env: Record<string, string> = {
        PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        HOME: "/var/lib/svcd",
        USER: "svcd",
        LOGNAME: "svcd",
        ...await unit.environment(),
      };

      await t.step(
        "the unit's start: credential on ramfs, ExecStartPre check, READY=1",
        async () => {
          assert.equal(unit.value("Type"), "notify");
          Object.assign(env, await makeUnitDirectories(unit));
          const [name, file] = unit.value("LoadCredentialEncrypted")!.split(":");
          try {
            credentials = await mountFs("ramfs", { mode: 0o700 });
          } catch (err) {
            console.log(`no ramfs can be mounted here (${err}); using --allow-weak-credential`);
            const dir = await Deno.makeTempDir();
            credentials = { path: dir, cleanup: () => Deno.remove(dir, { recursive: true }) };
            env.SVCD_OPTIONS = `${env.SVCD_OPTIONS ?? ""} --allow-weak-credential`;
          }
          const decrypt = await host("systemd-creds", [
            "decrypt",
            `--name=${name}`,
            file,
            `${credentials.path}/${name}`,
          ]);
          assert.equal(decrypt.code, 0, decrypt.text);
          for (const path of [credentials.path, `${credentials.path}/${name}`]) {
            assert.equal((await host("chown", ["svcd:svcd", path])).code, 0);
          }
          await Deno.chmod(`${credentials.path}/${name}`, 0o400);
          await Deno.chmod(credentials.path, 0o500);
          env.CREDENTIALS_DIRECTORY = credentials.path;

          const pre = await asUnitWould(unit, unit.command("ExecStartPre", env), env);
          const check = await host(pre[0], pre.slice(1));
          assert.equal(check.code, 0, check.text);
          assert.match(check.stdout, /configuration OK/);
          assert.doesNotMatch(check.text, /FATAL|weak/);

          notify = listenNotify(`${work}/notify`);
          await Deno.chmod(notify.path, 0o777);
          env.NOTIFY_SOCKET = notify.path;
          const ready = notify.next();
          const start = await asUnitWould(unit, unit.command("ExecStart", env), env);
          daemon = new Deno.Command(start[0], {
            args: start.slice(1),
            stdin: "null",
            stdout: "null",
            stderr: "piped",
          }).spawn();
          daemonLog = new Response(daemon.stderr).text();
          const exited = daemon.status.then(async () => `daemon exited:\n${await daemonLog}`);
          const first = await Promise.race([ready, exited]);
          assert.match(first, /^READY=1$/m, first);
          const sock = await Deno.lstat("/run/svcd/auth.sock");
          assert.ok(sock.isSocket);
          assert.equal(sock.mode! & 0o777, 0o660);
          assert.equal((await getent("group", String(sock.gid)))?.split(":")[0], "svcd-proxy");
        },
      );

      await t.step(
        "nginx (www-data) with the installed example: /sign 200 with a client certificate",
        async () => {
          nginx = await startNginx(
            work,
            undefined,
            undefined,
            await Deno.readTextFile("/usr/share/doc/svcd/nginx-svcd.conf"),
          );
          const tls = { caCert: "/etc/svcd/tls/server.pem", host: "sign.example.org" };
          const client = { cert: "/etc/svcd/tls/client1.pem", key: "/etc/svcd/tls/client1.key" };
          const message = te.encode("the first signature through nginx");
          const signed = await curlNginx(nginx, tls, client, "/sign", [[
            "X-SVC-Key",
            "web-signing",
          ]], message);
          assert.equal(signed.status, 200, new TextDecoder().decode(signed.body));
          // Checked independently with the key's public half from the token (Web Crypto).
          const pem = await host("svcd", [
            "token",
            "pubkey",
            "--key-label",
            "web-signing",
            "--user",
            "svcd",
          ]);
          assert.equal(pem.code, 0, pem.text);
          const spki = Uint8Array.fromBase64(pem.stdout.replace(/-----[^-]+-----|\s/g, ""));
          assert.ok(await verifyIndependently("ec-p256", { spki }, message, signed.body));
          const verify = await curlNginx(nginx, tls, client, "/verify", [
            ["X-SVC-Key", "web-signing"],
            ["X-SVC-Signature-Length", String(signed.body.length)],
          ], new Uint8Array([...signed.body, ...message]));
          assert.equal(verify.status, 200);
          // A 1 MiB message: signed, then verified as signature + message (more than 1 MiB), which
          // nginx's client_max_body_size and the package's --max-body both allow.
          const big = new Uint8Array(1 << 20).fill(0x61);
          const bigSig = await curlNginx(nginx, tls, client, "/sign", [[
            "X-SVC-Key",
            "web-signing",
          ]], big);
          assert.equal(bigSig.status, 200);
          const bigVerify = await curlNginx(nginx, tls, client, "/verify", [
            ["X-SVC-Key", "web-signing"],
            ["X-SVC-Signature-Length", String(bigSig.body.length)],
          ], new Uint8Array([...bigSig.body, ...big]));
          assert.equal(bigVerify.status, 200, "a 1 MiB message cannot be verified through nginx");
          const without = await curlNginx(nginx, tls, undefined, "/sign", [[
            "X-SVC-Key",
            "web-signing",
          ]], message);
          assert.equal(without.status, 403, "no client certificate: refused by nginx");
        },
      );

      await t.step(
        "the public listener through nginx: the CA certificate, and OCSP says good",
        async () => {
          const base = `http://127.0.0.1:${nginx!.publicPort}`;
          const publicHost = "Host: ocsp.example.org";
          const ca = await host("curl", ["-sS", "-H", publicHost, `${base}/certificates`]);
          assert.equal(ca.code, 0, ca.text);
          const caPem = await Deno.readTextFile("/var/lib/svcd/ca/ca.pem");
          assert.equal(ca.stdout.trim(), caPem.trim());
          const ocsp = await host("openssl", [
            "ocsp",
            "-issuer",
            "/etc/svcd/tls/client-ca.pem",
            "-cert",
            "/etc/svcd/tls/client1.pem",
            "-CAfile",
            "/etc/svcd/tls/client-ca.pem",
            "-url",
            `${base}/ocsp`,
            "-header",
            "Host=ocsp.example.org",
          ]);
          assert.equal(ocsp.code, 0, ocsp.text);
          assert.match(ocsp.stdout, /client1\.pem: good/);
          assert.match(ocsp.text, /Response verify OK/);
        },
      );

      await t.step(
        "the guide's audit checks: the sign line names the client; audit verify OK",
        async () => {
          const r = await runDocScript(doc, "audit");
          assert.ok(r.stdout.includes(`"actor":${JSON.stringify(CLIENT)}`), r.stdout);
          assert.match(r.text, /MACs checked with the token/);
        },
      );

      await t.step(
        "dpkg -r stops the daemon (exit 0); dpkg --purge removes users and state",
        async () => {
          const uid = Number((await getent("passwd", "svcd"))!.split(":")[2]);
          const remove = await host("dpkg", ["-r", "svcd"]);
          assert.equal(remove.code, 0, remove.text);
          const status = await daemon!.status;
          assert.equal(status.code, 0, await daemonLog);
          assert.match(await daemonLog, /stopping: signal/);
          daemon = undefined;
          assert.deepEqual(await processesOf(uid), [], "a process of user svcd still runs");
          const purge = await host("dpkg", ["--purge", "svcd"]);
          assert.equal(purge.code, 0, purge.text);
          assert.equal(await getent("passwd", "svcd"), undefined);
          assert.equal(await getent("group", "svcd"), undefined);
          assert.equal(await getent("group", "svcd-proxy"), undefined);
          assert.ok(!(await exists("/run/svcd")) && !(await exists("/var/lib/svcd")));
          assert.equal((await Deno.stat("/var/log/svcd")).uid, 0, "the audit log is kept, root's");
        },
      );
    } finally {
      await nginx?.stop();
      if (daemon) {
        daemon.kill("SIGKILL");
        await daemon.status;
      }
      notify?.close();
      await credentials?.cleanup().catch((err) => console.error(`cleanup: ${err}`));
      if ((await host("dpkg-query", ["-W", "svcd"])).code === 0) {
        await host("dpkg", ["--purge", "svcd"]);
      }
      for (const name of await tokenFolders()) {
        if (!tokensBefore.has(name)) await Deno.remove(`${TOKENS}/${name}`, { recursive: true });
      }
      for (
        const path of ["/etc/svcd", "/var/log/svcd", "/var/lib/svcd", "/root/svc-audit-sign.pem"]
      ) {
        await Deno.remove(path, { recursive: true }).catch(() => {});
      }
      await Deno.remove(work, { recursive: true });
      lock.close();
    }
  },
});
