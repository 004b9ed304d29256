/**
 * Checkpoints collected off the host (the syslog copies of ./syslog.ts, gathered by rsyslog or
 * journald into a file) held against the audit log: the log must contain each one. A log that ends
 * before a collected checkpoint (its newest file cut at a line boundary, or removed) or holds a
 * different line at its seq (rewritten) fails, naming that checkpoint — the two cases the log alone
 * cannot show, since a new file chains to whatever is left.
 *
 * A collected line is matched by its seq and its hash: the hash covers the line before it through
 * `prev`, so a log line with the same seq and hash is that checkpoint with the same log before it.
 *
 * @example
 * ```ts
 * const collected = parseCollectedCheckpoints(await Deno.readTextFile("/var/log/svcd-checkpoints.log"));
 * // verify each folder with lookup = wantedSeqs(collected), then:
 * // const problems = await judgeCheckpoints(collected, chains, publicKey);
 * ```
 */
import { bytesEqual } from "../bytes/mod.ts";
import { chainInput, checkpointMessage, lineHash } from "./format.ts";
import { parseLine } from "./verify.ts";

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

const MARK = '{"event":"checkpoint"';
const te = new TextEncoder();

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
    const bytes = te.encode(lines[i].slice(from).replace(/\r$/, ""));
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
    if (publicKey && !(await signatureHolds(c, publicKey))) {
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

async function signatureHolds(c: CollectedCheckpoint, publicKey: CryptoKey): Promise<boolean> {
  const parsed = parseLine(c.bytes);
  if (typeof parsed === "string") return false;
  const l = parsed.line;
  if (
    typeof l.through_size !== "number" || typeof l.through_hash !== "string" ||
    typeof l.sha256 !== "string" || typeof l.signature !== "string"
  ) return false;
  try {
    const message = checkpointMessage({
      file: c.file,
      seq: c.throughSeq,
      head: Uint8Array.fromHex(l.through_hash),
      size: l.through_size,
      sha256: Uint8Array.fromHex(l.sha256),
      version: 2,
    });
    return await crypto.subtle.verify(
      "Ed25519",
      publicKey,
      Uint8Array.fromBase64(l.signature) as BufferSource,
      message as BufferSource,
    );
  } catch {
    return false;
  }
}
