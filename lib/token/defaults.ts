/**
 * Where the token is found when the operator names nothing: the defaults of `--module` and
 * `--token`, shared by `svcd serve`, `svcd token` and `svcd audit` (a file of its own so the
 * daemon's options do not load the operator tooling).
 *
 * @example
 * ```ts
 * import { DEFAULT_MODULE, DEFAULT_TOKEN_LABEL } from "./defaults.ts";
 * console.log(`--module ${DEFAULT_MODULE} --token ${DEFAULT_TOKEN_LABEL}`);
 * ```
 */

/**
 * Debian's SoftHSM2 module: the default for --module.
 *
 * @example
 * ```ts
 * const modulePath = Deno.args[0] ?? DEFAULT_MODULE;
 * ```
 */
export const DEFAULT_MODULE = "/usr/lib/softhsm/libsofthsm2.so";

/**
 * Default token label (--token).
 *
 * @example
 * ```ts
 * const tokenLabel = Deno.args[1] ?? DEFAULT_TOKEN_LABEL;
 * ```
 */
export const DEFAULT_TOKEN_LABEL = "svcd";
