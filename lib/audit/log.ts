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
 * @example
 * ```ts
 * declare const keys: AuditKeys, subject: string;
 * const log = await AuditLog.open({ dir: "/var/log/svcd", keys, login: { token: "svcd" } });
 * const seq = await log.append("sign", subject, { key: "k1", request_id: "r1" }); // durable now
 * await log.close();
 * ```
 */
import { createHash, type Hash } from "node:crypto";
import { concat } from "../bytes/mod.ts";
import {
  auditFileName,
  auditFileNumber,
  chainInputWithRoom,
  checkpointMessage,
  hashedLine,
  lineBody,
  lineHash,
  MAC_BYTES,
  memberHead,
  memberTail,
  OPENING_MEMBERS,
  RESERVED_MEMBERS,
  sealedLine,
  sealInput,
} from "./format.ts";
import { findChainTail } from "./files.ts";
import { slabBytes } from "./slab.ts";

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

/** The line could not be made durable: the caller must withhold what the line records (503). */
export class AuditUnavailableError extends Error {
  override name = "AuditUnavailableError";
}

type Kind = "event" | "opening" | "resume" | "checkpoint";

interface Entry {
  kind: Kind;
  head: string;
  tail: string;
  /** The file this line opens (kind "opening"), or the file a checkpoint's claim is about. */
  file?: string;
  resolve(seq: number): void;
  reject(err: Error): void;
}

/** A chained line: its bytes as written unsealed (in a buffer with room for a seal). */
interface Finished {
  entry: Entry;
  line: Uint8Array;
  /** The line as written when it was the last of its group (with the seal). */
  sealed?: Uint8Array;
  seq: number;
  hash: Uint8Array;
}

interface Outage {
  error: string;
  refused: number;
  resumeQueued: boolean;
  /** The file was unlinked and no replacement exists yet: recovery creates one. */
  removed: boolean;
  /**
   * The opening line of the replacement file, chosen once per removal and written again (into the
   * same file, cut back to empty) until it is durable: a failed attempt never costs another file.
   */
  reopening?: Record<string, unknown> & { file: string };
}

