/**
 * The audit verifier: walks files in chain order and checks, line by line, seq continuity, the
 * `prev` links, the MACs (when given the MAC key), the links between files, and every checkpoint
 * (its claim against the file's bytes and, given the public key, its Ed25519 signature). It stops at
 * the first problem and names its file and line. A partial last line (a write cut by a crash) is a
 * torn tail: reported, not part of the chain, and nothing before it is doubted. In a file that a
 * later file continues, the torn tail must be exactly the one the later file's opening line recorded
 * (`prev_torn`): any other partial line there was added after the file was closed, which is
 * tampering.
 *
 * @example
 * ```ts
 * const result = await verifyAuditFiles({ files: ["/var/log/svcd/audit.log.000001"], mac, fromStart: true });
 * if (!result.ok) console.error(result.problem);
 * ```
 */
import { createHash, type Hash } from "node:crypto";
import { bytesEqual, concat } from "../bytes/mod.ts";
import {
  auditFileNumber,
  checkpointMessage,
  MAC_BYTES,
  macInput,
  OPENING_EVENTS,
  splitMac,
  ZERO_MAC,
} from "./format.ts";

/** What to verify and with which keys. */
export interface VerifyOptions {
  /** Paths of audit files, in chain order. */
  files: string[];
  /** The audit MAC (HMAC-SHA256 with `svc-audit`); without it MACs are not checked. */
  mac?: (data: Uint8Array) => Promise<Uint8Array>;
  /** The checkpoint public key (Ed25519); without it checkpoint signatures are not checked. */
  publicKey?: CryptoKey;
  /** The first file must be the start of the chain (true for a whole directory). */
  fromStart: boolean;
  /** MACs computed at once (default 64). */
  window?: number;
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
  /** A torn final line, when there is one: not part of the chain. */
  torn?: { file: string; line: number; bytes: number };
}

interface Line {
  event: string;
  actor: string;
  seq: number;
  time: string;
  prev: string;
  mac: string;
  [member: string]: unknown;
}

/** Raised inside the walk to stop at the first problem. */
class Found extends Error {
  constructor(readonly problem: Problem) {
    super(problem.message);
  }
}

const CHUNK = 1 << 20;
const MAX_UNHASHED = 64 << 20;

/**
 * Verifies `opts.files` (see the module comment); never throws for a bad log, only for unreadable
 * files.
 *
 * @example
 * ```ts
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
      return { ok: false, files: reports, problem: err.problem, torn };
    }
  }
  if (opts.files.length === 0) {
    return {
      ok: false,
      files: reports,
      problem: { file: "", line: 0, message: "no audit files to verify" },
    };
  }
  return { ok: true, files: reports, torn };
}

/** What the next file's opening line must agree with about the file before it. */
interface PreviousFile {
  name: string;
  /** Bytes through the last `\n`. */
  completeSize: number;
  lines: number;
  /** Bytes after the last `\n`. */
  torn: number;
}

/** The state carried from line to line and file to file. */
class ChainWalk {
  #opts: VerifyOptions;
  #seq = 0;
  #mac: Uint8Array = ZERO_MAC;
  #previous: PreviousFile | undefined;
  #macs: MacWindow;
  /** Seqs of this file's lines (checkpoints aside) that no checkpoint covers yet. */
  #unsigned: number[] = [];

  constructor(opts: VerifyOptions) {
    this.#opts = opts;
    this.#macs = new MacWindow(opts.mac, opts.window ?? 64);
  }

