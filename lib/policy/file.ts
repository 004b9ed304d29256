/**
 * The policy file on disk: loaded at start (an error is fatal), re-read on SIGHUP (an error keeps the
 * policy in force, spec §5.7).
 *
 * A reload refuses a zero-byte file and keeps the policy in force: that is what a file looks like
 * while an editor or `>` redirection is rewriting it, and installing it would refuse every client.
 * To revoke every grant on purpose, leave a comment line in the file. At start a zero-byte file is
 * valid (there is no earlier policy to keep) and comes with a warning that it refuses everyone.
 *
 * @example
 * ```ts
 * const file = await PolicyFile.load("/etc/svcd/policy");
 * Deno.addSignalListener("SIGHUP", async () => {
 *   const r = await file.reload();
 *   if (!r.ok) console.error(r.error);
 * });
 * file.current.allows(subject, label);
 * ```
 */
import { Policy, PolicyError } from "./policy.ts";
import type { ParseOptions } from "./parse.ts";

/** Result of a reload: the new policy, or why the old one stays. */
export type ReloadResult = { ok: true; policy: Policy } | { ok: false; error: string };

/**
 * A policy file and the policy currently in force from it.
 *
 * @example
 * ```ts
 * (await PolicyFile.load("/etc/svcd/policy")).current.size; // → number of grants
 * ```
 */
export class PolicyFile {
  #policy: Policy;
  #reloading: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly path: string,
    policy: Policy,
    private readonly options: ParseOptions,
  ) {
    this.#policy = policy;
  }

  /**
   * Reads and parses the file; throws PolicyError (unreadable file: line 0) so start-up fails.
   * `options` (e.g. reserved labels) apply to every reload as well.
   *
   * @example
   * ```ts
   * const file = await PolicyFile.load("/etc/svcd/policy", { reservedLabels: new Set(["svc-audit"]) });
   * ```
   */
  static async load(path: string, options: ParseOptions = {}): Promise<PolicyFile> {
    const bytes = await readPolicyBytes(path);
    return new PolicyFile(path, Policy.parse(bytes, path, options), options);
  }

  /** The policy in force. */
  get current(): Policy {
    return this.#policy;
  }

  /**
   * Re-reads the file; on any failure the policy in force stays and the error says why (file, line).
   * Concurrent calls run one after another, so the last call's file wins.
   *
   * @example
   * ```ts
   * const r = await file.reload(); // r.ok ? r.policy.warnings : r.error
   * ```
   */
  reload(): Promise<ReloadResult> {
    const next = this.#reloading.then(() => this.#reloadNow());
    this.#reloading = next;
    return next;
  }

  async #reloadNow(): Promise<ReloadResult> {
    const keeping = `; keeping the policy in force (${this.#policy.size} grants)`;
    let bytes: Uint8Array;
    try {
      bytes = await readPolicyBytes(this.path);
    } catch (e) {
      return { ok: false, error: `${(e as Error).message}${keeping}` };
    }
    if (bytes.length === 0) {
      return {
        ok: false,
        error: `${this.path}: the file is empty (0 bytes), as while it is being rewritten; ` +
          `to revoke every grant on purpose, leave a comment line in it${keeping}`,
      };
    }
    try {
      this.#policy = Policy.parse(bytes, this.path, this.options);
      return { ok: true, policy: this.#policy };
    } catch (e) {
      if (!(e instanceof PolicyError)) throw e;
      return { ok: false, error: `${e.message}${keeping}` };
    }
  }
}

async function readPolicyBytes(path: string): Promise<Uint8Array> {
  try {
    const info = await Deno.stat(path);
    if (!info.isFile) {
      throw new PolicyError(path, 0, "not a regular file; --policy must name the policy file");
    }
    return await Deno.readFile(path);
  } catch (e) {
    if (e instanceof PolicyError) throw e;
    throw new PolicyError(
      path,
      0,
      `cannot read the policy file (${(e as Error).message}); check the --policy path and that ` +
        `the daemon's user may read it`,
    );
  }
}
