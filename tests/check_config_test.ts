/**
 * `svcd --check-config`: the operator's dry run. It checks options, the open-file limit, the socket
 * and whether the proxy can reach it, the policy, the folders, the credential and the token — and
 * never logs in (a failed login counts toward the five-failure lockout). Every finding is one line
 * saying what was wrong and what to do; a fatal one makes the exit non-zero, and `serve` refuses
 * to start on it (before any login). One step per finding.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken, type TestToken } from "./support/token.ts";
import { runDeno } from "./support/command.ts";
import { canMount, mountFs, type TestMount } from "./support/mounts.ts";
import { opensslCa } from "./support/ocsp.ts";

const MAIN = new URL("../main.ts", import.meta.url).pathname;
const WWW_DATA = 33;

interface Fixture {
  token: TestToken;
  dir: string;
  /** The credentials directory the baseline uses: a ramfs when this process may mount one. */
  creds: string;
  /** Extra options of the baseline: --allow-weak-credential when no ramfs could be mounted. */
  weak: string[];
}

function daemonArgs(f: Fixture, extra: string[]): string[] {
  return [
    "--proxy-uid",
    String(Deno.uid()),
    "--socket",
    `${f.dir}/auth.sock`,
    "--policy",
    `${f.dir}/policy`,
    "--module",
    f.token.modulePath,
    "--token",
    f.token.tokenLabel,
    "--audit-dir",
    `${f.dir}/audit`,
    "--state-dir",
    `${f.dir}/state`,
    ...f.weak,
    ...extra,
  ];
}

async function check(f: Fixture, extra: string[] = [], env: Record<string, string> = {}) {
  return await runDeno([MAIN, "--check-config", ...daemonArgs(f, extra)], {
    env: { ...f.token.env, CREDENTIALS_DIRECTORY: f.creds, ...env },
  });
}

/** `serve` with the same options: it must refuse before a login, with the same message. */
async function serve(f: Fixture, extra: string[] = [], env: Record<string, string> = {}) {
  return await runDeno([MAIN, "serve", ...daemonArgs(f, extra)], {
    env: { ...f.token.env, CREDENTIALS_DIRECTORY: f.creds, ...env },
  });
}

function fatalLines(text: string): string[] {
  return text.split("\n").filter((l) => l.includes("check: FATAL:"));
}

/** A credentials directory holding `pin` as svc-pin with `mode`, on the mount (or a folder). */
async function credentialsIn(path: string, pin: Uint8Array, mode = 0o400): Promise<string> {
  await Deno.writeFile(`${path}/svc-pin`, pin, { mode });
  await Deno.chmod(`${path}/svc-pin`, mode);
  return path;
}

