/**
 * Exit codes: one per cause, the same in every command. `svcd --help` and svcd(8) list this table;
 * a command returns these names, never a bare number, so a code cannot drift from its listed cause.
 *
 * @example
 * ```ts
 * import { EXIT } from "./exit.ts";
 * function done(ok: boolean): number {
 *   return ok ? EXIT.ok : EXIT.failed;
 * }
 * ```
 */
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  notOffered: 3,
  listenerFailed: 70,
  tokenDead: 75,
} as const;

/** Each code with its cause, as the help and the man page list them. */
export const EXIT_CODES: ReadonlyArray<{ code: number; cause: string }> = [
  { code: EXIT.ok, cause: "done; a check or verification found everything valid" },
  {
    code: EXIT.failed,
    cause: "failed: a credential, token, file or server error, a check that found a problem, " +
      "a signature that does not verify; the message says why and what to do",
  },
  {
    code: EXIT.usage,
    cause: "usage: an unknown command or option, a missing or malformed value (on stderr)",
  },
  {
    code: EXIT.notOffered,
    cause: "svcd token keygen: a requested key type is not offered by the module " +
      "(the others were made)",
  },
  {
    code: EXIT.listenerFailed,
    cause: "svcd serve: a listener's thread failed while serving",
  },
  {
    code: EXIT.tokenDead,
    cause: "svcd serve: the token died; the service manager restarts the daemon",
  },
];
