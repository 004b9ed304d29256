/**
 * The pipeline behind `AuditLog` (./log.ts, whose module comment tells the whole course of a line):
 * the chain stage (seq, `prev` and hash, at once and in push order), the disk stage (a group sealed
 * by the token, written in one write, covered by one fdatasync) and the recovery after a failed
 * group (every line not yet durable refused, the chain rolled back, an outage until a resume line
 * is durable). The log validates what it is given, decides when to checkpoint and owns its
 * lifetime; every line it appends goes through here.
 *
 * @example
 * ```ts
 * declare const opts: PipelineOptions;
 * const pipeline = new Pipeline(opts, 0, new Uint8Array(32));
 * const seq = await pipeline.pushOwn("shutdown", {}, "event"); // durable now
 * ```
 */
import { createHash, type Hash } from "node:crypto";
import { concat } from "../bytes/mod.ts";
import { createAuditFile, nextAuditFileName, syncDirectory } from "./files.ts";
import type { CheckpointClaim } from "./checkpoints.ts";
import {
  chainInputWithRoom,
  hashedLine,
  lineBody,
  lineHash,
  MAC_BYTES,
  memberHead,
  memberTail,
  sealedLine,
  sealInput,
} from "./format.ts";
import { slabBytes } from "./slab.ts";

/** The line could not be made durable: the caller must withhold what the line records (503). */
export class AuditUnavailableError extends Error {
  override name = "AuditUnavailableError";
}

/** A caller's event, the opening line of a file, the line that ends an outage, or a checkpoint. */
export type LineKind = "event" | "opening" | "resume" | "checkpoint";

/** How the pipeline writes, and what it tells the log. */
export interface PipelineOptions {
  /** Folder of the audit files. */
  dir: string;
  /** Seals a group: HMAC-SHA256 with the audit key (`AuditKeys.mac`). */
  mac(data: Uint8Array): Promise<Uint8Array>;
  /** Makes a written group durable (`AuditOptions.sync`). */
  sync(file: Deno.FsFile): Promise<void>;
  /** While in an outage, a resume is tried this often (ms). */
  retryMs: number;
  onGroupCommit?: (lines: number, syncSeconds: number) => void;
  onWriteFailure?: () => void;
  onHealthChange?: (healthy: boolean, error?: string) => void;
  /** A line is durable, just before its push resolves: its kind and its bytes as written. */
  lineDurable(kind: LineKind, line: Uint8Array): void;
  /** A group is durable, after all of its lines. */
  groupDurable(): void;
}

interface Entry {
  kind: LineKind;
  head: string;
  tail: string;
  /** The file this line opens (kind "opening"), or the file a checkpoint's claim is about. */
  file?: string;
  resolve(seq: number): void;
  reject(err: Error): void;
}

/** A chained line: its bytes as written unsealed (in a buffer with room for a seal). */
interface Chained {
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

/**
 * The stages of one log, from a chain head (the seq and chain value of the last durable line).
 *
 * @example
 * ```ts
 * declare const pipeline: Pipeline;
 * if (!pipeline.healthy) pipeline.resumeIfDown();
 * ```
 */
export class Pipeline {
  readonly #opts: PipelineOptions;

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
  #diskQueue: Chained[] = [];
  #diskRunning = false;
  #needsRepair = false;

  #outage: Outage | undefined;
  #retryTimer: ReturnType<typeof setInterval> | undefined;
  #stopped = false;
  #pending = new Set<Promise<unknown>>();
  #stats = { lines: 0, syncs: 0, maxGroup: 0, seals: 0 };

  constructor(opts: PipelineOptions, seq: number, value: Uint8Array) {
    this.#opts = opts;
    this.#headSeq = this.#durableSeq = seq;
    this.#headValue = this.#durableValue = value;
  }

  /** False from a failed seal or write until the line that ends the outage is durable. */
  get healthy(): boolean {
    return this.#outage === undefined;
  }

  /** Why the pipeline is in an outage (undefined when healthy). */
  get lastError(): string | undefined {
    return this.#outage?.error;
  }

  /** The file being written. */
  get fileName(): string | undefined {
    return this.#fileName;
  }

  /** Lines made durable, fdatasync calls, the largest group, seals asked of the MAC key. */
  stats(): { lines: number; syncs: number; maxGroup: number; seals: number } {
    return { ...this.#stats };
  }

  /** Whether a push or tracked work has not settled yet. */
  get busy(): boolean {
    return this.#pending.size > 0;
  }

  /** Waits until everything pending now has settled. */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }

  /** Counts `p` as pending until it settles. */
  track(p: Promise<unknown>): void {
    this.#pending.add(p);
    const forget = () => this.#pending.delete(p);
    p.then(forget, forget);
  }

  /** Chains a line (`head`, `tail`: see ./format.ts) and resolves with its seq once durable. */
  push(kind: LineKind, head: string, tail: string, file?: string): Promise<number> {
    const { promise, resolve, reject } = Promise.withResolvers<number>();
    this.track(promise);
    this.#chain({ kind, head, tail, file, resolve, reject });
    return promise;
  }

  /** Pushes a line the log writes itself (actor `svcd`). */
  pushOwn(
    event: string,
    fields: Record<string, unknown>,
    kind: LineKind,
    file?: string,
  ): Promise<number> {
    return this.push(kind, memberHead(event, "svcd"), memberTail(new Date(), fields), file);
  }

