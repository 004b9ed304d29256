/**
 * The start-up checks that need no login and no socket, as findings: each one line saying what is
 * wrong and what to do, fatal or a warning. `serve` refuses to start on a fatal one;
 * `--check-config` prints them all and exits non-zero if any is fatal. Neither ever logs in (a
 * failed login counts toward the five-failure lockout of the role).
 */
import { dirname } from "node:path";
import {
  ACCESS,
  fileSystemType,
  FS_MAGIC,
  getgrgid,
  getpwuid,
  groupsOf,
  libc,
  mayAccess,
  type PasswdEntry,
} from "../../../ffi/libc.ts";
import { nofileLimit } from "../../http/mod.ts";
import { PolicyFile } from "../../policy/mod.ts";
import { RefusalBudget, STATE_FILE_NAME, StateError } from "../../throttle/mod.ts";
import {
  CredentialError,
  DAEMON_KEY_LABELS,
  isWellFormedPin,
  PIN_CREDENTIAL_NAME,
  readPinCredential,
  Token,
} from "../../token/mod.ts";
import { IndexFileSource, type IndexMemory } from "../../ocsp/mod.ts";
import { countRevocationLoad } from "../../metrics/svcd.ts";
import type { PublicConfig, ServeConfig } from "./config.ts";
import type { CrlConfig } from "../threads/protocol.ts";
import { CaFolder } from "../../ca/store.ts";
import { missingUrls } from "../../ca/urls.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { loadPublicFiles, PublicFileError } from "../public/files.ts";
import { readPolicyInThread } from "../threads/policy_reader.ts";

/** A start-up failure: the message says what was wrong and what to do; exit code 1. */
export class StartupError extends Error {
  override name = "StartupError";
}

/** One problem found: `message` is one line naming it and what to do. */
export interface Finding {
  fatal: boolean;
  message: string;
}

/** File descriptors the process needs besides the listeners' queues and workers. */
const FD_SLACK = 64;

/**
 * Checks the numbers that must fit under RLIMIT_NOFILE (the queue depth is checked at start
 * against the process limit on open files, not found short under load).
 */
export function checkFileLimit(config: ServeConfig, limit: { soft: number; hard: number }): void {
  const listeners = config.public?.socket ? 2 : 1;
  // Each public thread and each request thread (--threads) has handler slots and a session pool
  // of its own (a request thread's slots are a share of --workers: counted whole, to be safe).
  const threads = 1 + config.threads + (config.public?.threads ?? 0);
  const { queueDepth, workers } = config.listener;
  const { maxSessions } = config.token;
  const needed = listeners * queueDepth + threads * (workers + maxSessions) + FD_SLACK;
  if (needed <= limit.soft) return;
  throw new StartupError(
    `open-file limit ${limit.soft} is too small: --queue-depth ${queueDepth} × ${listeners} ` +
      `listener(s) + (--workers ${workers} + --max-sessions ${maxSessions}) × ${threads} ` +
      `thread(s) with a listener + ${FD_SLACK} needs ${needed}; lower --queue-depth or raise ` +
      `LimitNOFILE= in the unit (hard limit ${limit.hard})`,
  );
}

/** Collects findings; a check that throws a StartupError or CredentialError is a fatal finding. */
class Findings {
  readonly list: Finding[] = [];
  fatal(message: string): void {
    this.list.push({ fatal: true, message });
  }
  warn(message: string): void {
    this.list.push({ fatal: false, message });
  }
  async run(check: () => void | Promise<void>): Promise<void> {
    try {
      await check();
    } catch (err) {
      if (!(err instanceof StartupError || err instanceof CredentialError)) throw err;
      this.fatal(err.message);
    }
  }
}

/**
 * Every check that needs neither a login nor the token: options, open-file limit, socket and its
 * folder (and whether the proxy can reach it), proxy uid, policy, audit and state folders,
 * credential. Returns the loaded policy when it loads.
 */
export async function startupFindings(
  config: ServeConfig,
): Promise<StartupFindings> {
  const f = new Findings();
  await f.run(() => checkFileLimit(config, nofileLimit()));
  checkSocket(config.listener.path, "--socket", config.listener.proxyUid, f);
  const revocationMemory = config.public
    ? checkPublicConfig(config.public, config.listener, f)
    : undefined;
  if (config.public?.crl) await checkCrlConfig(config.public, config.public.crl, f);
  let policy: PolicyFile | undefined;
  await f.run(async () => {
    policy = await loadPolicy(config.policy);
  });
  for (const warning of policy?.current.warnings ?? []) f.warn(`policy: ${warning}`);
  checkPolicyFileMode(config.policy.path, f);
  await checkWritableDir(config.audit.dir, "--audit-dir", "LogsDirectory=", "/var/log/svcd", f);
  await checkWritableDir(
    config.throttle.stateDir,
    "--state-dir",
    "StateDirectory=",
    "/var/lib/svcd",
    f,
  );
  await f.run(() => checkCredential(config, f));
  return { policy, findings: f.list, revocationMemory };
}

