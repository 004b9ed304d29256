/**
 * `svcd audit verify`: checks the audit chain and prints one summary line per file; exit 0 only
 * when everything holds (a torn final line is reported, not failed, unless a later file shows it
 * was added after the file was closed), 1 at the first problem (its file, line and what is
 * wrong) or when the log could not be checked (credential, token, file), 2 for a usage mistake.
 *
 * @example
 * ```sh
 * CREDENTIALS_DIRECTORY=/run/creds svcd audit verify --audit-dir /var/log/svcd
 * svcd audit verify --public-key audit-sign.pem /var/log/svcd/audit.log.000007
 * svcd audit verify --audit-dir /srv/node1/audit --audit-dir /srv/node2/audit --checkpoints /var/log/svcd-checkpoints.log --public-key audit-sign.pem
 * ```
 */
import { type CommandGroup, headings } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { DEFAULT_AUDIT_DIR, sharedSpec } from "../cli/shared_options.ts";
import { cliOptions, OptionReader, optionTable } from "../cli/option_table.ts";
import { loadPin, Token } from "../token/mod.ts";
import { asUser } from "../token_admin/mod.ts";
import { auditFileNumber } from "./format.ts";
import { listAuditFiles } from "./files.ts";
import { AUDIT_MAC_LABEL, AUDIT_SIGN_LABEL } from "./token_keys.ts";
import { type FileReport, verifyAuditFiles, type VerifyResult } from "./verify.ts";
import {
  type ChainHashes,
  type CollectedCheckpoint,
  judgeCheckpoints,
  parseCollectedCheckpoints,
  wantedSeqs,
} from "./checkpoints.ts";

/** The headings of `svcd audit --help`. */
const AUDIT_HEADINGS = headings({ log: "what is checked", keys: "token and keys" });

/** The options of `svcd audit verify`, read through typed accessors. */
const AUDIT_OPTIONS = optionTable(AUDIT_HEADINGS, {
  "audit-dir": sharedSpec("audit-dir", {
    group: "log",
    multiple: true,
    note: "the oldest file must start the chain. Give it once per node to check several " +
      "nodes' folders in one run (each its own chain)",
  }),
  checkpoints: {
    kind: "path",
    value: "FILE",
    group: "log",
    help: "checkpoint lines collected off the host (the syslog copies, identifier " +
      "svcd-audit): each must be in one of the logs checked; a log that ends before one, or " +
      "holds another line at its seq, fails naming it. The file must hold only the " +
      "checkpoints of the folders given (filter by host)",
  },
  "public-key": {
    kind: "path",
    value: "FILE",
    group: "keys",
    help: `PEM public key of ${AUDIT_SIGN_LABEL} ('svcd token pubkey'): check the ` +
      "checkpoint signatures without the token (seals and MACs are then not checked; " +
      "hashes are)",
  },
  module: sharedSpec("module", { group: "keys" }),
  token: sharedSpec("token", { group: "keys", note: "with --public-key, use the token as well" }),
  credential: sharedSpec("credential", { group: "keys" }),
  user: sharedSpec("user", { group: "keys" }),
  "plain-credential-dir": {
    kind: "path",
    value: "DIR",
    group: "keys",
    help: "read the PIN from DIR/svc-pin instead (as 'svcd token init " +
      "--plain-credential-dir' wrote it; tests and demos)",
  },
});

/** `svcd audit`: its one command and the table of its options. */
export const AUDIT_COMMAND: CommandGroup = {
  name: "audit",
  summary: "check the audit log: its hash chain, seals, links between files and checkpoints",
  usage: ["svcd audit verify [--audit-dir DIR]… [FILE…] [options]"],
  commands: [
    {
      name: "verify",
      synopsis: "[--audit-dir DIR]… [FILE…] [--checkpoints FILE] [--public-key FILE]",
      summary: "check the audit log chain",
      description: "Checks every audit.log.NNNNNN in DIR, oldest first, or the FILEs given: seq " +
        "continuity, the hash chain and its seals (the MACs of logs from before the seals), " +
        "the links between files and the signed checkpoints. Prints one line per file; exit " +
        "0 when all holds (a torn tail from a crash is reported, not failed; in an earlier " +
        "file it must be the one the next file recorded), 1 at the first problem (file, line, " +
        "what is wrong) or when the log could not be checked (credential, token, unreadable " +
        "file), 2 for a usage mistake. FILE…: check these files only (the link into the first " +
        "one is not checked).",
    },
  ],
  options: cliOptions(AUDIT_OPTIONS),
  groups: AUDIT_HEADINGS,
};

/** A usage mistake: exit 2. */
class UsageError extends Error {}