  /** In an outage, queues the line that ends it, once per failure; after a removal it opens the next file. */
  resumeIfDown(): void {
    const outage = this.#outage;
    if (!outage || outage.resumeQueued) return;
    outage.resumeQueued = true;
    const fields = { error: outage.error, refused: outage.refused };
    let done: Promise<number>;
    if (outage.removed) this.#chooseReplacement(outage);
    if (outage.reopening) {
      const opening = outage.reopening;
      done = this.pushOwn("audit_reopened", { ...opening, ...fields }, "opening", opening.file);
    } else {
      done = this.pushOwn("audit_resumed", fields, "resume");
    }
    done.catch(() => {/* the outage stays; the retry timer tries again */});
  }

  /** What a checkpoint signs now: the durable chain head and the SHA-256 of the file up to it. */
  claim(): CheckpointClaim | undefined {
    if (!this.#fileName) return undefined;
    return {
      file: this.#fileName,
      seq: this.#durableSeq,
      head: this.#durableValue,
      size: this.#durableSize,
      sha256: new Uint8Array(this.#hash.copy().digest()),
      version: 2,
    };
  }

  /** No retry any more: the log is closing (lines pushed still go through). */
  stop(): void {
    this.#stopped = true;
    this.#stopRetry();
  }

  /** Closes the file being written. */
  closeFile(): void {
    this.#file?.close();
    this.#file = undefined;
  }

  /**
   * Names the next file and what it chains to: the file of the last durable line, which is still
   * the one before an earlier replacement if that one was removed before its opening was durable.
   */
  #chooseReplacement(outage: Outage): void {
    outage.reopening = {
      file: nextAuditFileName(this.#opts.dir, this.#fileName),
      prev_file: outage.reopening ? outage.reopening.prev_file : this.#fileName ?? null,
      prev_size: outage.reopening ? outage.reopening.prev_size : this.#durableSize,
    };
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
          await this.#opts.sync(this.#file!);
          this.#opts.onGroupCommit?.(group.length, (performance.now() - syncStart) / 1000);
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
  async #sealed(group: Chained[]): Promise<Uint8Array> {
    const last = group[group.length - 1];
    this.#stats.seals++;
    const seal = await this.#opts.mac(sealInput(last.hash));
    if (!(seal instanceof Uint8Array) || seal.length !== MAC_BYTES) {
      throw new Error(`the MAC key returned ${seal?.length} bytes, not ${MAC_BYTES}`);
    }
    const lines = group.map((f) => f.line);
    lines[lines.length - 1] = last.sealed = sealedLine(last.line, seal);
    return concat(lines, slabBytes);
  }

  /** Opens the new file for an opening line; after a failure, cuts the file back to durable bytes. */
  async #prepareFile(first: Chained): Promise<void> {
    if (first.entry.kind === "opening" && first.entry.file !== this.#fileName) {
      const file = await createAuditFile(this.#opts.dir, first.entry.file!);
      this.#file?.close();
      this.#file = file;
      this.#fileName = first.entry.file;
      this.#durableSize = 0;
      this.#hash = createHash("sha256");
      this.#needsRepair = false;
      // The replacement exists from here on: a failure below is repaired and retried in it.
      if (this.#outage) this.#outage.removed = false;
      await syncDirectory(this.#opts.dir);
      return;
    }
    if (this.#needsRepair) {
      await this.#file!.truncate(this.#durableSize);
      await this.#file!.seek(this.#durableSize, Deno.SeekMode.Start);
      // The opening is written again when the directory sync after creating the file failed.
      if (first.entry.kind === "opening") await syncDirectory(this.#opts.dir);
      this.#needsRepair = false;
    }
  }

  #committed(group: Chained[], bytes: Uint8Array): void {
    const last = group[group.length - 1];
    this.#durableSeq = last.seq;
    this.#durableValue = last.hash;
    this.#durableSize += bytes.length;
    this.#hash.update(bytes);
    this.#stats.lines += group.length;
    this.#stats.maxGroup = Math.max(this.#stats.maxGroup, group.length);
    for (const f of group) {
      if (f.entry.kind === "opening" || f.entry.kind === "resume") this.#endOutage();
      this.#opts.lineDurable(f.entry.kind, f.sealed ?? f.line);
      f.entry.resolve(f.seq);
    }
    this.#opts.groupDurable();
  }

  // ---- failure and recovery ----------------------------------------------------------------

  /**
   * Refuses every line not yet durable — the group that failed and every line chained after it —
   * and rolls the chain back to the last durable line.
   */
  #refuseUndurable(group: Chained[], why: string, removed: boolean): void {
    this.#opts.onWriteFailure?.();
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
    if (this.#retryTimer === undefined && !this.#stopped) {
      const timer = setInterval(() => this.resumeIfDown(), this.#opts.retryMs);
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
      this.#opts.onHealthChange?.(healthy, error);
    } catch { /* a logging callback must not break the barrier */ }
  }

  #stopRetry(): void {
    if (this.#retryTimer !== undefined) clearInterval(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  #path(): string {
    return `${this.#opts.dir}/${this.#fileName ?? "(no file)"}`;
  }
}

class RemovedError extends Error {}

/** A synchronous write: it only copies into the page cache, and saves a thread-pool round trip per group. */
function writeAll(file: Deno.FsFile, bytes: Uint8Array): void {
  let at = 0;
  while (at < bytes.length) {
    const n = file.writeSync(bytes.subarray(at));
    if (n <= 0) throw new Error("write made no progress");
    at += n;
  }
}
