/**
 * A systemd service unit read the way systemd reads the parts svcd.service uses, and its commands
 * run the way systemd runs them when systemd is not PID 1 (a container, CI): the unit's user and
 * groups (setpriv with the user's own groups plus SupplementaryGroups=), Environment= and
 * EnvironmentFile=, UMask=, LimitNOFILE=, StateDirectory=/LogsDirectory= created as systemd creates
 * them, $CREDENTIALS_DIRECTORY and $NOTIFY_SOCKET given by the caller, and `$VAR` / `${VAR}`
 * expanded in Exec lines as systemd does (`$VAR` splits into words, `${VAR}` stays one word).
 *
 * @example
 * ```ts
 * declare const env: Record<string, string>;
 * const unit = await readUnit("/usr/lib/systemd/system/svcd.service");
 * const argv = unit.command("ExecStart", env);
 * ```
 */

/** A unit's settings of one section ([Service]) and how to run its commands. */
export interface ServiceUnit {
  /** Every value of a key of the section, in file order. */
  values(key: string): string[];
  /** The last value of a key (or undefined). */
  value(key: string): string | undefined;
  /** The unit's environment: Environment= then EnvironmentFile= (later wins, as in systemd). */
  environment(): Promise<Record<string, string>>;
  /** An Exec*= line as argv, with the environment expanded. */
  command(key: string, env: Record<string, string>): string[];
}

/**
 * Reads a unit file (continuation lines joined, comments dropped): the settings of `section`,
 * [Service] unless another is named (a path unit's are in [Path]).
 *
 * @example
 * ```ts
 * declare const path: string;
 * (await readUnit(path)).value("User"); // "svcd"
 * (await readUnit("packaging/svcd-crl.path", "Path")).value("PathChanged");
 * ```
 */
export async function readUnit(path: string, wanted = "Service"): Promise<ServiceUnit> {
  const text = (await Deno.readTextFile(path)).replace(/\\\n/g, " ");
  const service: Array<[string, string]> = [];
  let section = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1];
      continue;
    }
    const eq = line.indexOf("=");
    if (section === wanted && eq > 0) service.push([line.slice(0, eq), line.slice(eq + 1)]);
  }
  const values = (key: string) => service.filter(([k]) => k === key).map(([, v]) => v);
  return {
    values,
    value: (key) => values(key).at(-1),
    environment: async () => {
      const env: Record<string, string> = {};
      for (const v of values("Environment")) {
        for (const word of splitWords(v)) assign(env, word);
      }
      for (const v of values("EnvironmentFile")) {
        const optional = v.startsWith("-");
        const file = optional ? v.slice(1) : v;
        let text: string;
        try {
          text = await Deno.readTextFile(file);
        } catch (err) {
          if (optional) continue;
          throw err;
        }
        for (const line of text.split("\n")) {
          const t = line.trim();
          if (t === "" || t.startsWith("#")) continue;
          assign(env, t.replace(/^"(.*)"$/, "$1"));
        }
      }
      return env;
    },
    command: (key, env) => {
      const line = values(key).at(-1);
      if (line === undefined) throw new Error(`the unit has no ${key}=`);
      return splitWords(line.replace(/^[-+@!:]+/, "")).flatMap((word) => {
        const whole = /^\$([A-Za-z_][A-Za-z0-9_]*)$/.exec(word);
        if (whole) return (env[whole[1]] ?? "").split(/\s+/).filter(Boolean);
        return [word.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, n) => env[n] ?? "")];
      });
    },
  };
}

function assign(env: Record<string, string>, word: string): void {
  const eq = word.indexOf("=");
  if (eq > 0) env[word.slice(0, eq)] = word.slice(eq + 1);
}

/** Splits at whitespace outside double quotes; the quotes are removed. */
function splitWords(line: string): string[] {
  const words: string[] = [];
  for (const m of line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)) words.push(m[1] ?? m[2]);
  return words;
}

/**
 * How systemd would exec `argv` for this unit: `prlimit` for LimitNOFILE=, `setpriv` for User=,
 * Group=, the user's groups and SupplementaryGroups=, a clean environment, and UMask=.
 *
 * @example
 * ```ts
 * declare const unit: ServiceUnit, argv: string[], env: Record<string, string>;
 * const cmd = await asUnitWould(unit, argv, env);
 * new Deno.Command(cmd[0], { args: cmd.slice(1) });
 * ```
 */
export async function asUnitWould(
  unit: ServiceUnit,
  argv: string[],
  env: Record<string, string>,
): Promise<string[]> {
  const user = unit.value("User") ?? "root";
  const group = unit.value("Group") ?? user;
  const groups = await userGroups(user);
  for (const extra of unit.values("SupplementaryGroups").flatMap((v) => v.split(/\s+/))) {
    if (extra) groups.push(extra);
  }
  const nofile = unit.value("LimitNOFILE");
  const umask = unit.value("UMask") ?? "0022";
  return [
    ...(nofile ? ["prlimit", `--nofile=${nofile}:${nofile}`] : []),
    "setpriv",
    `--reuid=${user}`,
    `--regid=${group}`,
    `--groups=${[...new Set(groups)].join(",")}`,
    "--",
    "env",
    "-i",
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    "sh",
    "-c",
    `umask ${umask}; exec "$@"`,
    "sh",
    ...argv,
  ];
}

async function userGroups(user: string): Promise<string[]> {
  const out = await new Deno.Command("id", { args: ["-G", user], stderr: "piped" }).output();
  if (!out.success) throw new Error(`no user ${user}: ${new TextDecoder().decode(out.stderr)}`);
  return new TextDecoder().decode(out.stdout).trim().split(/\s+/);
}

/**
 * StateDirectory= and LogsDirectory= as systemd makes them before a command: /var/lib/NAME and
 * /var/log/NAME owned by User=/Group= with their *DirectoryMode=; returns the environment
 * variables systemd sets for them.
 *
 * @example
 * ```ts
 * declare const unit: ServiceUnit, env: Record<string, string>;
 * Object.assign(env, await makeUnitDirectories(unit));
 * ```
 */
export async function makeUnitDirectories(unit: ServiceUnit): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  const kinds: Array<[string, string, string]> = [
    ["StateDirectory", "/var/lib", "STATE_DIRECTORY"],
    ["LogsDirectory", "/var/log", "LOGS_DIRECTORY"],
    ["RuntimeDirectory", "/run", "RUNTIME_DIRECTORY"],
  ];
  for (const [key, base, variable] of kinds) {
    const name = unit.value(key);
    if (!name) continue;
    const path = `${base}/${name}`;
    const mode = parseInt(unit.value(`${key}Mode`) ?? "0755", 8);
    await Deno.mkdir(path, { recursive: true });
    const owner = await run("chown", [`${unit.value("User")}:${unit.value("Group")}`, path]);
    if (!owner) throw new Error(`chown ${path} failed`);
    await Deno.chmod(path, mode);
    env[variable] = path;
  }
  return env;
}

async function run(cmd: string, args: string[]): Promise<boolean> {
  return (await new Deno.Command(cmd, { args, stdout: "null", stderr: "null" }).output()).success;
}
