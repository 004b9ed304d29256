/**
 * The CA folder (`--ca-dir`, default /var/lib/svcd/ca), laid out as `openssl ca` expects so that
 * `openssl ca` and `openssl ocsp -index` work on the same files:
 *
 * - `ca.pem` — the CA certificate; `ca.json` — the token key label it was made over
 * - `index.txt` — the revocation database (openssl `ca` format); `index.txt.attr` — unique_subject = no
 * - `serial` — the next serial number in hex (openssl's format); `certs/SERIAL.pem` — every certificate issued
 * - `responder.pem` — the latest delegated OCSP responder certificate
 * - `crl.pem` — the latest CRL (`svcd ca crl`); `crlnumber` — the next cRLNumber in hex (openssl's)
 *
 * Every change is a whole-file atomic replacement (lib/ca/atomic.ts) made under an exclusive lock
 * on `.lock`, so two `svcd ca` commands cannot lose each other's lines.
 *
 * @example
 * ```ts
 * declare const expires: number, serial: string, subject: string;
 * const folder = await CaFolder.open("/var/lib/svcd/ca");
 * await folder.locked(async () => folder.appendIndex({ status: "V", expires, serial, subject }));
 * ```
 */
import { join } from "node:path";
import { pem } from "../der/mod.ts";
import {
  canonicalSerial,
  formatIndexLine,
  type IndexEntry,
  type IndexLineFields,
  parseIndex,
} from "../ocsp/mod.ts";
import { writeFileAtomic } from "./atomic.ts";
import { derFromPem } from "./csr.ts";
import { advanceCrlNumber } from "./crl_number.ts";
import { type CaUrls, checkUrl, MAX_CRL_PARTITIONS, UrlError } from "./urls.ts";

/** Default CA folder. */
export const DEFAULT_CA_DIR = "/var/lib/svcd/ca";

/** What `ca.json` records. */
export interface CaConfig {
  /** Label of the CA key on the token. */
  keyLabel: string;
  /** Where relying parties find revocation data; absent: certificates carry no AIA or CDP. */
  urls?: CaUrls;
}

/** A CA folder problem, with what to do about it. */
export class CaFolderError extends Error {
  override name = "CaFolderError";
}

const encoder = new TextEncoder();

/**
 * The serial `openssl ca` would print: upper-case hex, whole bytes.
 *
 * @example
 * ```ts
 * serialHex(0x1an); // "1A"
 * ```
 */
export function serialHex(serial: bigint): string {
  const hex = serial.toString(16).toUpperCase();
  return hex.length % 2 ? "0" + hex : hex;
}

/** An opened CA folder. */
export class CaFolder {
  private constructor(
    readonly dir: string,
    readonly config: CaConfig,
    readonly caDer: Uint8Array,
  ) {}

  /** Paths of the folder's files. Example: `CaFolder.paths(dir).index`. */
  static paths(dir: string) {
    return {
      caCert: join(dir, "ca.pem"),
      config: join(dir, "ca.json"),
      index: join(dir, "index.txt"),
      indexAttr: join(dir, "index.txt.attr"),
      serial: join(dir, "serial"),
      certs: join(dir, "certs"),
      responder: join(dir, "responder.pem"),
      crl: join(dir, "crl.pem"),
      crlNumber: join(dir, "crlnumber"),
      crlNumberLock: join(dir, ".crlnumber.lock"),
      lock: join(dir, ".lock"),
    };
  }

