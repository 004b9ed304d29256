/**
 * The audit log writer: a hash-chained, sealed, group-committed, fail-closed append-only file.
 *
 * An append goes through two stages:
 * 1. the chain stage, synchronous in `append()`: the line gets its seq and `prev` (the hash of the
 *    line before) and its own SHA-256 `hash`, in append order;
 * 2. the disk stage takes every chained line not yet written (a group), has the token seal the
 *    group's last line — HMAC-SHA256 with the audit key over its hash, which covers every line
 *    before it through the chain — then writes the group in one write and covers it with one
 *    fdatasync (group commit). Lines chained while a group is sealed or synced wait for the next
 *    group. An append resolves only when its line is durable, and so only once a seal that only
 *    the token can make covers it: one token MAC per group, not per line.
 *
 * Failure (seal, write or sync error, file removed): every line not yet durable is refused with
 * {@link AuditUnavailableError}, the chain is rolled back to the last durable line, and the log is
 * unhealthy. Recovery: the next append, or the retry timer (every `retryMs`), first truncates the file
 * back to its durable size (so bytes of a half-failed write, or pages a failed fsync may have
 * dropped, are rewritten, never trusted) and writes an `audit_resumed` line naming the error and the
 * number of refused lines; when that line is durable the log is healthy again. A removed file is not
 * written again: recovery opens the next file with an `audit_reopened` line chained to the last
 * durable line (verify then reports the missing file, as it should); one new file per removal, in
 * which a failed attempt is cut back and retried like in any other file.
 *
 * This file is the log's face: what it accepts, when it checkpoints, its lifetime. The stages and
 * the recovery run in ./_pipeline.ts.
 *
 * @example
 * ```ts
 * declare const keys: AuditKeys, subject: string;
 * const log = await AuditLog.open({ dir: "/var/log/svcd", keys, login: { token: "svcd" } });
 * const seq = await log.append("sign", subject, { key: "k1", request_id: "r1" }); // durable now
 * await log.close();
 * ```
 */
import { checkpointMessage } from "./checkpoints.ts";
import {
  auditFileName,
  memberHead,
  memberTail,
  OPENING_MEMBERS,
  RESERVED_MEMBERS,
} from "./format.ts";
import { findChainTail } from "./files.ts";
import { AuditUnavailableError, type LineKind, Pipeline } from "./_pipeline.ts";

export { AuditUnavailableError };

/** The two keys of the log: the group seal (HMAC-SHA256, `svc-audit`) and the checkpoint signature (Ed25519, `svc-audit-sign`). */
export interface AuditKeys {
  /** HMAC-SHA256 of `data` with the audit MAC key; 32 bytes (one call per group: its seal). */
  mac(data: Uint8Array): Promise<Uint8Array>;
  /** Ed25519 signature of `data` with the checkpoint key; 64 bytes. */
  signCheckpoint(data: Uint8Array): Promise<Uint8Array>;
}

/** How to open the log. */
export interface AuditOptions {
  /** Folder of the `audit.log.NNNNNN` files; must exist. */
  dir: string;
  keys: AuditKeys;
  /** Lines between signed checkpoints (default 1000). */
  checkpointEvery?: number;
  /**
   * A checkpoint is also taken this often (ms) while lines arrive that none covers yet (default
   * 60 000): the stretch of log no checkpoint vouches for is bounded in time as well as in lines.
   */
  checkpointIntervalMs?: number;
  /**
   * Told each checkpoint line once it is durable (its exact bytes as written, without the `\n`),
   * to keep a copy off the host (lib/audit/syslog.ts). Must not throw or block: it runs inside
   * the disk stage.
   */
  onCheckpoint?: (line: string) => void;
  /** Told each group commit: lines in the group, seconds its fdatasync took (metrics). */
  onGroupCommit?: (lines: number, syncSeconds: number) => void;
  /** Told each group that could not be sealed, written or synced (its lines were refused). */
  onWriteFailure?: () => void;
  /** Extra members of the `login_ok` line, e.g. `{ token: "svcd" }`. */
  login: Record<string, unknown>;
  /** While unhealthy, try to resume this often, in ms (default 1000). */
  retryMs?: number;
  /** Told when the log stops being writable (with why) and when it is writable again — for the daemon's own log. */
  onHealthChange?: (healthy: boolean, error?: string) => void;
  /**
   * Test seam: makes a written group durable (default `file.syncData()`, fdatasync). Only tests
   * replace it, to hold a sync open and show no append resolves before it, and one bench stand-in
   * (bench/serve.ts `instant-disk`), to measure the log without the disk's wait; the daemon never
   * does.
   */
  sync?: (file: Deno.FsFile) => Promise<void>;
}

