/**
 * The one error type of `svcd client`: a single line saying what happened and what to do, printed
 * as it is; `usage` marks a mistake in the command line (exit 2), anything else fails (exit 1).
 *
 * @example
 * ```ts
 * import { ClientError } from "./errors.ts";
 * throw new ClientError("no address: give --addr https://HOST or set SVCD_ADDR", { usage: true });
 * ```
 */
export class ClientError extends Error {
  /** A command-line mistake (exit 2) rather than a failure (exit 1). */
  readonly usage: boolean;

  constructor(message: string, opts: { usage?: boolean } = {}) {
    super(message);
    this.name = "ClientError";
    this.usage = opts.usage ?? false;
  }
}

/** What to do when this process lacks a permission the client needs (the daemon's executable). */
export const NOT_CAPABLE_HINT = "run svcd-client, or svcd client with the client's permissions " +
  "(deno task client)";