  /**
   * Makes a new CA folder around a CA certificate; refuses a folder that already holds a CA.
   *
   * @example
   * ```ts
   * declare const dir: string, caDer: Uint8Array;
   * await CaFolder.create(dir, { keyLabel: "ca" }, caDer, 0x4000n);
   * ```
   */
  static async create(
    dir: string,
    config: CaConfig,
    caDer: Uint8Array,
    firstSerial: bigint,
  ): Promise<CaFolder> {
    const p = CaFolder.paths(dir);
    await Deno.mkdir(p.certs, { recursive: true, mode: 0o755 });
    const folder = new CaFolder(dir, config, caDer);
    await folder.locked(async () => {
      // createNew: an existing CA is never overwritten, whatever else the folder holds.
      await Deno.writeFile(p.caCert, encoder.encode(pem("CERTIFICATE", caDer)), {
        createNew: true,
        mode: 0o644,
      }).catch((err) => {
        if (err instanceof Deno.errors.AlreadyExists) {
          throw new CaFolderError(
            `${dir} already holds a CA (${p.caCert}); choose another --ca-dir, or remove the ` +
              `folder if that CA is no longer used`,
          );
        }
        throw err;
      });
      await writeFileAtomic(p.config, encoder.encode(JSON.stringify(config, null, 2) + "\n"));
      await writeFileAtomic(p.index, new Uint8Array(0));
      await writeFileAtomic(p.indexAttr, encoder.encode("unique_subject = no\n"));
      await writeFileAtomic(p.serial, encoder.encode(serialHex(firstSerial) + "\n"));
    });
    return folder;
  }