/** The log could not be checked (a file, the token, the key): exit 1, without a verdict. */
class SetupError extends Error {}

/** The parsed options of `svcd audit verify`. */
type VerifyOptions = OptionReader<typeof AUDIT_OPTIONS>;

/**
 * Runs `svcd audit <args>`; returns the exit code.
 *
 * @example
 * ```ts
 * Deno.exit(await runAuditCommand(["verify", "--audit-dir", "/var/log/svcd"]));
 * ```
 */
export async function runAuditCommand(args: string[]): Promise<number> {
  // verify is the group's one command.
  const line = parseCommandLine(AUDIT_COMMAND, args, {
    allowPositionals: true,
    usageError: (message) => usageError(message),
  });
  if ("exit" in line) return line.exit;
  try {
    const options: VerifyOptions = new OptionReader(
      AUDIT_OPTIONS,
      line.values,
      (_flag, message) => new UsageError(message),
    );
    return await verifyCommand(options, line.positionals);
  } catch (err) {
    if (err instanceof UsageError) return usageError(err.message);
    // SetupError, CredentialError, an unreadable file: failed, as in every other command.
    console.error(`svcd audit verify: ${(err as Error).message}`);
    return EXIT.failed;
  }
}

async function verifyCommand(options: VerifyOptions, positionals: string[]): Promise<number> {
  if (options.isGiven("audit-dir") && positionals.length > 0) {
    throw new UsageError("give --audit-dir or FILEs, not both");
  }
  const chains = positionals.length > 0
    ? [await filesToCheck(DEFAULT_AUDIT_DIR, positionals)]
    : await Promise.all(options.get("audit-dir").map((d) => filesToCheck(d, [])));
  const checkpoints = options.get("checkpoints");
  const collected = checkpoints ? await readCollected(checkpoints) : undefined;
  const keyFile = options.get("public-key");
  const publicKey = keyFile ? await readPublicKey(keyFile) : undefined;
  const useToken = !keyFile || options.isGiven("token") || options.isGiven("module");
  // The PIN first: decrypting the credential needs root, the token work is done as --user.
  const credential = options.get("credential");
  const pin = useToken
    ? await loadPin(
      credential ? { encryptedFile: credential } : { dir: options.get("plain-credential-dir") },
    )
    : undefined;
  return await asUser(
    options.get("user"),
    () => verifyWith(options, chains, collected, publicKey, pin),
  )
    .finally(() => pin?.fill(0));
}

/** One chain to check: a node's folder, or the FILEs given. */
interface Chain {
  name: string;
  files: string[];
  fromStart: boolean;
}

async function readCollected(path: string): Promise<CollectedCheckpoint[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new SetupError(`--checkpoints ${path} cannot be read: ${(err as Error).message}`);
  }
  try {
    return parseCollectedCheckpoints(text);
  } catch (err) {
    throw new SetupError(`--checkpoints ${path}: ${(err as Error).message}`);
  }
}

async function verifyWith(
  options: VerifyOptions,
  chains: Chain[],
  collected: CollectedCheckpoint[] | undefined,
  publicKey: CryptoKey | undefined,
  pin: Uint8Array | undefined,
): Promise<number> {
  let token: Token | undefined;
  try {
    const keyFile = options.get("public-key");
    let keyNote = keyFile ? `checkpoint signatures checked with ${keyFile}` : "";
    if (pin) {
      token = await loggedInToken(options, pin);
      if (!publicKey) {
        publicKey = await tokenPublicKey(token);
        keyNote = publicKey
          ? `checkpoint signatures checked with the token's ${AUDIT_SIGN_LABEL}`
          : `checkpoint signatures NOT checked: the token has no public key ${AUDIT_SIGN_LABEL}`;
      }
    }
    const t = token;
    const macNote = t
      ? "seals and MACs checked with the token"
      : "seals and MACs NOT checked (no token: hashes and checkpoints only)";
    const lookup = collected ? wantedSeqs(collected) : undefined;
    let ok = true;
    const held: ChainHashes[] = [];
    for (const chain of chains) {
      if (chains.length > 1) console.log(`${chain.name}:`);
      const result = await verifyAuditFiles({
        files: chain.files,
        fromStart: chain.fromStart,
        publicKey,
        lookup,
        mac: t ? (data) => t.mac(AUDIT_MAC_LABEL, data) : undefined,
      });
      printResult(result, `${macNote}; ${keyNote}`);
      ok &&= result.ok;
      held.push({ name: chain.name, hashes: result.hashes, lastSeq: result.lastSeq });
    }
    if (collected) {
      ok = printWitnesses(await judgeCheckpoints(collected, held, publicKey), collected.length) &&
        ok;
    }
    return ok ? EXIT.ok : EXIT.failed;
  } finally {
    token?.close();
  }
}

