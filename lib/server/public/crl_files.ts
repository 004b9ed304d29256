/**
 * The CRLs GET /crl/NAME serves: the files the keeper writes into the CRL folder (lib/ca
 * crl_publish.ts), each stat-ed per request and re-read when it was replaced (every write is a
 * rename, so a new file is a new inode). A CRL is served only while it is current: one past its
 * nextUpdate, or one that does not parse as a CRL, is never served (the route answers 503).
 *
 * @example
 * ```ts
 * const files = new CrlFiles("/var/lib/svcd/crl", 16);
 * files.current("3.crl")?.der; // DER of partition 3's CRL, or undefined
 * ```
 */
import { DerReader, TAG } from "../../der/mod.ts";
import { crlFileNames } from "../../ca/urls.ts";

/** A CRL as served. */
export interface ServedCrl {
  der: Uint8Array;
  thisUpdate: number;
  nextUpdate: number;
}

interface Cached extends ServedCrl {
  ino: number | null;
  size: number;
  mtime: number;
}

/** The CRL folder, read as its files change. */
export class CrlFiles {
  readonly #names: Set<string>;
  readonly #cache = new Map<string, Cached>();

  /** Example: `new CrlFiles("/var/lib/svcd/crl", 1)` serves full.crl only. */
  constructor(readonly dir: string, partitions: number) {
    this.#names = new Set(crlFileNames(partitions));
  }

  /** Whether NAME is one of the CA's CRLs (`full.crl`, `K.crl` for a partition). */
  has(name: string): boolean {
    return this.#names.has(name);
  }

  /** The current CRL of that name, or undefined (none written yet, unreadable, or expired). */
  current(name: string, now = Date.now()): ServedCrl | undefined {
    if (!this.#names.has(name)) return undefined;
    const path = `${this.dir}/${name}`;
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(path);
    } catch {
      return undefined;
    }
    let crl = this.#cache.get(name);
    const mtime = info.mtime?.getTime() ?? 0;
    if (!crl || crl.ino !== info.ino || crl.size !== info.size || crl.mtime !== mtime) {
      crl = this.#read(path, info, mtime);
      if (crl) this.#cache.set(name, crl);
      else this.#cache.delete(name);
    }
    return crl && now < crl.nextUpdate ? crl : undefined;
  }

  #read(path: string, info: Deno.FileInfo, mtime: number): Cached | undefined {
    try {
      const der = Deno.readFileSync(path);
      return { der, ...crlTimesOf(der), ino: info.ino, size: info.size, mtime };
    } catch {
      return undefined;
    }
  }
}

/**
 * thisUpdate and nextUpdate of a DER CRL. Throws DerError when it is not one.
 *
 * @example
 * ```ts
 * declare const der: Uint8Array;
 * crlTimesOf(der).nextUpdate; // ms since 1970
 * ```
 */
export function crlTimesOf(der: Uint8Array): { thisUpdate: number; nextUpdate: number } {
  const outer = new DerReader(der);
  const list = outer.enter(TAG.SEQUENCE);
  outer.finish();
  const tbs = list.enter(TAG.SEQUENCE);
  if (tbs.peekTag() === TAG.INTEGER) tbs.next();
  tbs.expect(TAG.SEQUENCE); // signature
  tbs.expect(TAG.SEQUENCE); // issuer
  const thisUpdate = tbs.readTime();
  const nextUpdate = tbs.readTime();
  return { thisUpdate, nextUpdate };
}