  /**
   * Opens an existing CA folder.
   *
   * @example
   * ```ts
   * const folder = await CaFolder.open("/var/lib/svcd/ca");
   * ```
   */
  static async open(dir: string): Promise<CaFolder> {
    const p = CaFolder.paths(dir);
    let caPem: Uint8Array, configText: string;
    try {
      caPem = await Deno.readFile(p.caCert);
      configText = await Deno.readTextFile(p.config);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        throw new CaFolderError(
          `no CA in ${dir} (${(err as Error).message}); run 'svcd ca init' first, or pass ` +
            `--ca-dir with the folder 'svcd ca init' made`,
        );
      }
      throw err;
    }
    let config: CaConfig;
    try {
      config = JSON.parse(configText);
    } catch (err) {
      throw new CaFolderError(`${p.config} is not JSON (${(err as Error).message}); restore it`);
    }
    if (typeof config?.keyLabel !== "string" || config.keyLabel === "") {
      throw new CaFolderError(`${p.config} names no keyLabel; it is not a file svcd ca init wrote`);
    }
    checkRecordedUrls(config.urls, p.config);
    return new CaFolder(dir, config, derFromPem(caPem, "CERTIFICATE"));
  }

  /**
   * Records URLs in ca.json (call under `locked`), merged over those recorded. The CRL URL and the
   * partition count cannot change once recorded: certificates already issued name them in their
   * CRL Distribution Points. Returns the folder as it now is.
   *
   * @example
   * ```ts
   * declare const folder: CaFolder;
   * await folder.recordUrls({ ocsp: "http://pki.example.org/ocsp" });
   * ```
   */
  async recordUrls(given: CaUrls): Promise<CaFolder> {
    const now = (await CaFolder.open(this.dir)).config;
    const before = now.urls ?? {};
    const urls: CaUrls = { ...before };
    for (const [key, value] of Object.entries(given) as Array<[keyof CaUrls, unknown]>) {
      if (value !== undefined) (urls as Record<string, unknown>)[key] = value;
    }
    if (urls.crlPartitions !== undefined && !urls.crl) {
      throw new CaFolderError("--crl-partitions needs --crl-url (the folder URL of the CRLs)");
    }
    if (before.crl !== undefined) {
      const partitions = (u: CaUrls) => u.crlPartitions ?? 1;
      if (urls.crl !== before.crl || partitions(urls) !== partitions(before)) {
        throw new CaFolderError(
          `the CRL URL (${before.crl}, ${partitions(before)} partition(s)) is recorded already ` +
            `and cannot change: certificates issued since name it in their CRL Distribution ` +
            `Points; keep serving the CRLs there`,
        );
      }
    }
    checkRecordedUrls(urls, CaFolder.paths(this.dir).config);
    const config: CaConfig = { ...now, urls };
    await writeFileAtomic(
      CaFolder.paths(this.dir).config,
      encoder.encode(JSON.stringify(config, null, 2) + "\n"),
    );
    return new CaFolder(this.dir, config, this.caDer);
  }

  /** Runs `fn` holding the folder's exclusive lock. Example: `await folder.locked(() => …)`. */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    const file = await Deno.open(CaFolder.paths(this.dir).lock, {
      write: true,
      create: true,
      mode: 0o644,
    });
    try {
      await file.lock(true);
      return await fn();
    } finally {
      file.close();
    }
  }

  /** The index as text and parsed; an index that does not parse is an error naming its line. */
  async readIndex(): Promise<{ text: string; entries: IndexEntry[] }> {
    const path = CaFolder.paths(this.dir).index;
    const text = await Deno.readTextFile(path);
    try {
      return { text, entries: parseIndex(text) };
    } catch (err) {
      throw new CaFolderError(
        `${path}: ${(err as Error).message}; fix that line (svcd changes nothing in a file it ` +
          `cannot read)`,
      );
    }
  }

  /**
   * Takes the next serial from `serial` and advances it (call under `locked`).
   *
   * @example
   * ```ts
   * declare const folder: CaFolder;
   * const serial = await folder.takeSerial();
   * ```
   */
  async takeSerial(): Promise<bigint> {
    const path = CaFolder.paths(this.dir).serial;
    return await takeCounter(path, () => {
      throw new CaFolderError(
        `${path} is missing; it holds the next serial in hex (openssl's format): restore it, or ` +
          `write a value above every serial in index.txt`,
      );
    });
  }

  /**
   * Takes a cRLNumber of at least `atLeast` (lib/ca/crl_number.ts: the counter `crlnumber`, shared
   * with `openssl ca -gencrl` and the daemon, and the time).
   *
   * @example
   * ```ts
   * declare const folder: CaFolder;
   * const number = await folder.takeCrlNumber(BigInt(Date.now()));
   * ```
   */
  async takeCrlNumber(atLeast: bigint): Promise<bigint> {
    const p = CaFolder.paths(this.dir);
    return await advanceCrlNumber(p.crlNumber, p.crlNumberLock, atLeast);
  }

  /**
   * Lets group `gid` (the daemon's) advance the cRLNumber counter: `crlnumber` and its lock file
   * become 0664 with that group, so a daemon that may not write the CA folder still takes its
   * numbers from the one counter every node and `svcd ca` share (lib/ca/crl_number.ts).
   *
   * @example
   * ```ts
   * declare const folder: CaFolder;
   * await folder.shareCrlCounter(998);
   * ```
   */
  async shareCrlCounter(gid: number): Promise<void> {
    const p = CaFolder.paths(this.dir);
    if (!(await Deno.stat(p.crlNumber).then(() => true, () => false))) {
      await writeFileAtomic(p.crlNumber, encoder.encode("01\n"));
    }
    (await Deno.open(p.crlNumberLock, { write: true, create: true })).close();
    for (const path of [p.crlNumber, p.crlNumberLock]) {
      await Deno.chown(path, null, gid);
      await Deno.chmod(path, 0o664);
    }
  }

  /**
   * Appends one line to index.txt (call under `locked`); the rest of the file is kept byte for
   * byte. A serial already in the file is refused.
   *
   * @example
   * ```ts
   * declare const folder: CaFolder, expires: number;
   * await folder.appendIndex({ status: "V", expires, serial: "1A", subject: "/CN=alice" });
   * ```
   */
  async appendIndex(fields: IndexLineFields): Promise<void> {
    const { text, entries } = await this.readIndex();
    const serial = canonicalSerial(fields.serial);
    if (entries.some((e) => canonicalSerial(e.serial) === serial)) {
      throw new CaFolderError(`serial ${fields.serial} is already in the index`);
    }
    const next = text + formatIndexLine(fields);
    parseIndex(next);
    await writeFileAtomic(CaFolder.paths(this.dir).index, encoder.encode(next));
  }

  /**
   * Marks a certificate revoked (call under `locked`): its line becomes R with the time and
   * reason; every other line is kept byte for byte. Returns the entry as it was.
   *
   * @example
   * ```ts
   * declare const folder: CaFolder;
   * await folder.revoke("1A", Date.now(), 1); // keyCompromise
   * ```
   */
  async revoke(serialText: string, revokedAt: number, reason: number): Promise<IndexEntry> {
    const { text, entries } = await this.readIndex();
    const serial = canonicalSerial(serialText);
    const entry = entries.find((e) => canonicalSerial(e.serial) === serial);
    if (!entry) {
      throw new CaFolderError(
        `serial ${serialText} is not in ${CaFolder.paths(this.dir).index}; 'svcd ca list' shows ` +
          `the serials this CA issued`,
      );
    }
    if (entry.status === "R") {
      throw new CaFolderError(
        `serial ${entry.serial} is already revoked (${new Date(entry.revokedAt!).toISOString()})`,
      );
    }
    // The revocation field exactly as the index module writes it; the other fields stay as read.
    const revocation = formatIndexLine({ ...entry, status: "R", revokedAt, reason }).split("\t")[2];
    const lines = text.split("\n");
    const fields = lines[entry.line - 1].split("\t");
    fields[0] = "R";
    fields[2] = revocation;
    lines[entry.line - 1] = fields.join("\t");
    const next = lines.join("\n");
    parseIndex(next);
    await writeFileAtomic(CaFolder.paths(this.dir).index, encoder.encode(next));
    return entry;
  }

  /**
   * Stores an issued certificate as certs/SERIAL.pem and at each of `copies`; returns the first path.
   *
   * @example
   * ```ts
   * declare const folder: CaFolder, der: Uint8Array;
   * await folder.storeCertificate("1A", der, ["/etc/svcd/tls/alice.pem"]);
   * ```
   */
  async storeCertificate(serial: string, der: Uint8Array, copies: string[] = []): Promise<string> {
    const path = join(CaFolder.paths(this.dir).certs, `${serial}.pem`);
    const text = encoder.encode(pem("CERTIFICATE", der));
    for (const target of [path, ...copies]) await writeFileAtomic(target, text);
    return path;
  }
}

