/**
 * The policy file on disk: loaded at start (an error is fatal), re-read on SIGHUP (an error keeps the
 * policy in force: a failed reload never installs an empty policy).
 *
 * A reload refuses a zero-byte file and keeps the policy in force: that is what a file looks like
 * while an editor or `>` redirection is rewriting it, and installing it would refuse every client.
 * To revoke every grant on purpose, leave a comment line in the file. At start a zero-byte file is
 * valid (there is no earlier policy to keep) and comes with a warning that it refuses everyone.
 *
 * The file is at most {@link MAX_POLICY_BYTES}: a larger one is refused at start and, at a reload,
 * leaves the policy in force. It is parsed in slices that let the event loop run between them, so
 * a reload never stalls the requests being served.
 *
 * @example
 * ```ts
 * declare const subject: string, label: string;
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

/**
 * The largest policy file accepted: 1 MiB, some 25 000 grants of a typical subject. Parsing it
 * takes a few hundred ms (in slices); without a bound a 50 MB file took 12 s and 1.8 GB.
 */
export const MAX_POLICY_BYTES = 1 << 20;

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

  #bytes: number;

  private constructor(
    readonly path: string,
    policy: Policy,
    bytes: number,
    private readonly options: ParseOptions,
  ) {
    this.#policy = policy;
    this.#bytes = bytes;
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
    return new PolicyFile(
      path,
      await Policy.parseSliced(bytes, path, options),
      bytes.length,
      options,
    );
  }

  /** The policy in force. */
  get current(): Policy {
    return this.#policy;
  }

  /** Size in bytes of the file the policy in force came from. */
  get fileBytes(): number {
    return this.#bytes;
  }

  /**
   * Re-reads the file; on any failure the policy in force stays and the error says why (file, line).
   * Concurrent calls run one after another, so the last call's file wins.
   *
   * @example
   * ```ts
   * declare const file: PolicyFile;
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
      this.#policy = await Policy.parseSliced(bytes, this.path, this.options);
      this.#bytes = bytes.length;
      return { ok: true, policy: this.#policy };
    } catch (e) {
      if (!(e instanceof PolicyError)) throw e;
      return { ok: false, error: `${e.message}${keeping}` };
    }
  }
}

async function readPolicyBytes(path: string): Promise<Uint8Array> {
  try {
    using file = await Deno.open(path, { read: true });
    const info = await file.stat();
    if (!info.isFile) {
      throw new PolicyError(path, 0, "not a regular file; --policy must name the policy file");
    }
    if (info.size > MAX_POLICY_BYTES) throw tooLarge(path, `${info.size} bytes`);
    // Read one byte past the limit: a file that grew after the stat is refused all the same.
    const buf = new Uint8Array(MAX_POLICY_BYTES + 1);
    let got = 0;
    for (let n; got < buf.length && (n = await file.read(buf.subarray(got))) !== null;) got += n;
    if (got > MAX_POLICY_BYTES) throw tooLarge(path, `more than ${MAX_POLICY_BYTES} bytes`);
    return buf.slice(0, got);
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

function tooLarge(path: string, size: string): PolicyError {
  return new PolicyError(
    path,
    0,
    `the file is ${size}; a policy file may have at most ${MAX_POLICY_BYTES} bytes (1 MiB): ` +
      "remove unused grants",
  );
}