/** What the start-up checks found, and what they loaded that the daemon can use as it is. */
export interface StartupFindings {
  policy: PolicyFile | undefined;
  findings: Finding[];
  /**
   * The revocation database the check read (with the public listener), for the public threads:
   * they re-read the file only if it changed since.
   */
  revocationMemory?: IndexMemory;
}

/**
 * The checks `--check-config` adds that open the module (never a login): the token is found by
 * its label, and every label the policy grants names a key on it.
 */
export async function tokenFindings(
  config: ServeConfig,
  policy: PolicyFile | undefined,
): Promise<Finding[]> {
  const f = new Findings();
  const { modulePath, tokenLabel } = config.token;
  let token: Token;
  try {
    token = Token.open({ modulePath, tokenLabel });
  } catch (err) {
    f.fatal(`${(err as Error).message}${moduleAccessHint(modulePath)}`);
    return f.list;
  }
  try {
    for (const { label, line } of policy?.current.grantedLabels() ?? []) {
      if (await token.publicKey(label)) continue;
      f.warn(
        `policy line ${line} grants '${label}', but token '${tokenLabel}' has no key labelled so ` +
          `(as seen without a login): requests for it get 403; create it (svcd token keygen ` +
          `--key-label ${label} …) or correct the label`,
      );
    }
  } finally {
    token.close();
  }
  return f.list;
}

/** Debian's SoftHSM keeps its configuration and tokens for group softhsm: name that cause. */
function moduleAccessHint(modulePath: string): string {
  if (!/softhsm/i.test(modulePath)) return "";
  const conf = Deno.env.get("SOFTHSM2_CONF") ?? "/etc/softhsm/softhsm2.conf";
  if (mayAccess(conf, ACCESS.R)) return "";
  return `; this user cannot read ${conf}: add the daemon's user to group softhsm ` +
    `(adduser svcd softhsm) — the package does so when softhsm2 is installed first`;
}

/**
 * An existing refusal state file is opened once, as `serve` would, so a corrupt one is found; a
 * file a running daemon holds is reported, not failed.
 */
export function stateFileFinding(config: ServeConfig): Finding | undefined {
  const { stateDir } = config.throttle;
  try {
    Deno.statSync(`${stateDir}/${STATE_FILE_NAME}`);
  } catch {
    return undefined; // `serve` creates it
  }
  try {
    RefusalBudget.open(config.throttle).close();
    return undefined;
  } catch (err) {
    if (err instanceof StateError && err.kind === "in-use") {
      return { fatal: false, message: `${err.path} is in use (a running daemon?); not checked` };
    }
    return { fatal: true, message: (err as Error).message };
  }
}

/**
 * The public listener's files, before any login: its socket (as the authenticated one's), the CA
 * chain and the responder certificate. An unloadable revocation database is a warning, not fatal
 * (/ocsp answers tryLater until it loads). Returns the memory the database was read into.
 */
function checkPublicConfig(
  pub: PublicConfig,
  listener: ServeConfig["listener"],
  f: Findings,
): IndexMemory {
  if (pub.socket === listener.path) {
    f.fatal("--public-socket must differ from --socket; give each listener its own");
  } else {
    checkSocket(pub.socket, "--public-socket", listener.proxyUid, f, { proxyUidChecked: true });
  }
  try {
    loadPublicFiles(pub);
  } catch (err) {
    if (!(err instanceof PublicFileError)) throw err;
    f.fatal(err.message);
  }
  // The public threads answer from this read (counted as the database's first load).
  const source = new IndexFileSource(pub.revocationDb, {
    maxEntries: pub.maxEntries,
    onLoad: countRevocationLoad,
  });
  if (source.current() === null && source.overLimit) {
    f.fatal(`--revocation-db: ${source.lastError}`);
  } else if (source.lastError !== null) {
    f.warn(
      `--revocation-db: ${source.lastError}; POST /ocsp answers tryLater until it loads ` +
        "(make it with 'svcd ca init')",
    );
  }
  return source.memory;
}

/**
 * --ca-dir: the CA folder opens and is the CA of --ca-cert; the URLs it records (a missing one
 * is a warning: certificates issued without it point nowhere); the CRL folder is writable; and
 * whether the CA folder's cRLNumber counter is (else each node counts on its own).
 */