/** Prints the collected checkpoints' outcome; true when every one is in the log. */
function printWitnesses(problems: string[], count: number): boolean {
  for (const p of problems) console.log(`FAILED: ${p}`);
  if (problems.length === 0) {
    console.log(`checkpoints: all ${count} collected checkpoint(s) are in the log`);
  }
  return problems.length === 0;
}

async function filesToCheck(dir: string, positionals: string[]): Promise<Chain> {
  if (positionals.length > 0) {
    const numbered = positionals.every((p) => auditFileNumber(basename(p)) !== undefined);
    const files = numbered
      ? [...positionals].sort((a, b) =>
        auditFileNumber(basename(a))! - auditFileNumber(basename(b))!
      )
      : positionals;
    return { name: "FILEs", files, fromStart: false };
  }
  let names: string[];
  try {
    names = await listAuditFiles(dir);
  } catch (err) {
    throw new SetupError(`audit directory ${dir} cannot be read: ${(err as Error).message}`);
  }
  if (names.length === 0) {
    throw new SetupError(`no audit.log.NNNNNN files in ${dir}: check --audit-dir`);
  }
  return { name: dir, files: names.map((n) => `${dir}/${n}`), fromStart: true };
}

async function loggedInToken(options: VerifyOptions, pin: Uint8Array): Promise<Token> {
  let token: Token;
  try {
    token = Token.open({
      modulePath: options.get("module"),
      tokenLabel: options.get("token"),
      maxSessions: 8,
    });
  } catch (err) {
    pin.fill(0);
    throw new SetupError(`the token cannot be opened: ${(err as Error).message}`);
  }
  try {
    await token.login(pin); // zeroizes the PIN
  } catch (err) {
    token.close();
    throw new SetupError(`login failed (not retried): ${(err as Error).message}`);
  }
  return token;
}

async function tokenPublicKey(token: Token): Promise<CryptoKey | undefined> {
  const key = await token.publicKey(AUDIT_SIGN_LABEL);
  if (!key?.publicKeySpki) return undefined;
  return await importEd25519(key.publicKeySpki, `the token's ${AUDIT_SIGN_LABEL}`);
}

async function readPublicKey(path: string): Promise<CryptoKey> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new SetupError(`--public-key ${path} cannot be read: ${(err as Error).message}`);
  }
  const m = /-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----/.exec(text);
  if (!m) {
    throw new SetupError(
      `--public-key ${path} is not a PEM PUBLIC KEY (make it with 'svcd token pubkey')`,
    );
  }
  let der: Uint8Array;
  try {
    der = Uint8Array.fromBase64(m[1].replace(/\s+/g, ""));
  } catch {
    throw new SetupError(`--public-key ${path}: the PEM body is not base64`);
  }
  return await importEd25519(der, `--public-key ${path}`);
}

async function importEd25519(spki: Uint8Array, what: string): Promise<CryptoKey> {
  try {
    return await crypto.subtle.importKey("spki", spki as BufferSource, { name: "Ed25519" }, false, [
      "verify",
    ]);
  } catch (err) {
    throw new SetupError(`${what} is not an Ed25519 public key: ${(err as Error).message}`);
  }
}

function printResult(result: VerifyResult, keys: string): void {
  for (const r of result.files) console.log(fileLine(r));
  if (result.ok) {
    const last = result.files.findLast((r) => r.lastSeq !== undefined);
    console.log(
      `verified: ${result.files.length} file(s) through seq ${last?.lastSeq ?? 0}; ${keys}`,
    );
    return;
  }
  const p = result.problem!;
  const where = p.line > 0 ? `${p.file} line ${p.line}` : p.file;
  console.log(`FAILED: ${where}: ${p.message}`);
}

function fileLine(r: FileReport): string {
  if (r.status === "not checked") return `${r.file}: not checked (after the first problem)`;
  if (r.status === "failed") return `${r.file}: FAILED`;
  const seqs = r.lastSeq === undefined ? "" : `, seq ${r.firstSeq}–${r.lastSeq}`;
  const signed = r.checkpoints > 0 ? ` (through seq ${r.signedThrough})` : "";
  const notes = r.notes.length > 0 ? `; ${r.notes.join("; ")}` : "";
  return `${r.file}: ok, ${r.lines} line(s)${seqs}, ${r.checkpoints} checkpoint(s)${signed}${notes}`;
}

/** A usage mistake: the message, then where the help is; exit 2. */
function usageError(message: string): number {
  console.error(`svcd audit: ${message}\nsee 'svcd audit --help'`);
  return EXIT.usage;
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
