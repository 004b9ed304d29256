/**
 * `svcd ca revoke`, `status`, `list`, `crl`, `publish` and `urls`: revocation and where relying
 * parties find it.
 */
import {
  CRL_REASON,
  type IndexEntry,
  IndexFileSource,
  parseCertificate,
  REASON_NAME,
} from "../../ocsp/mod.ts";
import { derFromPem } from "../csr.ts";
import { CaFolder, DEFAULT_CA_DIR } from "../store.ts";
import { caStatus } from "../status.ts";
import { type CrlIssuer, RevokedSet } from "../crl.ts";
import { crlTimes, signCrls, writeCrlFiles } from "../crl_publish.ts";
import { writeFileAtomic } from "../atomic.ts";
import { type CaUrls, checkUrl, missingUrls, UrlError } from "../urls.ts";
import { pem } from "../../der/mod.ts";
import { EXIT } from "../../cli/exit.ts";
import {
  caKey,
  type Context,
  days,
  DEFAULT_DAYS,
  outCopies,
  required,
  signerOf,
  UsageError,
  withToken,
} from "./context.ts";

export function revocableReasons(): string[] {
  // removeFromCRL only undoes a hold in a delta CRL; privilegeWithdrawn and aACompromise have no
  // name in openssl's index.txt, so openssl could no longer read the file.
  return Object.keys(CRL_REASON).filter((name) => {
    const code = CRL_REASON[name as keyof typeof CRL_REASON];
    return code !== CRL_REASON.removeFromCRL && REASON_NAME[code] !== undefined;
  });
}

function reasonCode(text: string): number {
  const name = revocableReasons().find((n) => n.toLowerCase() === text.toLowerCase());
  const rfc5280 = Object.keys(CRL_REASON).find((n) => n.toLowerCase() === text.toLowerCase());
  if (name === undefined && rfc5280 !== undefined) {
    throw new UsageError(
      `reason '${rfc5280}' cannot be written: openssl's index.txt has no name for it (or it only ` +
        `applies to delta CRLs), so openssl ca/ocsp could no longer read the file; use one of: ` +
        revocableReasons().join(", "),
    );
  }
  if (name === undefined) {
    throw new UsageError(`unknown reason '${text}'; one of: ${revocableReasons().join(", ")}`);
  }
  return CRL_REASON[name as keyof typeof CRL_REASON];
}

export async function revoke(ctx: Context): Promise<number> {
  if (ctx.positionals.length !== 1) throw new UsageError("give exactly one SERIAL");
  const serial = ctx.positionals[0].replace(/^0x/i, "").replaceAll(":", "");
  if (!/^[0-9A-Fa-f]+$/.test(serial)) {
    throw new UsageError(`'${ctx.positionals[0]}' is not a hex serial`);
  }
  const reason = reasonCode(required(ctx, "reason"));
  const folder = await CaFolder.open(ctx.dir);
  const revokedAt = Math.floor(Date.now() / 1000) * 1000;
  const entry = await folder.locked(() => folder.revoke(serial, revokedAt, reason));
  ctx.say(
    `revoked ${entry.serial} (${entry.subject}) at ${new Date(revokedAt).toISOString()}, ` +
      `reason ${REASON_NAME[reason]}; ${CaFolder.paths(ctx.dir).index} rewritten`,
  );
  // A CRL is not made here: signing needs the token and its PIN, which revoke does not (so an
  // operator can revoke at once, with whatever access is at hand). The daemon re-signs it.
  ctx.say(
    `the daemon's OCSP answers say revoked now, and a daemon serving this CA's CRLs ` +
      `(svcd serve --ca-dir) publishes them within seconds (nginx reloads through svcd-crl.path); ` +
      `without one: svcd ca crl${ctx.dir === DEFAULT_CA_DIR ? "" : ` --ca-dir ${ctx.dir}`} ` +
      `--out /etc/svcd/tls/client-ca.crl && systemctl reload nginx` +
      ` (on a packaged host as root, add --credential /etc/svcd/svc-pin.cred --user svcd)`,
  );
  return EXIT.ok;
}

/** The CA as CRLs name it: its subject, its key, and the recorded CRL URL. */
function crlIssuer(folder: CaFolder): CrlIssuer {
  const ca = parseCertificate(folder.caDer);
  return { name: ca.subject, spki: ca.spki, crlUrl: folder.config.urls?.crl };
}

/** The revoked certificates of the folder's index.txt, read as the daemon reads it. */
async function readRevoked(folder: CaFolder, partitions: number): Promise<RevokedSet> {
  const path = CaFolder.paths(folder.dir).index;
  const size = (await Deno.stat(path)).size;
  // A line is at least 30 bytes: memory for every line the file can hold, and no more.
  const source = new IndexFileSource(path, { maxEntries: Math.max(1, Math.ceil(size / 30)) });
  const set = new RevokedSet(partitions);
  if (await source.forEachRevoked(set.add) === null) {
    throw new Error(`${source.lastError}; fix the index (nothing was signed)`);
  }
  return set;
}

/** Signs the CRLs of `scopes` (all when absent) under the folder's lock, with a new cRLNumber. */
async function signFolderCrls(ctx: Context, folder: CaFolder, partitions: number, all: boolean) {
  const lifetime = days(ctx, DEFAULT_DAYS.crl);
  return await withToken(ctx, async (token) => {
    const ca = await caKey(token, folder, ctx);
    return await folder.locked(async () => {
      const set = await readRevoked(folder, partitions);
      const now = Date.now();
      const number = await folder.takeCrlNumber(BigInt(Math.floor(now / 1000) * 1000));
      const times = crlTimes(now, lifetime * 86_400, number);
      const scopes = all ? set.scopes() : ["full" as const];
      ctx.say(
        `signing ${scopes.length} CRL(s), cRLNumber ${number} (${set.count} revoked), with the ` +
          `CA key '${folder.config.keyLabel}'`,
      );
      const crls = await signCrls(crlIssuer(folder), set, scopes, times, signerOf(token, ca.key));
      return { crls, times };
    });
  });
}

