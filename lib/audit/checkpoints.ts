/**
 * Checkpoints: the message one signs, and every check of one. A checkpoint line claims a chain head
 * in its file and the SHA-256 of the file's bytes up to it, signed with the Ed25519 checkpoint key.
 * The verifier (./verify.ts) holds each claim against the file's bytes and, given the public key,
 * checks its signature.
 *
 * Copies of the checkpoint lines collected off the host (the syslog copies of ./syslog.ts, gathered
 * by rsyslog or journald into a file) are held against the log as well: the log must contain each
 * one. A log that ends before a collected checkpoint (its newest file cut at a line boundary, or
 * removed) or holds a different line at its seq (rewritten) fails, naming that checkpoint — the two
 * cases the log alone cannot show, since a new file chains to whatever is left. A collected line is
 * matched by its seq and its hash: the hash covers the line before it through `prev`, so a log line
 * with the same seq and hash is that checkpoint with the same log before it.
 *
 * @example
 * ```ts
 * const collected = parseCollectedCheckpoints(await Deno.readTextFile("/var/log/svcd-checkpoints.log"));
 * // verify each folder with lookup = wantedSeqs(collected), then:
 * // const problems = await judgeCheckpoints(collected, chains, publicKey);
 * ```
 */
import { createHash, type Hash } from "node:crypto";
import { bytesEqual } from "../bytes/mod.ts";
import { type AuditLine, chainInput, isHex, lineHash, MAC_BYTES, parseLine } from "./format.ts";

const NEWLINE = new Uint8Array([0x0a]);
/** Bytes of lines a file's running hash may lag behind (a checkpoint can look back that far). */
const MAX_UNHASHED = 64 << 20;
const MARK = '{"event":"checkpoint"';
const utf8 = new TextEncoder();

/** What a checkpoint signs: a chain head in one file, and the SHA-256 of the file up to it. */
export interface CheckpointClaim {
  file: string;
  seq: number;
  /** The chain value of line `seq`: its hash (v2) or its MAC (v1). */
  head: Uint8Array;
  size: number;
  sha256: Uint8Array;
  /** 2 for every checkpoint written now (`through_hash`); 1 for older logs (`through_mac`). */
  version: 1 | 2;
}

/**
 * The exact bytes an Ed25519 checkpoint signature covers (ASCII, one line, no newline).
 *
 * @example
 * ```ts
 * declare const head: Uint8Array, sha256: Uint8Array;
 * checkpointMessage({ file: "audit.log.000001", seq: 1000, head, size: 301234, sha256, version: 2 });
 * // "svcd-audit-checkpoint-v2 file=audit.log.000001 seq=1000 hash=… size=301234 sha256=…"
 * ```
 */
export function checkpointMessage(c: CheckpointClaim): Uint8Array {
  const head = c.version === 1 ? `mac=${c.head.toHex()}` : `hash=${c.head.toHex()}`;
  return utf8.encode(
    `svcd-audit-checkpoint-v${c.version} file=${c.file} seq=${c.seq} ${head} size=${c.size} ` +
      `sha256=${c.sha256.toHex()}`,
  );
}

// ---- a checkpoint in the log -------------------------------------------------------------

/**
 * What is wrong with a checkpoint line of `file` (undefined: nothing): its claim against the file's
 * bytes (`hashes`, fed every line before it) and, given `publicKey`, its signature.
 *
 * @example
 * ```ts
 * import type { AuditLine } from "./format.ts";
 * declare const line: AuditLine, hashes: CheckpointHashes;
 * const why = await checkpointProblem("audit.log.000001", line, hashes);
 * ```
 */