Deno.test({
  name: "check-config: a good configuration passes without a login; each finding is named",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { k: "ec-p256" } });
    const dir = moduleTempDir("svcd-check-");
    const mounts: TestMount[] = [];
    const mount = async (...a: Parameters<typeof mountFs>) => {
      const m = await mountFs(...a);
      mounts.push(m);
      return m;
    };
    try {
      const pin = await Deno.readFile(`${token.credentialsDir}/svc-pin`);
      const creds = canMount
        ? await credentialsIn((await mount("ramfs")).path, pin)
        : token.credentialsDir;
      const f: Fixture = { token, dir, creds, weak: canMount ? [] : ["--allow-weak-credential"] };
      await Deno.writeTextFile(`${dir}/policy`, "CN=a,O=Example,C=DE\tk\n");

      await t.step("good: exit 0, no finding, says no login was attempted", async () => {
        const r = await check(f);
        assert.equal(r.code, 0, r.text);
        assert.match(r.text, /no login attempted/);
        assert.match(r.text, /served by the main thread, 16 workers/, "--threads, its default");
        assert.match(r.text, /policy \(1 of at most 1000000 grants, 22 bytes\)/);
        assert.match(r.text, /configuration OK/);
        assert.doesNotMatch(r.text, /FATAL|warning/);
        await Deno.stat(`${dir}/auth.sock`).then(
          () => assert.fail("check-config must not create the socket"),
          () => {},
        );
      });

      await t.step("legacy slash-form subjects are warned about", async () => {
        await Deno.writeTextFile(`${dir}/policy`, "/C=DE/O=Example/CN=a\tk\n");
        const r = await check(f);
        assert.equal(r.code, 0, r.text);
        assert.match(r.text, /warning: .*CN=a,O=Example,C=DE/);
        await Deno.writeTextFile(`${dir}/policy`, "CN=a,O=Example,C=DE\tk\n");
      });

      await t.step("a broken policy names the file and line", async () => {
        await Deno.writeTextFile(`${dir}/broken`, "# ok\nCN=a k\n");
        const r = await check(f, ["--policy", `${dir}/broken`]);
        assert.equal(r.code, 1);
        assert.match(r.text, /broken.*line 2/);
      });

      await t.step("a policy over --policy-max-grants or its byte limit is refused", async () => {
        await Deno.writeTextFile(`${dir}/huge`, "#".repeat((1 << 20) + 1));
        const r = await check(f, ["--policy", `${dir}/huge`, "--policy-max-grants", "2"]);
        assert.equal(r.code, 1, r.text);
        assert.match(r.text, /huge: the file is 1048577 bytes; .*at most 1048576 bytes/);
        await Deno.writeTextFile(`${dir}/many`, "CN=a,O=Ex\tk\nCN=b,O=Ex\tk\nCN=c,O=Ex\tk\n");
        const many = await check(f, ["--policy", `${dir}/many`, "--policy-max-grants", "2"]);
        assert.equal(many.code, 1, many.text);
        assert.match(many.text, /FATAL.*many line 3: more than 2 grants.*--policy-max-grants/);
        const fits = await check(f, ["--policy", `${dir}/many`, "--policy-max-grants", "3"]);
        assert.equal(fits.code, 0, fits.text);
        assert.match(fits.text, /policy \(3 of at most 3 grants, 36 bytes\)/);
      });

      await t.step("a policy label the token does not have: a warning naming it", async () => {
        await Deno.writeTextFile(`${dir}/labels`, "CN=a,O=Example,C=DE\tk\nCN=b\tnope\n");
        const r = await check(f, ["--policy", `${dir}/labels`]);
        assert.equal(r.code, 0, r.text);
        assert.match(r.text, /warning: policy line 2 grants 'nope', but token 'svcd' has no key/);
        assert.doesNotMatch(r.text, /grants 'k'/);
      });

      await t.step("a world-writable policy file is fatal", async () => {
        await Deno.chmod(`${dir}/policy`, 0o666);
        const r = await check(f);
        await Deno.chmod(`${dir}/policy`, 0o640);
        assert.equal(r.code, 1, r.text);
        assert.match(r.text, /FATAL: --policy .*policy is world-writable .*chmod o-w/);
      });

      await t.step("a missing credential names the file and the likely cause", async () => {
        const r = await check(f, [], { CREDENTIALS_DIRECTORY: `${dir}/none` });
        assert.equal(r.code, 1);
        assert.match(r.text, /svc-pin/);
        assert.match(r.text, /LoadCredentialEncrypted/);
      });

      await t.step("a credential readable by others (0644) is fatal", async () => {
        const place = canMount ? (await mount("ramfs")).path : await Deno.makeTempDir();
        const r = await check(f, [], {
          CREDENTIALS_DIRECTORY: await credentialsIn(place, pin, 0o644),
        });
        assert.equal(r.code, 1, r.text);
        assert.match(r.text, /FATAL: credential .*svc-pin is mode 0644: .*0400/);
      });

      await t.step(
        "a credential outside ramfs is weak: fatal unless --allow-weak-credential",
        async () => {
          // The test token's folder is under the temp folder: a disk file system on Debian 12,
          // tmpfs on Debian 13 (its default /tmp). Either is weak; the finding names which.
          const disk = { CREDENTIALS_DIRECTORY: token.credentialsDir };
          const r = await runDeno(
            [MAIN, "--check-config", ...daemonArgs({ ...f, weak: [] }, [])],
            { env: { ...token.env, ...disk } },
          );
          assert.equal(r.code, 1, r.text);
          assert.match(
            r.text,
            /FATAL: credential .* is weak: it is on (a disk file system|tmpfs)\b.*, not on ramfs/,
          );
          assert.match(r.text, /--allow-weak-credential/);
          const allowed = await check(f, ["--allow-weak-credential"], disk);
          assert.equal(allowed.code, 0, allowed.text);
          assert.match(
            allowed.text,
            /warning: credential .* is weak: .*allowed by --allow-weak-credential/,
          );
        },
      );

      await t.step({
        name: "a credential on tmpfs is weak too; on ramfs it is not",
        ignore: !canMount,
        fn: async () => {
          const tmpfs = await credentialsIn((await mount("tmpfs")).path, pin);
          const r = await runDeno(
            [MAIN, "--check-config", ...daemonArgs({ ...f, weak: [] }, [])],
            { env: { ...token.env, CREDENTIALS_DIRECTORY: tmpfs } },
          );
          assert.equal(r.code, 1, r.text);
          assert.match(r.text, /FATAL: credential .* is weak: it is on tmpfs/);
          const ok = await check(f); // the baseline's ramfs
          assert.doesNotMatch(ok.text, /weak/);
        },
      });

      await t.step(
        "a credential that is not a 44-character PIN: fatal, and serve never logs in",
        async () => {
          const place = canMount ? (await mount("ramfs")).path : await Deno.makeTempDir();
          const bad = await credentialsIn(place, new TextEncoder().encode("1234\n"));
          const r = await check(f, [], { CREDENTIALS_DIRECTORY: bad });
          assert.equal(r.code, 1, r.text);
          assert.match(
            r.text,
            /FATAL: credential .* holds 4 bytes that are not a PIN made by 'svcd token init'/,
          );
          const s = await serve(f, [], { CREDENTIALS_DIRECTORY: bad });
          assert.equal(s.code, 1, s.text);
          assert.match(s.text, /not a PIN made by/);
          assert.doesNotMatch(s.text, /logged in|login to token/);
        },
      );

      await t.step("an unknown token label is named", async () => {
        const r = await check(f, ["--token", "no-such-token"]);
        assert.equal(r.code, 1);
        assert.match(r.text, /no-such-token/);
      });

      await t.step(
        "a missing socket folder is named by check-config and by serve (not 'errno 2')",
        async () => {
          const args = ["--socket", `${dir}/no-such-dir/auth.sock`];
          const r = await check(f, args);
          assert.equal(r.code, 1, r.text);
          assert.match(
            r.text,
            /FATAL: --socket .*auth\.sock: the folder .*no-such-dir does not exist/,
          );
          await Deno.stat(`${dir}/no-such-dir`).then(
            () => assert.fail("check-config created the socket folder"),
            () => {},
          );
          const s = await serve(f, args);
          assert.equal(s.code, 1, s.text);
          assert.match(s.text, /no-such-dir does not exist/);
          assert.doesNotMatch(s.text, /errno|logged in/);
        },
      );

      await t.step("a --proxy-uid no user has is fatal", async () => {
        const r = await check(f, ["--proxy-uid", "3999999"]);
        assert.equal(r.code, 1, r.text);
        assert.match(r.text, /FATAL: --proxy-uid 3999999: no user has this uid/);
      });

      await t.step({
        name: "a proxy that cannot enter the socket folder or connect to the socket is named",
        ignore: Deno.uid() !== 0,
        fn: async () => {
          // The temporary folder is root 0700: www-data cannot enter it.
          const r = await check(f, ["--proxy-uid", String(WWW_DATA)]);
          assert.equal(r.code, 1, r.text);
          assert.match(
            r.text,
            /FATAL: the proxy's user www-data \(uid 33\) cannot enter .* \(root:root 0700\)/,
          );
          // It may enter, but the socket would be root-group 0660: it could not connect.
          const sockDir = `${dir}/sock`;
          await Deno.mkdir(sockDir);
          await Deno.chmod(dir, 0o711);
          await Deno.chmod(sockDir, 0o750);
          await Deno.chown(sockDir, 0, WWW_DATA);
          const args = ["--proxy-uid", String(WWW_DATA), "--socket", `${sockDir}/auth.sock`];
          const noGroup = await check(f, args);
          assert.equal(noGroup.code, 1, noGroup.text);
          assert.match(
            noGroup.text,
            /FATAL: the proxy's user www-data .* cannot connect to --socket .*group root/,
          );
          // The packaged layout: the folder setgid with the proxy's group. Nothing to report.
          await Deno.chmod(sockDir, 0o2750);
          const ok = await check(f, args);
          assert.equal(ok.code, 0, ok.text);
          await Deno.chmod(dir, 0o700);
        },
      });

      for (const [flag, option] of [["audit-dir", "--audit-dir"], ["state-dir", "--state-dir"]]) {
        await t.step({
          name: `an unwritable ${option} is fatal, and serve says so before any login`,
          ignore: !canMount,
          fn: async () => {
            const ro = await mount("tmpfs", { readOnly: true });
            const r = await check(f, [`--${flag}`, ro.path]);
            assert.equal(r.code, 1, r.text);
            assert.match(
              r.text,
              new RegExp(`FATAL: ${option} ${ro.path} is not writable by this user`),
            );
            const s = await serve(f, [`--${flag}`, ro.path]);
            assert.equal(s.code, 1, s.text);
            assert.match(s.text, /is not writable by this user/);
            assert.doesNotMatch(s.text, /corrupt|logged in/);
          },
        });
      }

      await t.step(
        "a queue depth past the open-file limit says which number to change",
        async () => {
          const r = await check(f, ["--queue-depth", "60000"]);
          assert.equal(r.code, 1);
          assert.match(r.text, /lower --queue-depth or raise LimitNOFILE/);
        },
      );

      await t.step("refusal budget options are checked and named by their flags", async () => {
        const r = await check(f, ["--refusal-base-delay", "600"]);
        assert.equal(r.code, 2);
        assert.match(r.text, /--refusal-max-delay must be a whole number from 600/);
      });

      await t.step(
        "a corrupt refusal state file is found before serve would refuse it",
        async () => {
          await Deno.mkdir(`${dir}/state`, { recursive: true });
          await Deno.writeTextFile(`${dir}/state/refusals.sqlite`, "garbage ".repeat(200));
          const r = await check(f);
          assert.equal(r.code, 1, r.text);
          assert.match(r.text, /refusals\.sqlite is corrupt or unreadable/);
          await Deno.remove(`${dir}/state/refusals.sqlite`);
        },
      );

      await t.step("a file in the socket's place that is not a socket is named", async () => {
        await Deno.writeTextFile(`${dir}/auth.sock`, "not a socket");
        const r = await check(f);
        assert.equal(r.code, 1);
        assert.match(r.text, /auth\.sock exists and is not a socket/);
        await Deno.remove(`${dir}/auth.sock`);
      });

      await t.step(
        "the public listener: its files are checked; an unloadable database is a warning",
        async () => {
          const ca = await opensslCa(dir, "ec-p256", "public-ca");
          const other = await opensslCa(dir, "ec-p256", "other-ca");
          await Deno.writeTextFile(`${dir}/index.txt`, "");
          const pub = (more: string[] = []) => [
            "--public-socket",
            `${dir}/public.sock`,
            "--revocation-db",
            `${dir}/index.txt`,
            "--ocsp-label",
            "k",
            "--ca-cert",
            ca.certPath,
            ...more,
          ];
          const good = await check(f, pub());
          assert.equal(good.code, 0, good.text);
          assert.doesNotMatch(good.text, /FATAL|warning/);
          const cases: Array<[string[], RegExp]> = [
            [["--ca-cert", `${dir}/none.pem`], /--ca-cert .*none\.pem cannot be read/],
            [["--ocsp-cert", other.certPath], /--ocsp-cert .* was not issued by the CA/],
            [["--public-socket", `${dir}/auth.sock`], /--public-socket must differ from --socket/],
          ];
          for (const [more, finding] of cases) {
            const r = await check(f, pub(more));
            assert.equal(r.code, 1, r.text);
            assert.equal(fatalLines(r.text).length, 1, r.text);
            assert.match(r.text, finding);
          }
          const missingDb = await check(f, pub(["--revocation-db", `${dir}/none.txt`]));
          assert.equal(missingDb.code, 0, missingDb.text);
          assert.match(
            missingDb.text,
            /warning: .*--revocation-db: .*answers tryLater until it loads/,
          );
          // More certificates than --ocsp-max-entries: refused now, not tryLater once serving.
          const line = (serial: string) => `V\t350101000000Z\t\t${serial}\tunknown\t/CN=a\n`;
          await Deno.writeTextFile(`${dir}/index.txt`, line("01") + line("02") + line("03"));
          const fits = await check(f, pub(["--ocsp-max-entries", "3"]));
          assert.equal(fits.code, 0, fits.text);
          const over = await check(f, pub(["--ocsp-max-entries", "2"]));
          assert.equal(over.code, 1, over.text);
          assert.equal(fatalLines(over.text).length, 1, over.text);
          assert.match(
            over.text,
            /FATAL: --revocation-db: .*index\.txt: more than 2 certificates, the most --ocsp-max-entries allows/,
          );
          await Deno.writeTextFile(`${dir}/index.txt`, "");
        },
      );

      await t.step("several problems: every one is reported, one line each", async () => {
        await Deno.chmod(`${dir}/policy`, 0o666);
        const r = await check(f, ["--proxy-uid", "3999999", "--queue-depth", "60000"]);
        await Deno.chmod(`${dir}/policy`, 0o640);
        assert.equal(r.code, 1, r.text);
        const fatal = fatalLines(r.text);
        assert.equal(fatal.length, 3, r.text);
        assert.match(r.text, /configuration NOT OK: 3 fatal finding\(s\)/);
      });

      await t.step("a bad option value exits 2 naming the option", async () => {
        const r = await check(f, ["--max-body", "1k"]);
        assert.equal(r.code, 2);
        assert.match(r.text, /--max-body must be a whole number/);
      });
    } finally {
      for (const m of mounts.reverse()) await m.cleanup();
      await Deno.remove(dir, { recursive: true });
      await token.cleanup();
    }
  },
});
