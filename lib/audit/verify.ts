/**
 * The audit verifier: walks files in chain order and checks, line by line, seq continuity, the
 * `prev` links, each line's hash, the seals (when given the MAC key; in logs from before the seals,
 * each line's MAC), the links between files, and every checkpoint (its claim against the file's
 * bytes and, given the public key, its Ed25519 signature: ./checkpoints.ts). It stops at the first problem and names
 * its file and line. What follows a file's last sealed line — a partial line cut by a crash, or
 * whole lines of a group whose seal never reached the disk — is its torn tail: reported, not part
 * of the chain, and nothing before it is doubted. In a file that a later file continues, the torn
 * tail must be exactly the one the later file's opening line recorded (`prev_torn`): any other
 * bytes there were added after the file was closed, which is tampering.
 *
 * @example
 * ```ts
 * declare const mac: (data: Uint8Array) => Promise<Uint8Array>;
 * const result = await verifyAuditFiles({ files: ["/var/log/svcd/audit.log.000001"], mac, fromStart: true });
 * if (!result.ok) console.error(result.problem);
 * ```
 */
import { bytesEqual, concat } from "../bytes/mod.ts";
import { CheckpointHashes, checkpointProblem } from "./checkpoints.ts";
import {
  auditFileNumber,
  type AuditLine,
  chainInput,
  lineHash,
  OPENING_EVENTS,
  type ParsedLine,
  parseLine,
  sealInput,
  ZERO_MAC,
} from "./format.ts";

/** What to verify and with which keys. */
export interface VerifyOptions {
  /** Paths of audit files, in chain order. */
  files: string[];
  /** The audit MAC (HMAC-SHA256 with `svc-audit`); without it seals (and v1 MACs) are not checked. */
  mac?: (data: Uint8Array) => Promise<Uint8Array>;
  /** The checkpoint public key (Ed25519); without it checkpoint signatures are not checked. */
  publicKey?: CryptoKey;
  /** The first file must be the start of the chain (true for a whole directory). */
  fromStart: boolean;
  /** MACs computed at once (default 64). */
  window?: number;
  /**
   * Seqs whose hash the caller wants to know (checkpoints collected elsewhere, ./witness.ts):
   * `VerifyResult.hashes` gives the hash of each one the chain holds.
   */
  lookup?: ReadonlySet<number>;
}

/** One file's outcome. */
export interface FileReport {
  file: string;
  /** Complete lines read (up to the problem, if any). */
  lines: number;
  firstSeq?: number;
  lastSeq?: number;
  checkpoints: number;
  /** Highest seq covered by a checkpoint that was checked against the file's bytes. */
  signedThrough?: number;
  notes: string[];
  status: "ok" | "failed" | "not checked";
}

/** The first thing found wrong. */
export interface Problem {
  file: string;
  /** 1-based line number in that file; 0 when the problem is the file as a whole. */
  line: number;
  message: string;
}

/** Everything the verifier found. */
export interface VerifyResult {
  ok: boolean;
  files: FileReport[];
  problem?: Problem;
  /**
   * The newest file's torn tail, when it has one: the bytes after its last sealed line (a partial
   * line, or whole lines no seal covers), from line `line` on. Not part of the chain.
   */
  torn?: { file: string; line: number; bytes: number };
  /** For each seq of `lookup` the chain holds (up to the problem, if any): its hash, hex. */
  hashes: Map<number, string>;
  /** Seq of the chain's last line (0 when none). */
  lastSeq: number;
}

/** The last line of a file that a seal (or a v1 MAC) covers, and the chain state there. */
interface SealedPoint {
  lineNo: number;
  /** Byte offset just after it. */
  end: number;
  seq: number;
  value: Uint8Array;
}

/** Raised inside the walk to stop at the first problem. */
class Found extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

const CHUNK = 1 << 20;

/**
 * Verifies `opts.files` (see the module comment); never throws for a bad log, only for unreadable
 * files.
 *
 * @example
 * ```ts
 * import type { AuditKeys } from "./log.ts";
 * declare const files: string[], keys: AuditKeys, publicKey: CryptoKey;
 * const r = await verifyAuditFiles({ files, mac: keys.mac, publicKey, fromStart: true });
 * ```
 */
export async function verifyAuditFiles(opts: VerifyOptions): Promise<VerifyResult> {
  const walk = new ChainWalk(opts);
  const reports = opts.files.map((f): FileReport => ({
    file: basename(f),
    lines: 0,
    checkpoints: 0,
    notes: [],
    status: "not checked",
  }));
  let torn: VerifyResult["torn"];
  for (let i = 0; i < opts.files.length; i++) {
    try {
      const t = await walk.file(opts.files[i], reports[i], i === opts.files.length - 1);
      torn = t ?? torn;
      reports[i].status = "ok";
    } catch (err) {
      if (!(err instanceof Found)) throw err;
      const at = reports.findIndex((r) => r.file === err.problem.file);
      reports[at >= 0 ? at : i].status = "failed";
      return { ok: false, files: reports, problem: err.problem, torn, ...walk.found() };
    }
  }
  if (opts.files.length === 0) {
    return {
      ok: false,
      files: reports,
      problem: { file: "", line: 0, message: "no audit files to verify" },
      ...walk.found(),
    };
  }
  return { ok: true, files: reports, torn, ...walk.found() };
}