  /** Checks one file; returns its torn tail, if any. */
  async file(path: string, report: FileReport, newest: boolean): Promise<VerifyResult["torn"]> {
    const name = basename(path);
    const hashes = new CheckpointHashes();
    this.#unsigned = [];
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
    this.#linkCheckedBy(name, offset, lineNo, tail.length);
    if (this.#unsigned.length > 0) {
      const n = this.#unsigned.length;
      report.notes.push(`${n} line(s) after the last checkpoint are covered by the MAC chain only`);
    }
    if (tail.length === 0) return undefined;
    await this.#tornTail(name, lineNo + 1, tail, report);
    return { file: name, line: lineNo + 1, bytes: tail.length };
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
    const { line, body, mac } = parsed;
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
    if (line.prev !== this.#mac.toHex()) {
      await fail(
        `its prev does not match the MAC of the line before it: the chain was broken here`,
      );
    }
    this.#macs.check(macInput(this.#mac, body), mac, { file, line: lineNo });
    this.#seq = line.seq;
    this.#mac = mac;
    report.firstSeq ??= line.seq;
    report.lastSeq = line.seq;
    hashes.add(line.seq, line.mac, end, bytes);
    if (line.event === "checkpoint") {
      const why = await this.#checkpoint(file, line, hashes);
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
  async #opening(file: string, line: Line, fail: (m: string) => Promise<never>): Promise<void> {
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
      this.#mac = Uint8Array.fromHex(line.prev);
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
   * An earlier file's partial last line must be the one a crash left there, which the next file's
   * opening recorded (`prev_torn`, absent = 0): the writer never adds to a file it has left.
   */
  #tornAsRecorded(before: PreviousFile, file: string, recorded: unknown): void {
    const expected = typeof recorded === "number" ? recorded : 0;
    if (before.torn === expected) return;
    throw new Found({
      file: before.name,
      line: before.lines + 1,
      message: before.torn > expected
        ? `the file ends with a partial line of ${before.torn} byte(s), but ${file} line 1 ` +
          `records ${expected} byte(s) after its last complete line: bytes were added after it was closed`
        : `the file ends with ${before.torn} byte(s) after its last complete line, but ${file} ` +
          `line 1 records ${expected}: the partial line a crash left was cut or removed`,
    });
  }

  /** Checks a checkpoint's claim against the file; returns what is wrong, if anything. */
  async #checkpoint(
    file: string,
    line: Line,
    hashes: CheckpointHashes,
  ): Promise<string | undefined> {
    const { through_seq: seq, through_mac: mac, through_size: size, sha256, signature } = line;
    if (line.file !== file) {
      return `the checkpoint names ${JSON.stringify(line.file)}, not this file`;
    }
    if (
      typeof seq !== "number" || typeof size !== "number" || !isHex(mac, MAC_BYTES) ||
      !isHex(sha256, 32) ||
      typeof signature !== "string"
    ) {
      return "the checkpoint lacks through_seq, through_mac, through_size, sha256 or signature";
    }
    const covered = hashes.through(size);
    if (typeof covered === "string") return covered;
    if (covered.seq !== seq || covered.mac !== mac) {
      return `the checkpoint claims seq ${seq} with MAC ${mac}, but the line ending at byte ${size} ` +
        `is seq ${covered.seq} with MAC ${covered.mac}`;
    }
    if (covered.sha256 !== sha256) {
      return `the file's first ${size} bytes do not have the SHA-256 the checkpoint claims`;
    }
    if (!this.#opts.publicKey) return undefined;
    let sig: Uint8Array;
    try {
      sig = Uint8Array.fromBase64(signature);
    } catch {
      return "the checkpoint signature is not base64";
    }
    const message = checkpointMessage({
      file,
      seq,
      mac: Uint8Array.fromHex(mac as string),
      size,
      sha256: Uint8Array.fromHex(sha256 as string),
    });
    const ok = await crypto.subtle.verify(
      "Ed25519",
      this.#opts.publicKey,
      sig as BufferSource,
      message as BufferSource,
    );
    return ok ? undefined : "the checkpoint signature does not verify with the public key";
  }

  /** A last line without its newline: torn by a crash, unless it is a whole line with a bad MAC. */
  async #tornTail(
    file: string,
    lineNo: number,
    tail: Uint8Array,
    report: FileReport,
  ): Promise<void> {
    const parsed = parseLine(tail);
    const whole = typeof parsed !== "string" && parsed.line.seq === this.#seq + 1 &&
      parsed.line.prev === this.#mac.toHex();
    if (whole && this.#opts.mac) {
      const mac = await this.#opts.mac(macInput(this.#mac, parsed.body));
      if (!bytesEqual(mac, parsed.mac)) {
        throw new Found({
          file,
          line: lineNo,
          message:
            "a complete line without its newline whose MAC does not match: written without the audit key",
        });
      }
      report.notes.push(
        `line ${lineNo} is whole and its MAC is valid but its newline is missing (torn write)`,
      );
      return;
    }
    report.notes.push(
      `torn final line ${lineNo}: ${tail.length} byte(s) without a newline (a write cut by a crash); ` +
        "not part of the chain, nothing before it is doubted",
    );
  }
}