export async function checkpointProblem(
  file: string,
  line: AuditLine,
  hashes: CheckpointHashes,
  publicKey?: CryptoKey,
): Promise<string | undefined> {
  const { through_seq: seq, through_size: size, sha256, signature } = line;
  const version = line.through_mac !== undefined ? 1 : 2;
  const head = version === 1 ? line.through_mac : line.through_hash;
  const headName = version === 1 ? "through_mac" : "through_hash";
  if (line.file !== file) {
    return `the checkpoint names ${JSON.stringify(line.file)}, not this file`;
  }
  if (
    typeof seq !== "number" || typeof size !== "number" || !isHex(head, MAC_BYTES) ||
    !isHex(sha256, 32) ||
    typeof signature !== "string"
  ) {
    return `the checkpoint lacks through_seq, ${headName}, through_size, sha256 or signature`;
  }
  const covered = hashes.through(size);
  if (typeof covered === "string") return covered;
  if (covered.seq !== seq || covered.value !== head) {
    return `the checkpoint claims seq ${seq} with ${headName} ${head}, but the line ending at ` +
      `byte ${size} is seq ${covered.seq} with ${covered.value}`;
  }
  if (covered.sha256 !== sha256) {
    return `the file's first ${size} bytes do not have the SHA-256 the checkpoint claims`;
  }
  if (!publicKey) return undefined;
  let sig: Uint8Array;
  try {
    sig = Uint8Array.fromBase64(signature);
  } catch {
    return "the checkpoint signature is not base64";
  }
  const claim = {
    file,
    seq,
    head: Uint8Array.fromHex(head),
    size,
    sha256: Uint8Array.fromHex(sha256),
    version,
  } as const;
  return await signatureHolds(claim, sig, publicKey)
    ? undefined
    : "the checkpoint signature does not verify with the public key";
}

/**
 * Hashes a file's lines lazily, so a checkpoint can be checked against the bytes up to any earlier
 * line.
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * const hashes = new CheckpointHashes();
 * hashes.add(1, "ab…", bytes.length + 1, bytes); // each line as it is read
 * ```
 */
export class CheckpointHashes {
  #hash: Hash = createHash("sha256");
  #hashedTo = 0;
  #last: { seq: number; value: string } | undefined;
  #pending: { seq: number; value: string; end: number; bytes: Uint8Array }[] = [];
  #pendingBytes = 0;