/** ca.json's urls, checked as `svcd ca urls` checks them; throws CaFolderError naming the file. */
function checkRecordedUrls(urls: unknown, path: string): void {
  if (urls === undefined) return;
  const fail = (why: string) => {
    throw new CaFolderError(`${path}: ${why}; record the URLs with 'svcd ca urls'`);
  };
  if (typeof urls !== "object" || urls === null) fail("urls is not an object");
  const u = urls as Record<string, unknown>;
  for (const key of ["ocsp", "crl", "caIssuers"]) {
    if (u[key] === undefined) continue;
    if (typeof u[key] !== "string") fail(`urls.${key} is not text`);
    try {
      if (checkUrl(u[key] as string, key) !== u[key]) fail(`urls.${key} ends with '/'`);
    } catch (err) {
      if (err instanceof UrlError) fail(err.message);
      throw err;
    }
  }
  const n = u.crlPartitions;
  if (
    n !== undefined &&
    (!Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > MAX_CRL_PARTITIONS)
  ) {
    fail(`urls.crlPartitions must be a whole number from 1 to ${MAX_CRL_PARTITIONS}`);
  }
}

/** Reads a positive hex counter file (openssl's serial/crlnumber format) and writes it + 1. */
async function takeCounter(path: string, missing: () => bigint): Promise<bigint> {
  let text: string | undefined;
  try {
    text = (await Deno.readTextFile(path)).trim();
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  let value: bigint;
  if (text === undefined) value = missing();
  else {
    if (!/^[0-9A-Fa-f]{1,40}$/.test(text)) {
      throw new CaFolderError(`${path} holds '${text}', not a number in hex`);
    }
    value = BigInt("0x" + text);
    if (value <= 0n) throw new CaFolderError(`${path}: the number must be positive`);
  }
  await writeFileAtomic(path, encoder.encode(serialHex(value + 1n) + "\n"));
  return value;
}