export async function crl(ctx: Context): Promise<number> {
  const folder = await CaFolder.open(ctx.dir);
  const paths = CaFolder.paths(ctx.dir);
  const { crls, times } = await signFolderCrls(ctx, folder, 1, false);
  const text = new TextEncoder().encode(pem("X509 CRL", crls[0].der));
  for (const target of [paths.crl, ...outCopies(ctx)]) await writeFileAtomic(target, text);
  ctx.say(`wrote ${[paths.crl, ...outCopies(ctx)].join(" and ")}`);
  console.log(
    `CRL ${times.number}: ${crls[0].count} revoked, next update ` +
      new Date(times.nextUpdate).toISOString(),
  );
  console.log(`reload nginx to use it: systemctl reload nginx`);
  return EXIT.ok;
}

export async function publish(ctx: Context): Promise<number> {
  if (ctx.positionals.length !== 1) throw new UsageError("give exactly one DIR");
  const dir = ctx.positionals[0];
  const folder = await CaFolder.open(ctx.dir);
  const partitions = folder.config.urls?.crlPartitions ?? 1;
  if (!(await Deno.stat(dir).then((s) => s.isDirectory, () => false))) {
    throw new Error(`${dir} is not a folder; create it first`);
  }
  const { crls, times } = await signFolderCrls(ctx, folder, partitions, true);
  try {
    await writeCrlFiles(dir, crls);
  } catch (err) {
    // Each file is replaced whole or not at all: a reader still finds a CRL under every name.
    throw new Error(`cannot write the CRLs into ${dir}: ${(err as Error).message}`);
  }
  for (const c of crls) console.log(`${dir}/${c.name}\t${c.count} revoked`);
  console.log(
    `cRLNumber ${times.number}, next update ${new Date(times.nextUpdate).toISOString()}`,
  );
  if (!folder.config.urls?.crl) {
    ctx.say("no CRL URL is recorded: certificates name none of these files ('svcd ca urls')");
  }
  return EXIT.ok;
}

/** --ocsp-url, --crl-url, --crl-partitions, --ca-issuers-url, checked; undefined when none. */
export function urlOptions(ctx: Context): CaUrls | undefined {
  const urls: CaUrls = {};
  try {
    const url = (flag: "ocsp-url" | "crl-url" | "ca-issuers-url") => {
      const v = ctx.options.get(flag);
      return v === undefined ? undefined : checkUrl(v, `--${flag}`);
    };
    urls.ocsp = url("ocsp-url");
    urls.crl = url("crl-url");
    urls.caIssuers = url("ca-issuers-url");
  } catch (err) {
    if (err instanceof UrlError) throw new UsageError(err.message);
    throw err;
  }
  urls.crlPartitions = ctx.options.get("crl-partitions");
  const given = Object.values(urls).some((v) => v !== undefined);
  return given ? urls : undefined;
}

export async function urls(ctx: Context): Promise<number> {
  let folder = await CaFolder.open(ctx.dir);
  const given = urlOptions(ctx);
  if (given) {
    folder = await folder.locked(() => folder.recordUrls(given));
    ctx.say(
      `recorded in ${CaFolder.paths(ctx.dir).config}; certificates issued from now on carry them`,
    );
  }
  const u = folder.config.urls ?? {};
  console.log(`ocsp\t${u.ocsp ?? "-"}`);
  console.log(`crl\t${u.crl ?? "-"}`);
  console.log(`crl partitions\t${u.crlPartitions ?? 1}`);
  console.log(`ca issuers\t${u.caIssuers ?? "-"}`);
  for (const what of missingUrls(u)) {
    ctx.say(`missing: ${what}; certificates issued without it do not point to it`);
  }
  return EXIT.ok;
}

export async function status(ctx: Context): Promise<number> {
  if (ctx.positionals.length !== 1) throw new UsageError("give exactly one CERT file");
  const folder = await CaFolder.open(ctx.dir);
  const der = derFromPem(await Deno.readFile(ctx.positionals[0]), "CERTIFICATE");
  const label = ctx.options.get("ocsp-label");
  const answer = await withToken(ctx, (token) => caStatus(token, folder, der, label));
  console.log(answer);
  return EXIT.ok;
}

function time(ms: number | undefined): string {
  return ms === undefined ? "-" : new Date(ms).toISOString().replace(".000Z", "Z");
}

/**
 * The index as text columns; a valid certificate past its expiry shows as `E` (expired), as
 * `openssl ca -updatedb` would mark it (the file keeps `V`). Example: `formatList(entries)`.
 *
 * @example
 * ```ts
 * import { parseIndex } from "../../ocsp/mod.ts";
 * declare const text: string;
 * console.log(formatList(parseIndex(text)));
 * ```
 */
export function formatList(entries: IndexEntry[], now = Date.now()): string {
  const rows = [["STATUS", "SERIAL", "EXPIRES", "REVOKED", "REASON", "SUBJECT"]];
  for (const e of entries) {
    rows.push([
      e.status === "V" && e.expires <= now ? "E" : e.status,
      e.serial,
      time(e.expires),
      time(e.revokedAt),
      e.reason === undefined ? "-" : REASON_NAME[e.reason] ?? String(e.reason),
      e.subject,
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i])).join("  "))
    .join("\n");
}

export async function list(ctx: Context): Promise<number> {
  const folder = await CaFolder.open(ctx.dir);
  const { entries } = await folder.readIndex();
  console.log(formatList(entries));
  return EXIT.ok;
}