const DEFAULT_CHECKPOINT_EVERY = 1000;
const DEFAULT_CHECKPOINT_INTERVAL_MS = 60_000;
const DEFAULT_RETRY_MS = 1000;

/** Counters for benches and /health. */
export interface AuditStats {
  /** Lines made durable since open. */
  lines: number;
  /** fdatasync calls made (successful or not). */
  syncs: number;
  /** Largest number of lines one sync covered. */
  maxGroup: number;
  /** Seals asked of the MAC key (one per group written, successful or not). */
  seals: number;
}

/** Events only the log writes: a caller's line must not look like a file opening or a checkpoint. */
const INTERNAL_EVENTS: ReadonlySet<string> = new Set([
  "login_ok",
  "audit_reopened",
  "audit_resumed",
  "checkpoint",
  "shutdown",
]);

/**
 * One audit file of one module opening (see the module comment for the pipeline and recovery).
 *
 * @example
 * ```ts
 * declare const dir: string, keys: AuditKeys;
 * const log = await AuditLog.open({ dir, keys, login: {} });
 * ```
 */
export class AuditLog {
  readonly #keys: AuditKeys;
  readonly #every: number;
  readonly #onCheckpoint: AuditOptions["onCheckpoint"];
  readonly #intervalTimer: ReturnType<typeof setInterval>;
  readonly #pipeline: Pipeline;
  /** Lines (other than checkpoints) made durable since the last checkpoint's claim. */
  #sinceCheckpoint = 0;
  #checkpointing = false;
  #closed = false;
  #closing: Promise<void> | undefined;