/** What the next file's opening line must agree with about the file before it. */
interface PreviousFile {
  name: string;
  /** Bytes through the last sealed line. */
  completeSize: number;
  /** Its line number. */
  lines: number;
  /** Bytes after it: the torn tail. */
  torn: number;
}

/** The state carried from line to line and file to file. */
class ChainWalk {
  #opts: VerifyOptions;
  #seq = 0;
  /** The chain value of the last line: what the next `prev` must name. */
  #value: Uint8Array = ZERO_MAC;
  #sealed: SealedPoint = { lineNo: 0, end: 0, seq: 0, value: ZERO_MAC };
  #previous: PreviousFile | undefined;
  #macs: MacWindow;
  /** Seqs of this file's lines (checkpoints aside) that no checkpoint covers yet. */
  #unsigned: number[] = [];
  /** Hashes of the lines `lookup` asks about. */
  #hashes = new Map<number, string>();

  constructor(opts: VerifyOptions) {
    this.#opts = opts;
    this.#macs = new MacWindow(opts.mac, opts.window ?? 64);
  }

  /** Checks one file; returns its torn tail, if any. */
  async file(path: string, report: FileReport, newest: boolean): Promise<VerifyResult["torn"]> {
    const name = basename(path);
    const hashes = new CheckpointHashes();
    this.#unsigned = [];
    this.#sealed = { lineNo: 0, end: 0, seq: this.#seq, value: this.#value };
    let lineNo = 0;
    let offset = 0;
    let tail: Uint8Array = new Uint8Array(0);
    for await (const chunk of readChunks(path)) {
      const data = tail.length === 0 ? chunk : concat([tail, chunk]);
      let from = 0;
      for (let nl = data.indexOf(0x0a); nl >= 0; nl = data.indexOf(0x0a, from)) {
        const bytes = data.subarray(from, nl);
        lineNo++;
        offset += bytes.length + 1;
        await this.#line(name, lineNo, bytes, offset, report, hashes);
        from = nl + 1;
      }
      tail = data.slice(from);
    }
    await this.#macs.drain();
    report.lines = lineNo;
    if (lineNo === 0) {
      report.notes.push(
        newest
          ? "no complete line"
          : "no complete line (a start that failed before its first line was durable)",
      );
    }
    if (tail.length > 0) await this.#tornTail(name, lineNo + 1, tail, report);
    const sealed = this.#sealed;
    if (sealed.lineNo < lineNo) this.#unsealedTail(sealed, lineNo, report);
    this.#linkCheckedBy(name, sealed.end, sealed.lineNo, offset + tail.length - sealed.end);
    this.#unsigned = this.#unsigned.filter((seq) => seq <= sealed.seq);
    if (this.#unsigned.length > 0) {
      const n = this.#unsigned.length;
      report.notes.push(`${n} line(s) after the last checkpoint are covered by the seals only`);
    }
    if (tail.length === 0 && sealed.lineNo === lineNo) return undefined;
    return { file: name, line: sealed.lineNo + 1, bytes: offset + tail.length - sealed.end };
  }

  /**
   * Whole lines after the last seal: a group cut before its seal reached the disk (never
   * acknowledged: the seal is written with the group, before its fdatasync), or lines added
   * without the key. Either way no key vouches for them: they leave the chain, which continues
   * (in the next file) from the last sealed line.
   */
  #unsealedTail(sealed: SealedPoint, lineNo: number, report: FileReport): void {
    const first = sealed.lineNo + 1;
    report.notes.push(
      `line(s) ${first}–${lineNo} have no seal after them (a group cut by a crash before its ` +
        "sync, never acknowledged, or lines added without the audit key): not part of the chain",
    );
    this.#seq = sealed.seq;
    this.#value = sealed.value;
    for (const seq of this.#hashes.keys()) if (seq > sealed.seq) this.#hashes.delete(seq);
    report.lastSeq = sealed.lineNo > 0 ? sealed.seq : undefined;
    if (sealed.lineNo === 0) report.firstSeq = undefined;
  }

  /** What `lookup` asked, and where the chain ends. */
  found(): { hashes: Map<number, string>; lastSeq: number } {
    return { hashes: this.#hashes, lastSeq: this.#seq };
  }

  /** The next file must say where this one ended; remember what it must say. */
  #linkCheckedBy(name: string, completeSize: number, lines: number, torn: number): void {
    this.#previous = { name, completeSize, lines, torn };
  }