const DEFAULT_CHECKPOINT_EVERY = 1000;
const DEFAULT_CHECKPOINT_INTERVAL_MS = 60_000;
const DEFAULT_RETRY_MS = 1000;
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
  readonly #dir: string;
  readonly #keys: AuditKeys;
  readonly #every: number;
  readonly #retryMs: number;
  readonly #onHealthChange: AuditOptions["onHealthChange"];
  readonly #sync: (file: Deno.FsFile) => Promise<void>;
  readonly #onCheckpoint: AuditOptions["onCheckpoint"];
  readonly #onGroupCommit: AuditOptions["onGroupCommit"];
  readonly #onWriteFailure: AuditOptions["onWriteFailure"];
  readonly #intervalTimer: ReturnType<typeof setInterval>;

  // The chain stage: the last line it chained (not necessarily durable).
  #headSeq: number;
  #headValue: Uint8Array;
  #headFile: string | undefined;

  // The disk stage: the last durable line and the file it is in.
  #file: Deno.FsFile | undefined;
  #fileName: string | undefined;
  #durableSeq: number;
  #durableValue: Uint8Array;
  #durableSize = 0;
  #hash: Hash = createHash("sha256");
  /** Lines (other than checkpoints) made durable since the last checkpoint's claim. */
  #sinceCheckpoint = 0;
  #diskQueue: Finished[] = [];
  #diskRunning = false;
  #needsRepair = false;

  #outage: Outage | undefined;
  #retryTimer: ReturnType<typeof setInterval> | undefined;
  #checkpointing = false;
  #closed = false;
  #closing: Promise<void> | undefined;
  #pending = new Set<Promise<unknown>>();
  #stats: AuditStats = { lines: 0, syncs: 0, maxGroup: 0, seals: 0 };

  private constructor(opts: AuditOptions, seq: number, value: Uint8Array) {
    this.#dir = opts.dir;
    this.#keys = opts.keys;
    this.#every = opts.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY;
    this.#retryMs = opts.retryMs ?? DEFAULT_RETRY_MS;
    this.#onHealthChange = opts.onHealthChange;
    this.#sync = opts.sync ?? syncData;
    this.#onCheckpoint = opts.onCheckpoint;
    this.#onGroupCommit = opts.onGroupCommit;
    this.#onWriteFailure = opts.onWriteFailure;
    this.#intervalTimer = setInterval(
      () => this.#checkpointIfDue(),
      opts.checkpointIntervalMs ?? DEFAULT_CHECKPOINT_INTERVAL_MS,
    );
    Deno.unrefTimer(this.#intervalTimer);
    this.#headSeq = this.#durableSeq = seq;
    this.#headValue = this.#durableValue = value;
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
    return this.#outage === undefined;
  }

  /** Why the log is unhealthy (undefined when healthy). */
  get lastError(): string | undefined {
    return this.#outage?.error;
  }

  /** The file being written, e.g. `audit.log.000004`. */
  get fileName(): string | undefined {
    return this.#fileName;
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
    return { ...this.#stats };
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
    if (!this.#outage || this.#closed) return this.healthy;
    if (!this.#outage.resumeQueued) this.#queueResume();
    await Promise.allSettled([...this.#pending]);
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
    this.#stopRetry();
    clearInterval(this.#intervalTimer);
    await this.#drain();
    try {
      if (this.#outage && !this.#outage.resumeQueued) this.#queueResume();
      await this.#pushInternal("shutdown", {}, "event");
      await this.#checkpoint();
    } finally {
      await this.#drain();
      this.#file?.close();
      this.#file = undefined;
    }
  }

  #shutDownQuietly(): void {
    this.#closed = true;
    this.#stopRetry();
    clearInterval(this.#intervalTimer);
    try {
      this.#file?.close();
    } catch { /* already closed */ }
    this.#file = undefined;
  }

  async #drain(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  // ---- entering the chain ------------------------------------------------------------------

  #enqueue(
    event: string,
    actor: string,
    fields: Record<string, unknown>,
    how: { kind: Kind; file?: string },
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
    if (this.#outage && !this.#outage.resumeQueued) this.#queueResume();
    return this.#push(how.kind, head, tail, how.file);
  }

  #push(kind: Kind, head: string, tail: string, file?: string): Promise<number> {
    const { promise, resolve, reject } = Promise.withResolvers<number>();
    this.#track(promise);
    this.#chain({ kind, head, tail, file, resolve, reject });
    return promise;
  }

  #track(p: Promise<unknown>): void {
    this.#pending.add(p);
    const forget = () => this.#pending.delete(p);
    p.then(forget, forget);
  }

  /** Queues the line that ends an outage; after a removed file it opens the next file. */
  #queueResume(): void {
    const outage = this.#outage!;
    outage.resumeQueued = true;
    const fields = { error: outage.error, refused: outage.refused };
    let done: Promise<number>;
    if (outage.removed) this.#chooseReplacement(outage);
    if (outage.reopening) {
      const opening = outage.reopening;
      done = this.#pushInternal(
        "audit_reopened",
        { ...opening, ...fields },
        "opening",
        opening.file,
      );
    } else {
      done = this.#pushInternal("audit_resumed", fields, "resume");
    }
    done.catch(() => {/* the outage stays; the retry timer tries again */});
  }

  #pushInternal(
    event: string,
    fields: Record<string, unknown>,
    kind: Kind,
    file?: string,
  ): Promise<number> {
    return this.#push(kind, memberHead(event, "svcd"), memberTail(new Date(), fields), file);
  }

  /**
   * Names the next file and what it chains to: the file of the last durable line, which is still
   * the one before an earlier replacement if that one was removed before its opening was durable.
   */
  #chooseReplacement(outage: Outage): void {
    outage.reopening = {
      file: this.#reopenName(),
      prev_file: outage.reopening ? outage.reopening.prev_file : this.#fileName ?? null,
      prev_size: outage.reopening ? outage.reopening.prev_size : this.#durableSize,
    };
  }

  #reopenName(): string {
    const current = this.#fileName ? auditFileNumber(this.#fileName)! : 0;
    let highest = current;
    try {
      for (const e of Deno.readDirSync(this.#dir)) {
        highest = Math.max(highest, auditFileNumber(e.name) ?? 0);
      }
    } catch { /* the directory itself may be gone: creating the file will say so */ }
    return auditFileName(highest + 1);
  }

  // ---- stage 1: the chain -----------------------------------------------------------------

  /** Gives the line its seq, `prev` and hash at once (no token call) and queues it for the disk. */
  #chain(entry: Entry): void {
    if (entry.kind === "checkpoint" && entry.file !== (this.#headFile ?? this.#fileName)) {
      entry.reject(new AuditUnavailableError("checkpoint dropped: the log moved to another file"));
      return;
    }
    const seq = this.#headSeq + 1;
    const prev = this.#headValue;
    const input = chainInputWithRoom(prev, lineBody(entry.head, seq, entry.tail, prev));
    const hash = lineHash(input);
    this.#headSeq = seq;
    this.#headValue = hash;
    if (entry.kind === "opening") this.#headFile = entry.file;
    this.#diskQueue.push({ entry, line: hashedLine(input, hash), seq, hash });
    this.#runDisk();
  }

  // ---- stage 2: the disk -------------------------------------------------------------------

  #runDisk(): void {
    if (this.#diskRunning) return;
    this.#diskRunning = true;
    void this.#diskLoop();
  }

  async #diskLoop(): Promise<void> {
    // The flag drops in the same turn as the last emptiness check: an entry pushed after
    // it starts a new loop instead of waiting for a loop that is already over.
    try {
      while (this.#diskQueue.length > 0) {
        // A new file's opening line must be the first bytes of its file: a group never spans files.
        const cut = this.#diskQueue.findIndex((f, i) => i > 0 && f.entry.kind === "opening");
        const group = cut < 0 ? this.#diskQueue : this.#diskQueue.slice(0, cut);
        this.#diskQueue = cut < 0 ? [] : this.#diskQueue.slice(cut);
        let bytes: Uint8Array;
        try {
          bytes = await this.#sealed(group);
        } catch (err) {
          this.#refuseUndurable(
            group,
            `the audit seal could not be computed: ${(err as Error).message}`,
            false,
          );
          continue;
        }
        try {
          await this.#prepareFile(group[0]);
          writeAll(this.#file!, bytes);
          this.#stats.syncs++;
          const syncStart = performance.now();
          await this.#sync(this.#file!);
          this.#onGroupCommit?.(group.length, (performance.now() - syncStart) / 1000);
          if (this.#file!.statSync().nlink === 0) {
            throw new RemovedError(`${this.#path()} was removed while the daemon was writing it`);
          }
        } catch (err) {
          const why = `audit file ${this.#path()} cannot be written: ${(err as Error).message}`;
          this.#needsRepair = true;
          this.#refuseUndurable(group, why, err instanceof RemovedError);
          continue;
        }
        this.#committed(group, bytes);
      }
    } finally {
      this.#diskRunning = false;
    }
  }

  /**
   * The group's bytes, its last line sealed by the token: the seal covers that line's hash, and
   * through the `prev` links every line before it.
   */
  async #sealed(group: Finished[]): Promise<Uint8Array> {
    const last = group[group.length - 1];
    this.#stats.seals++;
    const seal = await this.#keys.mac(sealInput(last.hash));
    if (!(seal instanceof Uint8Array) || seal.length !== MAC_BYTES) {
      throw new Error(`the MAC key returned ${seal?.length} bytes, not ${MAC_BYTES}`);
    }
    const lines = group.map((f) => f.line);
    lines[lines.length - 1] = last.sealed = sealedLine(last.line, seal);
    return concat(lines, slabBytes);
  }

  /** Opens the new file for an opening line; after a failure, cuts the file back to durable bytes. */
  async #prepareFile(first: Finished): Promise<void> {
    if (first.entry.kind === "opening" && first.entry.file !== this.#fileName) {
      const path = `${this.#dir}/${first.entry.file}`;
      const file = await Deno.open(path, { createNew: true, write: true, mode: 0o640 }).catch(
        (err) => {
          if (err instanceof Deno.errors.AlreadyExists) {
            throw new Error(`${path} already exists: is another svcd writing ${this.#dir}?`);
          }
          throw err;
        },
      );
      this.#file?.close();
      this.#file = file;
      this.#fileName = first.entry.file;
      this.#durableSize = 0;
      this.#hash = createHash("sha256");
      this.#needsRepair = false;
      // The replacement exists from here on: a failure below is repaired and retried in it.
      if (this.#outage) this.#outage.removed = false;
      await syncDirectory(this.#dir);
      return;
    }
    if (this.#needsRepair) {
      await this.#file!.truncate(this.#durableSize);
      await this.#file!.seek(this.#durableSize, Deno.SeekMode.Start);
      // The opening is written again when the directory sync after creating the file failed.
      if (first.entry.kind === "opening") await syncDirectory(this.#dir);
      this.#needsRepair = false;
    }
  }

  #committed(group: Finished[], bytes: Uint8Array): void {
    const last = group[group.length - 1];
    this.#durableSeq = last.seq;
    this.#durableValue = last.hash;
    this.#durableSize += bytes.length;
    this.#hash.update(bytes);
    this.#stats.lines += group.length;
    this.#stats.maxGroup = Math.max(this.#stats.maxGroup, group.length);
    for (const f of group) {
      if (f.entry.kind === "opening") this.#sinceCheckpoint = 0;
      if (f.entry.kind !== "checkpoint") this.#sinceCheckpoint++;
      if (f.entry.kind === "opening" || f.entry.kind === "resume") this.#endOutage();
      if (f.entry.kind === "checkpoint") this.#tellCheckpoint(f.sealed ?? f.line);
      f.entry.resolve(f.seq);
    }
    if (this.#sinceCheckpoint >= this.#every && !this.#checkpointing && !this.#closed) {
      // A failed signature is tried again one interval later (the count restarts at the claim).
      this.#track(this.#checkpoint().catch(() => {}));
    }
  }

  /**
   * Refuses every line not yet durable — the group that failed and every line chained after it —
   * and rolls the chain back to the last durable line.
   */
  #refuseUndurable(group: Finished[], why: string, removed: boolean): void {
    this.#onWriteFailure?.();
    this.#beginOutage(why, removed);
    const refused: Entry[] = group.map((f) => f.entry);
    for (const f of this.#diskQueue) refused.push(f.entry);
    this.#diskQueue = [];
    this.#headSeq = this.#durableSeq;
    this.#headValue = this.#durableValue;
    this.#headFile = this.#fileName;
    this.#outage!.refused += refused.filter((e) => e.kind === "event").length;
    this.#outage!.resumeQueued = false;
    const error = new AuditUnavailableError(`${why}; the line was not recorded`);
    for (const e of refused) e.reject(error);
  }

  #beginOutage(error: string, removed: boolean): void {
    if (this.#outage) {
      this.#outage.error = error;
      this.#outage.removed ||= removed;
    } else {
      this.#outage = { error, refused: 0, resumeQueued: false, removed };
      this.#tell(false, error);
    }
    if (this.#retryTimer === undefined && !this.#closed) {
      const timer = setInterval(() => void this.retry(), this.#retryMs);
      Deno.unrefTimer(timer);
      this.#retryTimer = timer;
    }
  }

  #endOutage(): void {
    if (!this.#outage) return;
    this.#outage = undefined;
    this.#stopRetry();
    this.#tell(true);
  }

  #tell(healthy: boolean, error?: string): void {
    try {
      this.#onHealthChange?.(healthy, error);
    } catch { /* a logging callback must not break the barrier */ }
  }

  #stopRetry(): void {
    if (this.#retryTimer !== undefined) clearInterval(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  // ---- checkpoints -------------------------------------------------------------------------

  /** The interval's tick: a checkpoint when durable lines arrived that none covers yet. */
  #checkpointIfDue(): void {
    if (this.#sinceCheckpoint === 0 || this.#checkpointing || this.#closed || this.#outage) return;
    this.#track(this.#checkpoint().catch(() => {}));
  }

  #tellCheckpoint(line: Uint8Array): void {
    if (!this.#onCheckpoint) return;
    try {
      this.#onCheckpoint(new TextDecoder().decode(line.subarray(0, line.length - 1)));
    } catch { /* a copy that cannot be sent must not break the barrier */ }
  }

  /** Signs the durable chain head and appends a `checkpoint` line carrying the signature. */
  async #checkpoint(): Promise<void> {
    if (this.#checkpointing || !this.#fileName) return;
    this.#checkpointing = true;
    try {
      const claim = {
        file: this.#fileName,
        seq: this.#durableSeq,
        head: this.#durableValue,
        size: this.#durableSize,
        sha256: new Uint8Array(this.#hash.copy().digest()),
        version: 2 as const,
      };
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
      await this.#pushInternal("checkpoint", fields, "checkpoint", claim.file);
    } finally {
      this.#checkpointing = false;
    }
  }

  #path(): string {
    return `${this.#dir}/${this.#fileName ?? "(no file)"}`;
  }
}

class RemovedError extends Error {}

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

/** A synchronous write: it only copies into the page cache, and saves a thread-pool round trip per group. */
function writeAll(file: Deno.FsFile, bytes: Uint8Array): void {
  let at = 0;
  while (at < bytes.length) {
    const n = file.writeSync(bytes.subarray(at));
    if (n <= 0) throw new Error("write made no progress");
    at += n;
  }
}

/** The durable barrier of a group: fdatasync (the data and the size, not the mtime). */
function syncData(file: Deno.FsFile): Promise<void> {
  return file.syncData();
}

/** A new file's directory entry is durable only once the directory itself is synced. */
async function syncDirectory(dir: string): Promise<void> {
  using d = await Deno.open(dir, { read: true });
  await d.sync();
}