  private constructor(opts: AuditOptions, seq: number, value: Uint8Array) {
    this.#keys = opts.keys;
    this.#every = opts.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY;
    this.#onCheckpoint = opts.onCheckpoint;
    this.#pipeline = new Pipeline(
      {
        dir: opts.dir,
        mac: (data) => opts.keys.mac(data),
        sync: opts.sync ?? syncData,
        retryMs: opts.retryMs ?? DEFAULT_RETRY_MS,
        onGroupCommit: opts.onGroupCommit,
        onWriteFailure: opts.onWriteFailure,
        onHealthChange: opts.onHealthChange,
        lineDurable: (kind, line) => this.#lineDurable(kind, line),
        groupDurable: () => this.#groupDurable(),
      },
      seq,
      value,
    );
    this.#intervalTimer = setInterval(
      () => this.#checkpointIfDue(),
      opts.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS,
    );
    Deno.unrefTimer(this.#intervalTimer);
  }

  /**
   * Creates the next `audit.log.NNNNNN` in `opts.dir` (O_EXCL, never an existing one) and makes its
   * `login_ok` line durable; that line chains to the last complete line of the previous file.
   *
   * @example
   * ```ts
   * declare const keys: AuditKeys;
   * const log = await AuditLog.open({ dir: "/var/log/svcd", keys, login: { token: "svcd" } });
   * ```
   */
  static async open(opts: AuditOptions): Promise<AuditLog> {
    checkOptions(opts);
    const tail = await findChainTail(opts.dir);
    const log = new AuditLog(opts, tail.seq, tail.value);
    const name = auditFileName(tail.nextNumber);
    const opening = {
      file: name,
      prev_file: tail.prevFile,
      prev_size: tail.prevSize,
      prev_torn: tail.prevTorn,
      ...opts.login,
    };
    try {
      for (const member of Object.keys(opts.login ?? {})) {
        if (OPENING_MEMBERS.has(member)) {
          throw new TypeError(`login field '${member}' is written by the log itself`);
        }
      }
      await log.#enqueue("login_ok", "svcd", opening, { kind: "opening", file: name });
    } catch (err) {
      log.#shutDownQuietly();
      throw new AuditUnavailableError(
        `audit log cannot be started in ${opts.dir}: ${(err as Error).message}`,
      );
    }
    return log;
  }

  /**
   * Appends one line and resolves with its seq once it is durable (written and fdatasync'ed);
   * rejects with {@link AuditUnavailableError} when it cannot be, and with TypeError/RangeError for
   * bad arguments. `actor` is a byte string (one char per byte), e.g. a header value.
   *
   * @example
   * ```ts
   * declare const log: AuditLog;
   * await log.append("sign", "CN=alice,O=Example", { key: "k1", request_id: "r-17" });
   * ```
   */
  append(event: string, actor: string, fields: Record<string, unknown> = {}): Promise<number> {
    if (this.#closed) {
      return Promise.reject(
        new AuditUnavailableError("the audit log is closed; nothing was recorded"),
      );
    }
    return this.#enqueue(event, actor, fields, { kind: "event" });
  }

  /** False from a failed seal or write until an `audit_resumed` line is durable again. */
  get healthy(): boolean {
    return this.#pipeline.healthy;
  }

  /** Why the log is unhealthy (undefined when healthy). */
  get lastError(): string | undefined {
    return this.#pipeline.lastError;
  }

  /** The file being written, e.g. `audit.log.000004`. */
  get fileName(): string | undefined {
    return this.#pipeline.fileName;
  }

  /**
   * Counters since open: durable lines, fdatasync calls, largest group.
   *
   * @example
   * ```ts
   * declare const log: AuditLog;
   * const { lines, syncs } = log.stats(); // syncs / lines = fdatasync per line
   * ```
   */
  stats(): AuditStats {
    return this.#pipeline.stats();
  }

  /**
   * Tries to resume now (the retry timer does the same while unhealthy); resolves with `healthy`.
   *
   * @example
   * ```ts
   * declare const log: AuditLog;
   * if (!log.healthy) await log.retry();
   * ```
   */
  async retry(): Promise<boolean> {
    if (this.healthy || this.#closed) return this.healthy;
    this.#pipeline.resumeIfDown();
    await this.#pipeline.settle();
    return this.healthy;
  }

  /**
   * Writes a `shutdown` line and a final checkpoint over it, syncs and closes the file. Appends
   * after close are refused. Rejects (after closing the file) when those lines cannot be written.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#pipeline.stop();
    clearInterval(this.#intervalTimer);
    await this.#drain();
    try {
      this.#pipeline.resumeIfDown();
      await this.#pipeline.pushOwn("shutdown", {}, "event");
      await this.#checkpoint();
    } finally {
      await this.#drain();
      this.#pipeline.closeFile();
    }
  }

  #shutDownQuietly(): void {
    this.#closed = true;
    this.#pipeline.stop();
    clearInterval(this.#intervalTimer);
    try {
      this.#pipeline.closeFile();
    } catch { /* already closed */ }
  }

  async #drain(): Promise<void> {
    while (this.#pipeline.busy) await this.#pipeline.settle();
  }

  #enqueue(
    event: string,
    actor: string,
    fields: Record<string, unknown>,
    how: { kind: LineKind; file?: string },
  ): Promise<number> {
    let head: string, tail: string;
    try {
      if (how.kind === "event" && INTERNAL_EVENTS.has(event)) {
        throw new TypeError(`audit event '${event}' is written by the log itself`);
      }
      head = memberHead(event, actor);
      tail = memberTail(
        new Date(),
        fields,
        how.kind === "opening" ? RESERVED_MEMBERS : OPENING_MEMBERS,
      );
    } catch (err) {
      return Promise.reject(err);
    }
    this.#pipeline.resumeIfDown();
    return this.#pipeline.push(how.kind, head, tail, how.file);
  }

  // ---- checkpoints -------------------------------------------------------------------------

  #lineDurable(kind: LineKind, line: Uint8Array): void {
    if (kind === "opening") this.#sinceCheckpoint = 0;
    if (kind !== "checkpoint") this.#sinceCheckpoint++;
    else this.#tellCheckpoint(line);
  }

  #groupDurable(): void {
    if (this.#sinceCheckpoint >= this.#every && !this.#checkpointing && !this.#closed) {
      // A failed signature is tried again one interval later (the count restarts at the claim).
      this.#pipeline.track(this.#checkpoint().catch(() => {}));
    }
  }

  /** The interval's tick: a checkpoint when durable lines arrived that none covers yet. */
  #checkpointIfDue(): void {
    if (this.#sinceCheckpoint === 0 || this.#checkpointing || this.#closed || !this.healthy) return;
    this.#pipeline.track(this.#checkpoint().catch(() => {}));
  }

  #tellCheckpoint(line: Uint8Array): void {
    if (!this.#onCheckpoint) return;
    try {
      this.#onCheckpoint(new TextDecoder().decode(line.subarray(0, line.length - 1)));
    } catch { /* a copy that cannot be sent must not break the barrier */ }
  }

  /** Signs the durable chain head and appends a `checkpoint` line carrying the signature. */
  async #checkpoint(): Promise<void> {
    const claim = this.#checkpointing ? undefined : this.#pipeline.claim();
    if (!claim) return;
    this.#checkpointing = true;
    try {
      this.#sinceCheckpoint = 0;
      const signature = await this.#keys.signCheckpoint(checkpointMessage(claim));
      const fields = {
        file: claim.file,
        through_seq: claim.seq,
        through_hash: claim.head.toHex(),
        through_size: claim.size,
        sha256: claim.sha256.toHex(),
        signature: signature.toBase64(),
      };
      await this.#pipeline.pushOwn("checkpoint", fields, "checkpoint", claim.file);
    } finally {
      this.#checkpointing = false;
    }
  }
}