async function checkCrlConfig(pub: PublicConfig, crl: CrlConfig, f: Findings): Promise<void> {
  let folder: CaFolder;
  try {
    folder = await CaFolder.open(crl.caDir);
  } catch (err) {
    f.fatal(`--ca-dir: ${(err as Error).message}`);
    return;
  }
  try {
    const chain = loadPublicFiles(pub);
    if (!bytesEqual(chain.issuer.der, folder.caDer)) {
      f.fatal(
        `--ca-dir ${crl.caDir}: its ca.pem is not the first certificate of --ca-cert ` +
          `${pub.caCertificates}; the CRLs and the OCSP answers must be one CA's: give that ` +
          "folder's ca.pem as --ca-cert",
      );
    }
  } catch { /* --ca-cert's own finding is made by checkPublicConfig */ }
  for (const what of missingUrls(folder.config.urls ?? {})) {
    f.warn(
      `--ca-dir ${crl.caDir} records no ${what.replace(/^the /, "")}: certificates 'svcd ca' ` +
        "issues do not point to it; record it with 'svcd ca urls' (certificates issued before " +
        "keep their extensions)",
    );
  }
  await checkWritableDir(crl.dir, "--crl-dir", "StateDirectory=", "/var/lib/svcd/crl", f);
  const counter = CaFolder.paths(crl.caDir).crlNumber;
  const counterOk = mayAccess(crl.caDir, ACCESS.W | ACCESS.X) ||
    mayAccess(counter, ACCESS.W);
  if (!counterOk) {
    f.warn(
      `--ca-dir: this user cannot write ${counter}; cRLNumbers are counted in ` +
        `${crl.dir}/crlnumber instead, ordered with other nodes' by the clocks only: make the ` +
        `file writable by the daemon's group (chgrp svcd ${counter}; chmod g+w ${counter})`,
    );
  }
}

function checkSocket(
  path: string,
  option: string,
  proxyUid: number,
  f: Findings,
  opts: { proxyUidChecked?: boolean } = {},
): void {
  const dir = dirname(path);
  const info = lstatOrUndefined(path);
  if (info && !info.isSocket) {
    f.fatal(`${option} ${path} exists and is not a socket; move it away or choose another path`);
  }
  const proxy = getpwuid(proxyUid);
  if (proxy === null && !opts.proxyUidChecked) {
    f.fatal(
      `--proxy-uid ${proxyUid}: no user has this uid, so no proxy can ever connect; give the uid ` +
        `of the proxy's user (id -u www-data) in SVCD_PROXY_UID (/etc/default/svcd)`,
    );
  }
  const dirInfo = statOrUndefined(dir);
  if (!dirInfo?.isDirectory) {
    f.fatal(
      `${option} ${path}: the folder ${dir} does not exist; create it (the package's ` +
        `tmpfiles.d/svcd.conf makes /run/svcd: systemd-tmpfiles --create svcd.conf)`,
    );
    return;
  }
  if (!mayAccess(dir, ACCESS.W | ACCESS.X)) {
    f.fatal(
      `${option} ${path}: this user (uid ${libc().getuid()}) cannot create files in ${dir}; ` +
        `make it the daemon's (svcd:svcd-proxy 2750 for /run/svcd, from tmpfiles.d/svcd.conf)`,
    );
  }
  if (proxy !== null) checkProxyReach(path, option, dirInfo, proxy, f);
}

/** Whether the proxy's user can enter every folder up to the socket and connect to it (0660). */
function checkProxyReach(
  path: string,
  option: string,
  dirInfo: Deno.FileInfo,
  proxy: PasswdEntry,
  f: Findings,
) {
  if (proxy.uid === 0) return;
  const groups = groupsOf(proxy);
  const who = `the proxy's user ${proxy.name} (uid ${proxy.uid})`;
  for (const dir of ancestors(dirname(path))) {
    const st = statOrUndefined(dir);
    if (!st || mayUse(st, proxy, groups, 0o1)) continue;
    f.fatal(
      `${who} cannot enter ${dir} (${describeOwner(st)}), so it cannot reach ${option} ${path}: ` +
        `add ${proxy.name} to group ${groupName(st.gid ?? -1)} (adduser ${proxy.name} ` +
        `${
          groupName(st.gid ?? -1)
        }) or give ${dir} the proxy's group (the package's /run/svcd is ` +
        `svcd:svcd-proxy 2750 and ${proxy.name} is in svcd-proxy)`,
    );
    return;
  }
  // The socket is created 0660: its group is the folder's when the folder is setgid, else ours.
  const socketGid = (dirInfo.mode ?? 0) & 0o2000 ? dirInfo.gid! : currentGid();
  if (groups.includes(socketGid) || proxy.uid === libc().getuid()) return;
  f.fatal(
    `${who} cannot connect to ${option} ${path}: it will be 0660 with group ` +
      `${groupName(socketGid)}, and ${proxy.name} is not in that group; make ${dirname(path)} ` +
      `setgid with the proxy's group (chgrp svcd-proxy; chmod g+s) or add ${proxy.name} to ` +
      `${groupName(socketGid)}`,
  );
}