  async #line(
    file: string,
    lineNo: number,
    bytes: Uint8Array,
    end: number,
    report: FileReport,
    hashes: CheckpointHashes,
  ): Promise<void> {
    const fail = async (message: string): Promise<never> => {
      await this.#macs.drain(); // an earlier line's MAC failure is the first problem
      throw new Found({ file, line: lineNo, message });
    };
    const parsed = parseLine(bytes);
    if (typeof parsed === "string") return await fail(parsed);
    const { line, body, value, version, seal } = parsed;
    if (lineNo === 1) await this.#opening(file, line, fail);
    else if (OPENING_EVENTS.has(line.event)) {
      await fail(`a '${line.event}' line may only open a file`);
    }
    if (line.seq !== this.#seq + 1) {
      const gap = line.seq - this.#seq - 1;
      await fail(
        gap > 0
          ? `seq ${line.seq} where ${
            this.#seq + 1
          } was expected: ${gap} line(s) were removed or moved from here`
          : `seq ${line.seq} where ${
            this.#seq + 1
          } was expected: lines are out of order or repeated`,
      );
    }
    if (line.prev !== this.#value.toHex()) {
      await fail(
        `its prev does not match the ${
          version === 1 ? "MAC" : "hash"
        } of the line before it: the chain was broken here`,
      );
    }
    const input = chainInput(this.#value, body);
    if (version === 1) {
      this.#macs.check(input, value, {
        file,
        line: lineNo,
        message: "its MAC does not match: the line was edited, or written without the audit key",
      });
    } else if (!bytesEqual(lineHash(input), value)) {
      await fail("its hash does not match its bytes: the line was edited");
    }
    if (seal) {
      const from = this.#sealed.lineNo + 1;
      this.#macs.check(sealInput(value), seal, {
        file,
        line: lineNo,
        message: `its seal does not match: ${
          from === lineNo ? "the line" : `one of lines ${from}–${lineNo} (the group it seals)`
        } was edited and re-hashed, or the seal was made without the audit key`,
      });
    }
    this.#seq = line.seq;
    this.#value = value;
    if (this.#opts.lookup?.has(line.seq)) this.#hashes.set(line.seq, value.toHex());
    if (version === 1 || seal) this.#sealed = { lineNo, end, seq: line.seq, value };
    report.firstSeq ??= line.seq;
    report.lastSeq = line.seq;
    hashes.add(line.seq, value.toHex(), end, bytes);
    if (line.event === "checkpoint") {
      const why = await checkpointProblem(file, line, hashes, this.#opts.publicKey);
      if (why) await fail(why);
      report.checkpoints++;
      report.signedThrough = line.through_seq as number;
      this.#unsigned = this.#unsigned.filter((seq) => seq > report.signedThrough!);
    } else {
      this.#unsigned.push(line.seq);
    }
    await this.#macs.settleIfFull();
  }

  /** Line 1 of a file: an opening line that names its file and links to the file before it. */
  async #opening(
    file: string,
    line: AuditLine,
    fail: (m: string) => Promise<never>,
  ): Promise<void> {
    if (!OPENING_EVENTS.has(line.event)) {
      await fail(
        `the first line of a file must be login_ok or audit_reopened, not '${line.event}'`,
      );
    }
    if (line.file !== file) {
      await fail(`it names the file ${JSON.stringify(line.file)}: the file was renamed`);
    }
    const prevFile = line.prev_file;
    const prevSize = line.prev_size;
    if (!this.#previous) {
      if (prevFile === null) return;
      if (this.#opts.fromStart) {
        const missing = typeof prevFile === "string" ? prevFile : "an earlier file";
        await fail(
          `it continues ${missing}, which is missing: the log does not start here ` +
            "(to check only the files that are left, name them: svcd audit verify FILE…)",
        );
      }
      this.#seq = line.seq - 1; // a subset: trust the link into the first file given
      this.#value = Uint8Array.fromHex(line.prev);
      this.#sealed = { lineNo: 0, end: 0, seq: this.#seq, value: this.#value };
      return;
    }
    const before = this.#previous!;
    if (prevFile !== before.name) {
      const n = typeof prevFile === "string" ? auditFileNumber(prevFile) : undefined;
      const b = auditFileNumber(before.name);
      if (n !== undefined && b !== undefined && n > b) {
        await fail(
          `it continues ${prevFile}, which is missing (removed from between ${before.name} and ${file})`,
        );
      }
      await fail(
        `it continues ${JSON.stringify(prevFile)}, but the file before it is ${before.name}`,
      );
    }
    if (prevSize !== before.completeSize) {
      if (typeof prevSize === "number" && prevSize > before.completeSize) {
        throw new Found({
          file: before.name,
          line: before.lines + 1,
          message:
            `the file was cut: it ends at byte ${before.completeSize} (line ${before.lines}), but ` +
            `${file} line 1 records that it ended at byte ${prevSize}: its last line(s) were removed`,
        });
      }
      throw new Found({
        file: before.name,
        line: before.lines,
        message:
          `the file has ${before.completeSize} bytes of complete lines, but ${file} line 1 ` +
          `records that it ended at byte ${prevSize}: lines were added after it was closed`,
      });
    }
    this.#tornAsRecorded(before, file, line.prev_torn);
  }

  /**
   * An earlier file's torn tail (bytes after its last sealed line) must be the one a crash left
   * there, which the next file's opening recorded (`prev_torn`, absent = 0): the writer never adds
   * to a file it has left.
   */
  #tornAsRecorded(before: PreviousFile, file: string, recorded: unknown): void {
    const expected = typeof recorded === "number" ? recorded : 0;
    if (before.torn === expected) return;
    throw new Found({
      file: before.name,
      line: before.lines + 1,
      message: before.torn > expected
        ? `the file ends with a partial line of ${before.torn} byte(s) (or lines no seal covers), ` +
          `but ${file} line 1 records ${expected} byte(s) after its last sealed line: bytes were ` +
          "added after it was closed"
        : `the file ends with ${before.torn} byte(s) after its last sealed line, but ${file} ` +
          `line 1 records ${expected}: the tail a crash left was cut or removed`,
    });
  }

  /**
   * A last line without its newline: torn by a crash, unless it is a whole line whose hash, seal
   * or MAC does not match. Never part of the chain (a new file continues from the last `\n`).
   */
  async #tornTail(
    file: string,
    lineNo: number,
    tail: Uint8Array,
    report: FileReport,
  ): Promise<void> {
    const parsed = parseLine(tail);
    const whole = typeof parsed !== "string" && parsed.line.seq === this.#seq + 1 &&
      parsed.line.prev === this.#value.toHex();
    if (whole) {
      const wrong = await this.#wholeLineProblem(parsed);
      if (wrong) {
        throw new Found({
          file,
          line: lineNo,
          message: `a complete line without its newline whose ${wrong} does not match: ` +
            "written without the audit key",
        });
      }
      report.notes.push(
        `line ${lineNo} is whole and valid but its newline is missing (torn write)`,
      );
      return;
    }
    report.notes.push(
      `torn final line ${lineNo}: ${tail.length} byte(s) without a newline (a write cut by a crash); ` +
        "not part of the chain, nothing before it is doubted",
    );
  }

  /** Which of a whole line's values is wrong ("hash", "seal", "MAC"), if any. */
  async #wholeLineProblem(p: ParsedLine): Promise<string | undefined> {
    const input = chainInput(this.#value, p.body);
    const mac = this.#opts.mac;
    if (p.version === 1) {
      return mac && !bytesEqual(await mac(input), p.value) ? "MAC" : undefined;
    }
    if (!bytesEqual(lineHash(input), p.value)) return "hash";
    if (p.seal && mac && !bytesEqual(await mac(sealInput(p.value)), p.seal)) return "seal";
    return undefined;
  }
}

