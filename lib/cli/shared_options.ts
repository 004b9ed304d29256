/**
 * The options several command groups take, declared once: where the token is (`--module`,
 * `--token`), how to log in to it (`--credential`), as whom (`--user`), and where the audit log is
 * (`--audit-dir`). A group lists one under its own heading, for its own commands, and may add a
 * note about what the option means there; the flag, its value, its default and its text are this
 * table's.
 *
 * @example
 * ```ts
 * import { sharedSpec, SHARED_OPTIONS } from "./shared_options.ts";
 * const table = { module: sharedSpec("module", { group: "common" }) }; // svcd token, ca, audit
 * const typed = { module: { ...SHARED_OPTIONS.module, group: "token" } }; // in svcd serve's table
 * ```
 */
import type { OptionSpec } from "./option_table.ts";
import { DEFAULT_MODULE, DEFAULT_TOKEN_LABEL } from "../token/mod.ts";

/** Where the daemon writes its audit files unless told otherwise (--audit-dir). */
export const DEFAULT_AUDIT_DIR = "/var/log/svcd";

/** The shared options, without the heading each group lists them under. */
export const SHARED_OPTIONS = {
  module: {
    kind: "path",
    value: "PATH",
    fallback: DEFAULT_MODULE,
    help: "PKCS#11 module",
  },
  token: {
    kind: "text",
    value: "LABEL",
    fallback: DEFAULT_TOKEN_LABEL,
    help: "token label",
  },
  credential: {
    kind: "path",
    value: "FILE",
    help: "log in with the PIN in this encrypted credential (/etc/svcd/svc-pin.cred), " +
      "decrypted into memory by systemd-creds (needs root); without it, " +
      "$CREDENTIALS_DIRECTORY/svc-pin is read",
  },
  user: {
    kind: "text",
    value: "NAME",
    help: "run as root, make the token calls as this user (the daemon's, svcd), so the " +
      "module's files stay the daemon's; systemd-creds still runs as root",
  },
  "audit-dir": {
    kind: "path",
    value: "DIR",
    fallback: DEFAULT_AUDIT_DIR,
    help: "folder of audit.log.NNNNNN files",
  },
} as const satisfies Readonly<Record<string, Omit<OptionSpec, "group">>>;

/** A shared option's flag. */
export type SharedFlag = keyof typeof SHARED_OPTIONS;

/** Where a group lists a shared option, and what it adds to the option's text there. */
export interface SharedPlace {
  /** The heading (an OptionGroup id of the group). */
  group: string;
  /** The commands it applies to; absent: every command of the group. */
  commands?: readonly string[];
  multiple?: boolean;
  /** What the option means in this group, appended to its text. */
  note?: string;
}

/** A shared option as it stands in a group's option table (typed as the shared declaration). */
export type SharedSpec<F extends SharedFlag, P extends SharedPlace> =
  & (typeof SHARED_OPTIONS)[F]
  & { group: P["group"] }
  & (P extends { multiple: true } ? { multiple: true } : unknown);

/**
 * A shared option as an entry of a group's option table (lib/cli/option_table.ts), read through
 * the table's typed accessors.
 *
 * @example
 * ```ts
 * const TABLE = { module: sharedSpec("module", { group: "common" }) };
 * ```
 */
export function sharedSpec<F extends SharedFlag, const P extends SharedPlace>(
  flag: F,
  place: P,
): SharedSpec<F, P> {
  const spec: Omit<OptionSpec, "group"> = SHARED_OPTIONS[flag];
  return {
    ...spec,
    group: place.group,
    help: place.note === undefined ? spec.help : `${spec.help}; ${place.note}`,
    ...(place.commands ? { commands: place.commands } : {}),
    ...(place.multiple ? { multiple: true } : {}),
  } as SharedSpec<F, P>;
}