function currentGid(): number {
  return libc().getgid();
}

function mayUse(st: Deno.FileInfo, user: PasswdEntry, groups: number[], bit: number): boolean {
  const mode = st.mode ?? 0;
  if (st.uid === user.uid) return (mode & (bit << 6)) !== 0;
  if (groups.includes(st.gid ?? -1)) return (mode & (bit << 3)) !== 0;
  return (mode & bit) !== 0;
}

function ancestors(dir: string): string[] {
  const out: string[] = [];
  for (let d = dir;; d = dirname(d)) {
    out.unshift(d);
    if (d === "/" || d === ".") break;
  }
  return out;
}

function describeOwner(st: Deno.FileInfo): string {
  const user = getpwuid(st.uid ?? -1)?.name ?? String(st.uid);
  return `${user}:${groupName(st.gid ?? -1)} ${
    ((st.mode ?? 0) & 0o7777).toString(8).padStart(4, "0")
  }`;
}

function groupName(gid: number): string {
  return getgrgid(gid) ?? String(gid);
}

async function loadPolicy(policy: ServeConfig["policy"]): Promise<PolicyFile> {
  try {
    return await PolicyFile.load(
      policy.path,
      { reservedLabels: DAEMON_KEY_LABELS, maxGrants: policy.maxGrants },
      readPolicyInThread,
    );
  } catch (err) {
    throw new StartupError((err as Error).message);
  }
}

function checkPolicyFileMode(path: string, f: Findings): void {
  const st = statOrUndefined(path);
  if (!st?.isFile || ((st.mode ?? 0) & 0o002) === 0) return;
  f.fatal(
    `--policy ${path} is world-writable (${describeOwner(st)}): anyone on this host could grant ` +
      `themselves keys; chmod o-w ${path} (the package makes it root:svcd 0640)`,
  );
}

async function checkWritableDir(
  dir: string,
  option: string,
  directive: string,
  packaged: string,
  f: Findings,
): Promise<void> {
  try {
    await Deno.mkdir(dir, { recursive: true, mode: 0o750 });
  } catch (err) {
    f.fatal(`${option} ${dir} cannot be created: ${(err as Error).message}`);
    return;
  }
  if (mayAccess(dir, ACCESS.W | ACCESS.X)) return;
  f.fatal(
    `${option} ${dir} is not writable by this user (uid ${libc().getuid()}): give it to the ` +
      `daemon's user (the unit's ${directive} makes ${packaged} svcd 0700), or choose another ${option}`,
  );
}

/**
 * The PIN credential: present, readable by its owner only, on protected memory (ramfs: what
 * `systemd-creds` calls secure; tmpfs or disk: weak), and shaped like a PIN `svcd token init`
 * makes — else `serve` would spend one of five login attempts on it.
 */
function checkCredential(config: ServeConfig, f: Findings): void {
  const { credentialsDir, allowWeakCredential } = config.token;
  const pin = readPinCredential(credentialsDir); // throws CredentialError when absent
  const wellFormed = isWellFormedPin(pin);
  const length = pin.length;
  pin.fill(0);
  const path = `${credentialsDir}/${PIN_CREDENTIAL_NAME}`;
  const st = Deno.statSync(path);
  const mode = (st.mode ?? 0) & 0o777;
  if (mode & 0o077) {
    f.fatal(
      `credential ${path} is mode ${mode.toString(8).padStart(4, "0")}: others may read the PIN; ` +
        `it must be 0400 as LoadCredentialEncrypted= makes it (chmod 0400 for a manual run)`,
    );
  }
  const fsType = fileSystemType(path);
  if (fsType !== FS_MAGIC.RAMFS) {
    const where = fsType === FS_MAGIC.TMPFS ? "tmpfs (can be swapped)" : "a disk file system";
    const message =
      `credential ${path} is weak: it is on ${where}, not on ramfs (the PIN belongs in ` +
      `memory that is never swapped); run svcd under systemd with LoadCredentialEncrypted=, or for a ` +
      `manual run decrypt it into a ramfs mount`;
    if (allowWeakCredential) f.warn(`${message} (allowed by --allow-weak-credential)`);
    else f.fatal(`${message}, or pass --allow-weak-credential to accept that`);
  }
  if (!wellFormed) {
    f.fatal(
      `credential ${path} holds ${length} bytes that are not a PIN made by 'svcd token init' ` +
        `(44 base64 characters); no login was attempted, since a wrong PIN uses up one of five ` +
        `attempts: restore the right credential (/etc/svcd/svc-pin.cred)`,
    );
  }
}

function lstatOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.lstatSync(path);
  } catch {
    return undefined;
  }
}

function statOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.statSync(path);
  } catch {
    return undefined;
  }
}