/** Computes MACs of consecutive lines concurrently and reports the first mismatch in line order. */
class MacWindow {
  #mac: VerifyOptions["mac"];
  #size: number;
  #queue: { at: Problem; expected: Uint8Array; result: Promise<Uint8Array> }[] = [];

  constructor(mac: VerifyOptions["mac"], size: number) {
    this.#mac = mac;
    this.#size = Math.max(1, size);
  }

  /** Queues one MAC; `at` is the problem to report when it does not match. */
  check(input: Uint8Array, expected: Uint8Array, at: Problem): void {
    if (!this.#mac) return;
    const result = this.#mac(input);
    result.catch(() => {}); // awaited in order below
    this.#queue.push({ at, expected, result });
  }

  async settleIfFull(): Promise<void> {
    while (this.#queue.length >= this.#size) await this.#settleOne();
  }

  async drain(): Promise<void> {
    while (this.#queue.length > 0) await this.#settleOne();
  }

  async #settleOne(): Promise<void> {
    const { at, expected, result } = this.#queue.shift()!;
    const mac = await result;
    if (!bytesEqual(mac, expected)) {
      this.#queue = [];
      throw new Found(at);
    }
  }
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

async function* readChunks(path: string): AsyncGenerator<Uint8Array> {
  using file = await Deno.open(path, { read: true });
  for (;;) {
    const buf = new Uint8Array(CHUNK);
    const n = await file.read(buf);
    if (n === null) return;
    yield buf.subarray(0, n);
  }
}
