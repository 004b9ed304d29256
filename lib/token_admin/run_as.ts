/**
 * Operator commands run by root do their token work as the daemon's user (`--user svcd`): a module
 * such as SoftHSM creates its files 0600 for whoever calls it, so a key made as root would be
 * unreadable to the daemon. Root stays root only for what needs it (systemd-creds).
 *
 * @example
 * ```ts
 * import { Token, type TokenOptions } from "../token/mod.ts";
 * declare const options: TokenOptions;
 * const keys = await asUser("svcd", () => Token.open(options).listKeys());
 * ```
 */
import { becomeUser, errno, getpwnam, libc, restoreRoot } from "../../ffi/libc.ts";
import { EXIT } from "../cli/exit.ts";

/** A `--user` that cannot be used: the message says why and what to do. */
export class RunAsError extends Error {
  override name = "RunAsError";
}

/**
 * Runs `work` as the user `name` (root only; as that user already, it just runs), then switches
 * back to root. Without a name, runs `work` as the caller.
 *
 * @example
 * ```ts
 * import { initToken, type InitOptions } from "./provision.ts";
 * declare const options: InitOptions;
 * await asUser("svcd", () => initToken(options, console.log));
 * ```
 */
export async function asUser<T>(name: string | undefined, work: () => Promise<T>): Promise<T> {
  if (name === undefined) return await work();
  const user = getpwnam(name);
  if (user === null) {
    throw new RunAsError(`--user ${name}: no such user (is the svcd package installed?)`);
  }
  const uid = libc().getuid();
  if (uid === user.uid) return await work();
  if (uid !== 0) {
    throw new RunAsError(
      `--user ${name} needs root (run the command with sudo), or run it as ${name} without --user`,
    );
  }
  if (becomeUser(user) !== 0) {
    const why = errno();
    restoreRoot();
    throw new RunAsError(`cannot switch to user ${name} (errno ${why})`);
  }
  try {
    return await work();
  } finally {
    if (restoreRoot() !== 0) {
      // Never carry on half-switched: the rest of the command expects root.
      console.error(`svcd: cannot switch back to root (errno ${errno()}); stopping`);
      Deno.exit(EXIT.failed);
    }
  }
}

/**
 * Whether this process runs as root (FFI getuid, so no --allow-sys is needed).
 *
 * @example
 * ```ts
 * if (isRoot()) console.error("note: pass --user svcd");
 * ```
 */
export function isRoot(): boolean {
  return libc().getuid() === 0;
}

/**
 * `target` with every method call made as the user `name` (as {@link asUser}; without a name,
 * `target` itself). Each call's result becomes a promise: await every call, synchronous ones too.
 * For commands that write their own files as root but must do the token work as the daemon's user.
 *
 * @example
 * ```ts
 * import { type Common, openLoggedIn } from "./cli.ts";
 * import type { SigningKey } from "../token/mod.ts";
 * declare const common: Common, pin: Uint8Array, key: SigningKey, tbs: Uint8Array;
 * const token = callsAsUser(await asUser("svcd", () => openLoggedIn(common, pin)), "svcd");
 * const { signature } = await token.sign(key, tbs); // C_Sign as svcd
 * ```
 */
export function callsAsUser<T extends object>(target: T, name: string | undefined): T {
  if (name === undefined) return target;
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property, object);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => asUser(name, async () => await value.apply(object, args));
    },
  });
}