function checkOptions(opts: AuditOptions): void {
  if (typeof opts?.dir !== "string" || opts.dir === "") {
    throw new TypeError("audit: options.dir is required");
  }
  if (typeof opts.keys?.mac !== "function" || typeof opts.keys?.signCheckpoint !== "function") {
    throw new TypeError("audit: options.keys needs mac() and signCheckpoint()");
  }
  const every = opts.checkpointEvery;
  if (every !== undefined && (!Number.isSafeInteger(every) || every < 1)) {
    throw new RangeError(`audit: checkpointEvery must be a whole number ≥ 1, not ${every}`);
  }
  if (opts.sync !== undefined && typeof opts.sync !== "function") {
    throw new TypeError("audit: options.sync must be a function (file) => Promise<void>");
  }
  const interval = opts.checkpointIntervalMs;
  if (interval !== undefined && (!Number.isFinite(interval) || interval < 1)) {
    throw new RangeError(`audit: checkpointIntervalMs must be ≥ 1, not ${interval}`);
  }
  const retry = opts.retryMs;
  if (retry !== undefined && (!Number.isFinite(retry) || retry < 1)) {
    throw new RangeError(`audit: retryMs must be ≥ 1, not ${retry}`);
  }
}

/** The durable barrier of a group: fdatasync (the data and the size, not the mtime). */
function syncData(file: Deno.FsFile): Promise<void> {
  return file.syncData();
}