  /** One more line: its seq, chain value (hex), the offset just after its `\n`, its bytes. */
  add(seq: number, value: string, end: number, bytes: Uint8Array): void {
    this.#pending.push({ seq, value, end, bytes: bytes.slice() });
    this.#pendingBytes += bytes.length + 1;
    while (this.#pendingBytes > MAX_UNHASHED && this.#pending.length > 1) this.#feed();
  }

  /** The line ending at byte `size` and the SHA-256 of the bytes before; or what is wrong. */
  through(size: number): { seq: number; value: string; sha256: string } | string {
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
    this.#last = { seq: line.seq, value: line.value };
  }
}

// ---- checkpoints collected elsewhere ---------------------------------------------------

/** One checkpoint line found in the collected file. */
export interface CollectedCheckpoint {
  /** 1-based line number in the collected file. */
  at: number;
  /** The audit file the checkpoint was written in, and what it claims. */
  file: string;
  seq: number;
  hash: string;
  throughSeq: number;
  /** The exact audit line (for the signature check). */
  bytes: Uint8Array;
}

/** What a chain (one node's folder) holds at the seqs asked about. */
export interface ChainHashes {
  /** The folder, as the operator named it. */
  name: string;
  /** seq → hash (hex) of the lines the chain holds among those asked about. */
  hashes: Map<number, string>;
  /** Seq of the chain's last line. */
  lastSeq: number;
}

/**
 * The checkpoint lines in a collected file (each line: any syslog prefix, then the audit line);
 * other lines are ignored. A line that starts like a checkpoint but is not a well-formed audit
 * line (its hash does not match its own bytes) is an error naming its line number.
 *
 * @example
 * ```ts
 * parseCollectedCheckpoints('Jan  2 03:04:05 host svcd-audit[7]: {"event":"checkpoint",…}\n');
 * ```
 */
export function parseCollectedCheckpoints(text: string): CollectedCheckpoint[] {
  const out: CollectedCheckpoint[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const from = lines[i].indexOf(MARK);
    if (from < 0) continue;
    const bytes = utf8.encode(lines[i].slice(from).replace(/\r$/, ""));
    const parsed = parseLine(bytes);
    const where = `collected checkpoint at line ${i + 1}`;
    if (typeof parsed === "string") throw new Error(`${where}: ${parsed}`);
    const { line, body, value, version } = parsed;
    if (version !== 2) throw new Error(`${where}: not a hash-chained (v2) line`);
    if (!bytesEqual(lineHash(chainInput(Uint8Array.fromHex(line.prev), body)), value)) {
      throw new Error(`${where}: its hash does not match its bytes`);
    }
    if (typeof line.file !== "string" || typeof line.through_seq !== "number") {
      throw new Error(`${where}: it lacks file or through_seq`);
    }
    out.push({
      at: i + 1,
      file: line.file,
      seq: line.seq,
      hash: value.toHex(),
      throughSeq: line.through_seq,
      bytes,
    });
  }
  return out;
}

/**
 * The seqs to look up in each chain.
 *
 * @example
 * ```ts
 * wantedSeqs([]); // Set(0) {}
 * ```
 */
export function wantedSeqs(collected: CollectedCheckpoint[]): Set<number> {
  return new Set(collected.map((c) => c.seq));
}

/**
 * Each collected checkpoint must be in one of the chains (same seq, same hash) and, given the
 * public key, carry a valid signature; returns one message per checkpoint that fails (empty: all
 * hold).
 *
 * @example
 * ```ts
 * declare const collected: CollectedCheckpoint[], chains: ChainHashes[];
 * for (const p of await judgeCheckpoints(collected, chains)) console.log(`FAILED: ${p}`);
 * ```
 */
export async function judgeCheckpoints(
  collected: CollectedCheckpoint[],
  chains: ChainHashes[],
  publicKey?: CryptoKey,
): Promise<string[]> {
  const problems: string[] = [];
  for (const c of collected) {
    const name = `checkpoint seq ${c.seq} (${c.file}, through seq ${c.throughSeq}; ` +
      `collected line ${c.at})`;
    if (publicKey && !(await collectedSignatureHolds(c, publicKey))) {
      problems.push(`${name}: its signature does not verify with the public key (not ours)`);
      continue;
    }
    if (chains.some((chain) => chain.hashes.get(c.seq) === c.hash)) continue;
    const why = chains.map((chain) => {
      const held = chain.hashes.get(c.seq);
      if (held !== undefined) {
        return `${chain.name} holds a different line at seq ${c.seq}: the log disagrees with it`;
      }
      return `${chain.name} ends at seq ${chain.lastSeq}, before it: the log was cut or its ` +
        "newest file removed";
    });
    problems.push(`${name}: not in the log; ${why.join("; ")}`);
  }
  return problems;
}

/** A collected copy's signature, from the members of its line (false when any is missing). */
async function collectedSignatureHolds(
  c: CollectedCheckpoint,
  publicKey: CryptoKey,
): Promise<boolean> {
  const parsed = parseLine(c.bytes);
  if (typeof parsed === "string") return false;
  const l = parsed.line;
  if (
    typeof l.through_size !== "number" || typeof l.through_hash !== "string" ||
    typeof l.sha256 !== "string" || typeof l.signature !== "string"
  ) return false;
  try {
    const claim = {
      file: c.file,
      seq: c.throughSeq,
      head: Uint8Array.fromHex(l.through_hash),
      size: l.through_size,
      sha256: Uint8Array.fromHex(l.sha256),
      version: 2,
    } as const;
    return await signatureHolds(claim, Uint8Array.fromBase64(l.signature), publicKey);
  } catch {
    return false;
  }
}

/** Whether `signature` is the checkpoint key's Ed25519 signature of the claim's message. */
function signatureHolds(
  claim: CheckpointClaim,
  signature: Uint8Array,
  publicKey: CryptoKey,
): Promise<boolean> {
  return crypto.subtle.verify(
    "Ed25519",
    publicKey,
    signature as BufferSource,
    checkpointMessage(claim) as BufferSource,
  );
}
