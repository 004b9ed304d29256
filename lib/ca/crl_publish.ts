/**
 * The CRL files of a CA, signed and written into a folder a web server can serve as it is:
 * `full.crl` (every revoked certificate, DER), `full.pem` (the same as PEM, for nginx's `ssl_crl`)
 * and, with partitions, `K.crl` for each. `svcd ca publish DIR` writes them once; the daemon's
 * {@link CrlKeeper} keeps them current: it re-signs a CRL when the entries of its scope change in
 * the revocation database, and every CRL once half its validity has passed, so none is ever served
 * past its nextUpdate while the daemon runs. Every file is replaced atomically (lib/ca/atomic.ts):
 * a reader sees the old CRL or the new one.
 *
 * @example
 * ```ts
 * import type { Signer } from "../ocsp/mod.ts";
 * import type { IndexFileSource } from "../ocsp/mod.ts";
 * import type { CrlIssuer } from "./crl.ts";
 * declare const source: IndexFileSource, issuer: CrlIssuer, signer: Signer;
 * const keeper = new CrlKeeper({ source, issuer, partitions: 16, signer, validitySeconds: 604800,
 *   dir: "/var/lib/svcd/crl", takeNumber: async (n) => n, log: console.error });
 * keeper.start();
 * ```
 */
import { pem } from "../der/mod.ts";
import type { IndexFileSource, Signer } from "../ocsp/mod.ts";
import { writeFileAtomic } from "./atomic.ts";
import { type CrlIssuer, type CrlScope, type CrlTimes, RevokedSet, signCrl } from "./crl.ts";
import { crlFileName, FULL_CRL_PEM } from "./urls.ts";

/** One signed CRL of a set, as written. */
export interface SignedCrl {
  scope: CrlScope;
  /** Its file name (`full.crl`, `K.crl`). */
  name: string;
  der: Uint8Array;
  /** Certificates it lists. */
  count: number;
}

/**
 * Signs the CRLs of `scopes` from one revoked set, all with the same times and number.
 *
 * @example
 * ```ts
 * import type { Signer } from "../ocsp/mod.ts";
 * import type { CrlIssuer, CrlTimes, RevokedSet } from "./crl.ts";
 * declare const issuer: CrlIssuer, set: RevokedSet, times: CrlTimes, signer: Signer;
 * const crls = await signCrls(issuer, set, set.scopes(), times, signer);
 * ```
 */
export async function signCrls(
  issuer: CrlIssuer,
  set: RevokedSet,
  scopes: CrlScope[],
  times: CrlTimes,
  signer: Signer,
): Promise<SignedCrl[]> {
  const out: SignedCrl[] = [];
  for (const scope of scopes) {
    const der = await signCrl(issuer, set, scope, times, signer);
    out.push({ scope, name: crlFileName(scope), der, count: set.countOf(scope) });
  }
  return out;
}

/**
 * Writes signed CRLs into `dir`, each file atomically; the full CRL also as `full.pem`.
 *
 * @example
 * ```ts
 * declare const crls: SignedCrl[];
 * await writeCrlFiles("/srv/www/crl", crls);
 * ```
 */
export async function writeCrlFiles(dir: string, crls: SignedCrl[]): Promise<void> {
  // Partitions first, the full CRL last: a reader of full.pem (nginx) that sees it change finds
  // every partition already as current.
  const ordered = [...crls].sort((a, b) =>
    (a.scope === "full" ? 1 : 0) - (b.scope === "full" ? 1 : 0)
  );
  for (const crl of ordered) {
    await writeFileAtomic(`${dir}/${crl.name}`, crl.der);
    if (crl.scope === "full") {
      await writeFileAtomic(
        `${dir}/${FULL_CRL_PEM}`,
        new TextEncoder().encode(pem("X509 CRL", crl.der)),
      );
    }
  }
}

/** thisUpdate of a CRL made now: whole seconds, as the CRL carries it. */
export function crlTimes(now: number, validitySeconds: number, number: bigint): CrlTimes {
  const thisUpdate = Math.floor(now / 1000) * 1000;
  return { number, thisUpdate, nextUpdate: thisUpdate + validitySeconds * 1000 };
}

/** What a keeper needs. */
export interface CrlKeeperOptions {
  /** The revocation database (the OCSP answers' own, so CRLs and OCSP cannot disagree). */
  source: IndexFileSource;
  issuer: CrlIssuer;
  partitions: number;
  signer: Signer;
  /** nextUpdate − thisUpdate, seconds; each CRL is re-signed once half of it has passed. */
  validitySeconds: number;
  /** Where the files go. */
  dir: string;
  /** A cRLNumber of at least the given one (lib/ca/crl_number.ts). */
  takeNumber(atLeast: bigint): Promise<bigint>;
  /** One line for the daemon's log (each failure once until it changes, and the recovery). */
  log(message: string): void;
  /** Counted per attempt: why a round left the CRLs as they were. */
  onFailure?(stage: CrlFailure): void;
  /** Counted per CRL signed and written. */
  onSigned?(count: number): void;
  /** Told each time CRLs were written: a round writes a revocation's partitions first. */
  onWritten?(crls: SignedCrl[]): void;
  /** How often the database is checked, ms (default 500: a revocation is published within ~1 s). */
  pollMs?: number;
}