/** Computes MACs of consecutive lines concurrently and reports the first mismatch in line order. */
class MacWindow {
  #mac: VerifyOptions["mac"];
  #size: number;
  #queue: { at: Omit<Problem, "message">; expected: Uint8Array; result: Promise<Uint8Array> }[] =
    [];

  constructor(mac: VerifyOptions["mac"], size: number) {
    this.#mac = mac;
    this.#size = Math.max(1, size);
  }

  check(input: Uint8Array, expected: Uint8Array, at: Omit<Problem, "message">): void {
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
      throw new Found({
        ...at,
        message: "its MAC does not match: the line was edited, or written without the audit key",
      });
    }
  }
}

/** Hashes a file's lines lazily, so a checkpoint can be checked against the bytes up to any earlier line. */
class CheckpointHashes {
  #hash: Hash = createHash("sha256");
  #hashedTo = 0;
  #last: { seq: number; mac: string } | undefined;
  #pending: { seq: number; mac: string; end: number; bytes: Uint8Array }[] = [];
  #pendingBytes = 0;

  add(seq: number, mac: string, end: number, bytes: Uint8Array): void {
    this.#pending.push({ seq, mac, end, bytes: bytes.slice() });
    this.#pendingBytes += bytes.length + 1;
    while (this.#pendingBytes > MAX_UNHASHED && this.#pending.length > 1) this.#feed();
  }

  /** The line ending at byte `size` and the SHA-256 of the bytes before; or what is wrong. */
  through(size: number): { seq: number; mac: string; sha256: string } | string {
    if (size < this.#hashedTo) {
      return `the checkpoint covers byte ${size}, which this verifier has already passed`;
    }
    while (this.#pending.length > 0 && this.#pending[0].end <= size) this.#feed();
    if (this.#hashedTo !== size || !this.#last) {
      return `the checkpoint's through_size ${size} is not the end of a line`;
    }
    return { ...this.#last, sha256: (this.#hash.copy().digest() as Uint8Array).toHex() };
  }

  #feed(): void {
    const line = this.#pending.shift()!;
    this.#hash.update(line.bytes);
    this.#hash.update(NEWLINE);
    this.#hashedTo = line.end;
    this.#pendingBytes -= line.bytes.length + 1;
    this.#last = { seq: line.seq, mac: line.mac };
  }
}

const NEWLINE = new Uint8Array([0x0a]);
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Parses one line (without `\n`) into its members, the body its MAC covers and the MAC, or says
 * what is wrong with it.
 *
 * @example
 * ```ts
 * const p = parseLine(bytes); // string = the reason it is not an audit line
 * ```
 */
export function parseLine(
  bytes: Uint8Array,
): { line: Line; body: Uint8Array; mac: Uint8Array } | string {
  const parts = splitMac(bytes);
  if (!parts) return "not an audit line: it does not end with its MAC";
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch (err) {
    return `not an audit line: ${(err as Error).message}`;
  }
  const line = value as Line;
  if (typeof line !== "object" || line === null || Array.isArray(line)) {
    return "not an audit line: not a JSON object";
  }
  if (typeof line.event !== "string" || typeof line.actor !== "string" || line.actor === "") {
    return "not an audit line: event or actor is missing";
  }
  if (!Number.isSafeInteger(line.seq) || line.seq < 1) {
    return "not an audit line: seq is not a positive integer";
  }
  if (typeof line.time !== "string" || !isHex(line.prev, MAC_BYTES)) {
    return "not an audit line: time or prev is missing";
  }
  if (line.mac !== parts.mac.toHex()) {
    return "not an audit line: its mac member is not the MAC at its end";
  }
  return { line, body: parts.body, mac: parts.mac };
}

function isHex(x: unknown, bytes: number): x is string {
  return typeof x === "string" && x.length === 2 * bytes && /^[0-9a-f]+$/.test(x);
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
