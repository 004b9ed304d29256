/**
 * The policy file on disk: loaded at start (an error is fatal), re-read on SIGHUP (an error keeps the
 * policy in force: a failed reload never installs an empty policy).
 *
 * A reload refuses a zero-byte file and keeps the policy in force: that is what a file looks like
 * while an editor or `>` redirection is rewriting it, and installing it would refuse every client.
 * To revoke every grant on purpose, leave a comment line in the file. At start a zero-byte file is
 * valid (there is no earlier policy to keep) and comes with a warning that it refuses everyone.
 *
 * The file holds at most `maxGrants` grants ({@link MAX_POLICY_GRANTS} unless `--policy-max-grants`
 * says otherwise) and at most {@link policyByteLimit} bytes: a larger one is refused at start and,
 * at a reload, leaves the policy in force. Where it is read and parsed is the caller's choice
 * ({@link PolicyReader}): the daemon does both in a thread of its own, so that a reload never
 * stalls the requests being served.
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
import {
  MAX_POLICY_GRANTS,
  type ParsedPolicy,
  type ParseOptions,
  parsePolicyText,
} from "./parse.ts";

/**
 * Bytes a policy file may spend per grant allowed: room for a long distinguished name and label
 * on every line, plus comments. The file is read whole before it is parsed, so this bounds the
 * memory a reload takes before the grant count can refuse it.
 */
export const POLICY_BYTES_PER_GRANT = 256;

/**
 * The largest policy file accepted with `maxGrants` grants allowed: {@link POLICY_BYTES_PER_GRANT}
 * per grant, at least 1 MiB.
 *
 * @example
 * ```ts
 * policyByteLimit(1_000_000); // → 256000000
 * ```
 */
export function policyByteLimit(maxGrants: number = MAX_POLICY_GRANTS): number {
  return Math.max(1 << 20, maxGrants * POLICY_BYTES_PER_GRANT);
}

/** A policy file read and parsed: what the parser found, and the file's size in bytes. */
export interface PolicyRead {
  parsed: ParsedPolicy;
  fileBytes: number;
}

/**
 * What reads and parses a policy file: {@link readInThisThread}, or the daemon's reader in a thread
 * of its own. It rejects only with a PolicyError (the file could not be read, or is too large);
 * problems in the file's lines are in `parsed.errors`.
 */
export type PolicyReader = (path: string, options: ParseOptions) => Promise<PolicyRead>;

/**
 * Reads and parses the file on the caller's thread, the parse in one piece.
 *
 * @example
 * ```ts
 * const { parsed, fileBytes } = await readInThisThread("/etc/svcd/policy", {});
 * ```
 */
export const readInThisThread: PolicyReader = async (path, options) => {
  const bytes = await readPolicyBytes(path, policyByteLimit(options.maxGrants));
  return { parsed: parsePolicyText(bytes, path, options), fileBytes: bytes.length };
};

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
    private readonly read: PolicyReader,
  ) {
    this.#policy = policy;
    this.#bytes = bytes;
  }

  /**
   * Reads and parses the file; throws PolicyError (unreadable file: line 0) so start-up fails.
   * `options` (e.g. reserved labels) and `read` apply to every reload as well.
   *
   * @example
   * ```ts
   * const file = await PolicyFile.load("/etc/svcd/policy", { reservedLabels: new Set(["svc-audit"]) });
   * ```
   */
  static async load(
    path: string,
    options: ParseOptions = {},
    read: PolicyReader = readInThisThread,
  ): Promise<PolicyFile> {
    const { parsed, fileBytes } = await read(path, options);
    return new PolicyFile(path, Policy.fromParsed(parsed, path), fileBytes, options, read);
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
    try {
      const { parsed, fileBytes } = await this.read(this.path, this.options);
      if (fileBytes === 0) {
        return {
          ok: false,
          error: `${this.path}: the file is empty (0 bytes), as while it is being rewritten; ` +
            `to revoke every grant on purpose, leave a comment line in it${keeping}`,
        };
      }
      this.#policy = Policy.fromParsed(parsed, this.path);
      this.#bytes = fileBytes;
      return { ok: true, policy: this.#policy };
    } catch (e) {
      if (!(e instanceof PolicyError)) throw e;
      return { ok: false, error: `${e.message}${keeping}` };
    }
  }
}

async function readPolicyBytes(path: string, limit: number): Promise<Uint8Array> {
  try {
    using file = await Deno.open(path, { read: true });
    const info = await file.stat();
    if (!info.isFile) {
      throw new PolicyError(path, 0, "not a regular file; --policy must name the policy file");
    }
    if (info.size > limit) throw tooLarge(path, `${info.size} bytes`, limit);
    // Room for the size stat-ed and more: a file that grew after the stat is read to its end, and
    // refused all the same once it passes the limit (one byte past it is enough to tell).
    let buf = new Uint8Array(Math.min(limit + 1, info.size + 65536));
    let got = 0;
    for (let n; (n = await file.read(buf.subarray(got))) !== null;) {
      got += n;
      if (got > limit) throw tooLarge(path, `more than ${limit} bytes`, limit);
      if (got === buf.length) {
        const more = new Uint8Array(Math.min(limit + 1, buf.length * 2));
        more.set(buf);
        buf = more;
      }
    }
    return buf.subarray(0, got);
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

function tooLarge(path: string, size: string, limit: number): PolicyError {
  return new PolicyError(
    path,
    0,
    `the file is ${size}; a policy file may have at most ${limit} bytes ` +
      `(${POLICY_BYTES_PER_GRANT} per grant --policy-max-grants allows): remove unused grants`,
  );
}