/**
 * Why a round published nothing: the database could not be read (`index`), the token did not sign
 * (`sign`), the folder could not be written (`write`), or a cRLNumber could not be taken (`number`).
 */
export type CrlFailure = "index" | "sign" | "write" | "number";

/**
 * Keeps a CRL folder current from the revocation database: checks it every `pollMs`, re-signs the
 * CRLs whose entries changed (a revocation re-signs its partition, written first, then the full
 * CRL) and every CRL due (half its validity passed), and writes them. A round that fails leaves
 * the files it had not written yet as they were (the last good CRLs, served until their
 * nextUpdate) and is tried again at the next check.
 */
export class CrlKeeper {
  /** The set the files were last written from, and the set of the last read of the database. */
  #published: RevokedSet | undefined;
  #read: RevokedSet | undefined;
  /** thisUpdate of each scope's CRL as written. */
  readonly #signedAt = new Map<CrlScope, number>();
  #version: number | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #running: Promise<unknown> | undefined;
  #reported: string | null = null;
  #stopped = false;

  constructor(private readonly options: CrlKeeperOptions) {}

  /**
   * Starts checking: a first round now (every CRL is signed), then every `pollMs`. Resolves once
   * the first round is done, so a daemon says it is ready with its CRLs written.
   */
  async start(): Promise<void> {
    const loop = async () => {
      if (this.#stopped) return;
      this.#running = this.round();
      await this.#running;
      if (!this.#stopped) this.#timer = setTimeout(loop, this.options.pollMs ?? 500);
    };
    await loop();
  }

  /** Stops checking; resolves once a round in progress ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  /**
   * One check: reads the database if it changed, signs and writes what is due. Resolves to the CRLs
   * written (none when nothing was due; when the round failed, those written before). Never throws.
   */
  async round(now = Date.now()): Promise<SignedCrl[]> {
    const o = this.options;
    const snapshot = await o.source.current();
    if (snapshot === null) {
      return this.#fail("index", `cannot read the revocation database: ${o.source.lastError}`);
    }
    let set = this.#read;
    if (snapshot.version !== this.#version || !set) {
      const read = new RevokedSet(o.partitions);
      const version = await o.source.forEachRevoked(read.add);
      if (version === null) {
        return this.#fail("index", `cannot read the revocation database: ${o.source.lastError}`);
      }
      this.#read = set = read;
      this.#version = version;
    }
    const batches = this.#due(set, now);
    if (batches.length === 0) {
      this.#recovered("the CRLs published are current");
      return [];
    }
    let times: CrlTimes;
    try {
      times = crlTimes(
        now,
        o.validitySeconds,
        await o.takeNumber(BigInt(Math.floor(now / 1000) * 1000)),
      );
    } catch (err) {
      return this.#fail("number", `cannot take a cRLNumber: ${(err as Error).message}`);
    }
    const written: SignedCrl[] = [];
    for (const scopes of batches) {
      let crls: SignedCrl[];
      try {
        crls = await signCrls(o.issuer, set, scopes, times, o.signer);
      } catch (err) {
        return this.#fail("sign", `the token did not sign: ${(err as Error).message}`, written);
      }
      try {
        await writeCrlFiles(o.dir, crls);
      } catch (err) {
        return this.#fail("write", `cannot write ${o.dir}: ${(err as Error).message}`, written);
      }
      for (const crl of crls) this.#signedAt.set(crl.scope, times.thisUpdate);
      o.onSigned?.(crls.length);
      o.onWritten?.(crls);
      written.push(...crls);
    }
    this.#published = set;
    this.#recovered(`published ${written.length} CRL(s), cRLNumber ${times.number}`);
    return written;
  }

  /**
   * The scopes to sign now, in the order they are signed and written: first the partitions whose
   * entries changed (a revocation's own CRL, what its certificate's distribution point names,
   * is out before the work of the full CRL begins), then the full CRL and every CRL at half its
   * validity. Empty when nothing is due.
   */
  #due(set: RevokedSet, now: number): CrlScope[][] {
    const halfLife = this.options.validitySeconds * 500;
    const changed = new Set(set.changedSince(this.#published));
    const due = set.scopes().filter((scope) =>
      changed.has(scope) || now >= (this.#signedAt.get(scope) ?? -Infinity) + halfLife
    );
    const first = due.filter((scope) => scope !== "full" && changed.has(scope));
    const then = due.filter((scope) => !first.includes(scope));
    return [first, then].filter((batch) => batch.length > 0);
  }

  /** After a failure was logged: one line saying the CRLs are kept again. */
  #recovered(what: string): void {
    if (this.#reported === null) return;
    this.options.log(`crl: working again: ${what}`);
    this.#reported = null;
  }

  /** Counts and logs a failed round; returns what it wrote before it failed. */
  #fail(stage: CrlFailure, why: string, written: SignedCrl[] = []): SignedCrl[] {
    this.options.onFailure?.(stage);
    if (this.#reported !== why) {
      this.options.log(
        `crl: ${why}; the CRLs published before are served until their nextUpdate, tried again ` +
          `every ${this.options.pollMs ?? 500} ms`,
      );
    }
    this.#reported = why;
    return written;
  }
}
