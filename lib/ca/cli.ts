/**
 * `svcd ca …`: the operator's CA over a token key — init, issue, responder, revoke, status, list.
 * Certificates are signed by the token (the CA key never leaves it); the CA folder is openssl
 * `ca`-compatible (see lib/ca/README.md).
 *
 * @example
 * ```sh
 * svcd ca init --key-label ca --key-type ec-p256 --subject "CN=svcd CA,O=Example,C=DE"
 * svcd ca issue --csr alice.csr --grant web-signing
 * svcd ca revoke 4F1A2B --reason keyCompromise
 * ```
 */
import * as pkijs from "pkijs";
import { CRL_REASON, type IndexEntry, REASON_NAME } from "../ocsp/index_db.ts";
import type { Signer } from "../ocsp/algorithms.ts";
import { bytesEqual } from "../bytes/mod.ts";
import {
  DEFAULT_MODULE,
  DEFAULT_TOKEN_LABEL,
  isKeyTypeName,
  KEY_TYPE_NAMES,
  loadPin,
  type SigningKey,
  type Token,
} from "../token/mod.ts";
import { asUser, callsAsUser, type Common, openLoggedIn, TokenAdmin } from "../token_admin/mod.ts";
import {
  buildCertificate,
  caExtensions,
  clientExtensions,
  responderExtensions,
} from "./certificate.ts";
import { derFromPem, readPublicKey, readRequest } from "./csr.ts";
import { nameFromRfc4514, nginxSubject, slashSubject } from "./name.ts";
import { CaFolder, DEFAULT_CA_DIR, serialHex } from "./store.ts";
import { caStatus } from "./status.ts";
import { type CrlIssuer, RevokedSet } from "./crl.ts";
import { crlTimes, signCrls, writeCrlFiles } from "./crl_publish.ts";
import { writeFileAtomic } from "./atomic.ts";
import { type CaUrls, checkUrl, MAX_CRL_PARTITIONS, missingUrls, UrlError } from "./urls.ts";
import { IndexFileSource } from "../ocsp/index_source.ts";
import { getpwnam } from "../../ffi/libc.ts";
import { parseCertificate } from "../ocsp/certificate.ts";
import { revocationPointers } from "./certificate.ts";
import { pem } from "../der/mod.ts";
import { type CommandGroup } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { sharedOption } from "../cli/shared_options.ts";

const DAY_MS = 86_400_000;
/** Default lifetimes in days. */
export const DEFAULT_DAYS = { ca: 3650, client: 365, responder: 365, crl: 7 } as const;

const SIGNING_COMMANDS = ["init", "issue", "responder", "crl", "publish", "status"] as const;

/** `svcd ca`: its commands and the one table of their options. */
export const CA_COMMAND: CommandGroup = {
  name: "ca",
  summary: "the CA over a token key: client and OCSP responder certificates, revocation, CRL",
  usage: ["svcd ca COMMAND [options]"],
  description: "Certificates are signed by the token (the CA key never leaves it); the CA folder " +
    "is openssl ca-compatible.",
  commands: [
    {
      name: "init",
      synopsis: "--key-label LABEL [--key-type TYPE] [--subject DN] [--days N] [--ocsp-url URL] " +
        "[--crl-url URL [--crl-partitions N]] [--ca-issuers-url URL]",
      summary: "self-signed CA certificate over a token key; makes the CA folder",
      description: "Makes a self-signed CA certificate over the token key LABEL and the CA " +
        "folder around it (ca.pem, ca.json, index.txt, index.txt.attr, serial, certs/). With " +
        "--key-type the key is generated first; without it, LABEL must exist. The URLs, as " +
        "'svcd ca urls' records them, are checked before anything is made.",
    },
    {
      name: "urls",
      synopsis: "[--ocsp-url URL] [--crl-url URL [--crl-partitions N]] [--ca-issuers-url URL]",
      summary: "record where relying parties find revocation data; without options, print it",
      description: "Records in ca.json the public URLs every certificate issued from then on " +
        "carries: Authority Information Access (the OCSP URL: the public listener's POST /ocsp; " +
        "the CA issuers URL: its GET /certificates) and CRL Distribution Points (the CRL URL is a " +
        "folder: full.crl, and K.crl for partition K = serial mod N). The CRL URL and partitions " +
        "cannot change once recorded (issued certificates name them). Prints what is recorded " +
        "and what is missing.",
    },
    {
      name: "issue",
      synopsis: "(--csr FILE | --public-key FILE --subject DN) [--grant LABEL]… [--days N] " +
        "[--out FILE]",
      summary: "client certificate for the proxy from a CSR or a public key",
      description: "Issues a client certificate for the proxy (EKU clientAuth) from a PKCS#10 " +
        "request (PEM or DER; its self-signature is checked) or a public key (PEM PUBLIC KEY or " +
        "DER SPKI). Prints the subject as nginx's $ssl_client_s_dn writes it and the policy " +
        "line(s) to add. Records it in index.txt.",
    },
    {
      name: "responder",
      synopsis: "--key-label LABEL [--subject DN] [--days N] [--out FILE]",
      summary: "delegated OCSP responder certificate for a token key",
      description: "Issues a delegated OCSP responder certificate (EKU OCSPSigning, " +
        "id-pkix-ocsp-nocheck) for the token key LABEL (the daemon's --ocsp-label); writes it " +
        "to responder.pem in the CA folder.",
    },
    {
      name: "revoke",
      synopsis: "SERIAL --reason REASON",
      summary: "revoke a certificate by serial (index.txt)",
      description: "Marks the certificate SERIAL (hex, as 'svcd ca list' shows it) revoked in " +
        "index.txt (an atomic, fsynced rewrite; the daemon answers from it on its next query). " +
        "A daemon that keeps this CA's CRLs (svcd serve --ca-dir) lists it in them within " +
        "seconds, and the package's svcd-crl.path reloads nginx; without one, nginx learns of it " +
        "only from a CRL you sign: 'svcd ca crl' (with --out for nginx's copy), then " +
        "'systemctl reload nginx'.",
    },
    {
      name: "crl",
      synopsis: "[--out FILE] [--days N]",
      summary: "sign the CRL of the revoked certificates (nginx's ssl_crl)",
      description: "Signs a CRL (X.509 v2, RFC 5280) of every revoked certificate in index.txt " +
        "with the CA key: serial, revocation time and reason, authorityKeyIdentifier, and a " +
        "cRLNumber above every earlier one (the counter crlnumber, shared with openssl ca " +
        "-gencrl and the daemon, or the time in ms if larger). Writes crl.pem in the CA folder " +
        "(atomically) and FILE if given; this is nginx's ssl_crl. Without a daemon that keeps " +
        "the CRLs (svcd serve --ca-dir), run it after every 'svcd ca revoke' and before " +
        "nextUpdate (cron), then reload nginx: an expired CRL makes nginx refuse every client " +
        "of this CA.",
    },
    {
      name: "publish",
      synopsis: "DIR [--days N]",
      summary: "sign every CRL (full and partitions) into a folder a web server or CDN serves",
      description: "Signs the full CRL and, with partitions, each partition's CRL (critical " +
        "issuingDistributionPoint naming its URL) with the CA key, and writes them into DIR " +
        "atomically: full.crl, full.pem (PEM, for nginx's ssl_crl) and K.crl, the names under " +
        "the recorded CRL URL. Mirror DIR one-to-one at that URL. The daemon (svcd serve " +
        "--ca-dir) keeps the same files current by itself.",
    },
    {
      name: "status",
      synopsis: "CERT [--ocsp-label LABEL]",
      summary: "OCSP status of a certificate, answered by the daemon's OCSP core",
      description: "Asks the OCSP core the daemon uses about the certificate in file CERT (PEM " +
        "or DER), with the daemon's request matching and response assembly, signed by the CA " +
        "key or by LABEL (its responder.pem must be the certificate of LABEL). Prints good, " +
        "revoked (time, reason) or unknown.",
    },
    {
      name: "list",
      synopsis: "",
      summary: "the index as a table: status, serial, expiry, revocation time and reason, " +
        "subject",
    },
  ],
  options: [
    {
      flag: "key-label",
      value: "LABEL",
      commands: ["init", "responder"],
      group: "command",
      help: "the token key: the CA's (init) or the OCSP responder's (responder)",
    },
    {
      flag: "key-type",
      value: "TYPE",
      commands: ["init"],
      group: "command",
      help: `generate the CA key first, of this type: ${KEY_TYPE_NAMES.join(", ")}`,
    },
    {
      flag: "subject",
      value: "DN",
      commands: ["init", "issue", "responder"],
      group: "command",
      help: 'RFC 4514, most specific first, the form nginx writes (default: init "CN=svcd ' +
        'CA", responder "CN=svcd OCSP responder"; issue: the request\'s, required with ' +
        "--public-key)",
    },
    {
      flag: "days",
      value: "N",
      commands: ["init", "issue", "responder", "crl", "publish"],
      group: "command",
      help: `validity in days (default: ${DEFAULT_DAYS.ca} for init, ${DEFAULT_DAYS.client} for ` +
        `a client, ${DEFAULT_DAYS.responder} for a responder, never past the CA's own expiry; ` +
        `crl and publish: nextUpdate is now + ${DEFAULT_DAYS.crl} days)`,
    },
    {
      flag: "ocsp-url",
      value: "URL",
      commands: ["init", "urls"],
      group: "command",
      help: "the OCSP responder's URL (POST), e.g. http://pki.example.org/ocsp: AIA id-ad-ocsp",
    },
    {
      flag: "crl-url",
      value: "URL",
      commands: ["init", "urls"],
      group: "command",
      help: "the folder URL of the CRLs, e.g. http://pki.example.org/crl: CRL Distribution " +
        "Points name URL/full.crl, or URL/K.crl with partitions",
    },
    {
      flag: "crl-partitions",
      value: "N",
      commands: ["init", "urls"],
      group: "command",
      help: `CRL partitions, 1–${MAX_CRL_PARTITIONS} (default 1: one CRL); a certificate's is ` +
        "its serial mod N, fixed with the CRL URL",
    },
    {
      flag: "ca-issuers-url",
      value: "URL",
      commands: ["init", "urls"],
      group: "command",
      help: "where the CA certificate is published, e.g. http://pki.example.org/certificates: " +
        "AIA id-ad-caIssuers",
    },
    {
      flag: "csr",
      value: "FILE",
      commands: ["issue"],
      group: "command",
      help: "PKCS#10 request (PEM or DER) to certify",
    },
    {
      flag: "public-key",
      value: "FILE",
      commands: ["issue"],
      group: "command",
      help: "public key to certify (PEM PUBLIC KEY or DER SPKI), with --subject",
    },
    {
      flag: "grant",
      value: "LABEL",
      multiple: true,
      commands: ["issue"],
      group: "command",
      help: "key label the client may use: printed as a policy line (repeatable)",
    },
    {
      flag: "out",
      value: "FILE",
      commands: ["issue", "responder", "crl"],
      group: "command",
      help: "also write the certificate or CRL (PEM) there",
    },
    {
      flag: "reason",
      value: "REASON",
      commands: ["revoke"],
      group: "command",
      help: `RFC 5280 reason: ${revocableReasons().join(", ")}`,
    },
    {
      flag: "ocsp-label",
      value: "LABEL",
      commands: ["status"],
      group: "command",
      help: "the responder key that signs the answer (default: the CA key)",
    },
    {
      flag: "ca-dir",
      value: "DIR",
      default: DEFAULT_CA_DIR,
      group: "common",
      help: "the CA folder",
    },
    sharedOption("module", { group: "common" }),
    sharedOption("token", { group: "common" }),
    sharedOption("credential", {
      group: "common",
      note: `only the commands that sign (${SIGNING_COMMANDS.join(", ")}) log in`,
    }),
    sharedOption("user", {
      group: "common",
      note: "the CA folder and --out files are still written as root",
    }),
  ],
  groups: [
    { id: "command", title: "command options" },
    { id: "common", title: "common options" },
  ],
};

type Values = Record<string, string | string[] | boolean | undefined>;

/** A usage mistake: exit 2 with the command's help. */
class UsageError extends Error {}

function revocableReasons(): string[] {
  // removeFromCRL only undoes a hold in a delta CRL; privilegeWithdrawn and aACompromise have no
  // name in openssl's index.txt, so openssl could no longer read the file.
  return Object.keys(CRL_REASON).filter((name) => {
    const code = CRL_REASON[name as keyof typeof CRL_REASON];
    return code !== CRL_REASON.removeFromCRL && REASON_NAME[code] !== undefined;
  });
}

/** Runs `svcd ca <args>`; returns the exit code. Example: `await runCaCommand(["list"])`. */
export async function runCaCommand(args: string[]): Promise<number> {
  const line = parseCommandLine(CA_COMMAND, args, {
    allowPositionals: true,
    usageError: (message, command) => usage(command, message),
  });
  if ("exit" in line) return line.exit;
  const { command, values, positionals } = line;
  const ctx: Context = {
    dir: str(values["ca-dir"]) ?? DEFAULT_CA_DIR,
    common: {
      modulePath: str(values.module) ?? DEFAULT_MODULE,
      tokenLabel: str(values.token) ?? DEFAULT_TOKEN_LABEL,
      pin: str(values.credential) ? { encryptedFile: str(values.credential)! } : {},
      user: str(values.user),
    },
    values,
    positionals,
    // Progress goes to stderr: stdout carries what a script reads (status, policy lines, list).
    say: (line) => console.error(`svcd ca ${command}: ${line}`),
  };
  try {
    if (!["revoke", "status", "publish"].includes(command) && positionals.length > 0) {
      throw new UsageError(`unexpected argument '${positionals[0]}'`);
    }
    switch (command) {
      case "init":
        return await init(ctx);
      case "issue":
        return await issue(ctx);
      case "responder":
        return await responder(ctx);
      case "revoke":
        return await revoke(ctx);
      case "status":
        return await status(ctx);
      case "crl":
        return await crl(ctx);
      case "urls":
        return await urls(ctx);
      case "publish":
        return await publish(ctx);
      default:
        return await list(ctx);
    }
  } catch (err) {
    if (err instanceof UsageError) return usage(command, err.message);
    console.error(`svcd ca ${command}: ${err instanceof Error ? err.message : String(err)}`);
    return EXIT.failed;
  }
}

interface Context {
  dir: string;
  common: Common;
  values: Values;
  positionals: string[];
  say(line: string): void;
}

function str(v: string | string[] | boolean | undefined): string | undefined {
  if (Array.isArray(v)) return v.at(-1);
  return typeof v === "string" ? v : undefined;
}

/** A usage mistake: the message, then where the help is; exit 2. */
function usage(command: string | undefined, message: string): number {
  const where = command ? `svcd ca ${command}` : "svcd ca";
  console.error(`${where}: ${message}\nsee '${where} --help'`);
  return EXIT.usage;
}

function required(ctx: Context, name: string): string {
  const v = str(ctx.values[name]);
  if (!v) throw new UsageError(`--${name} is required`);
  return v;
}

function days(ctx: Context, fallback: number): number {
  const text = str(ctx.values.days);
  if (text === undefined) return fallback;
  if (!/^[1-9]\d{0,5}$/.test(text)) throw new UsageError(`--days must be 1–999999, not '${text}'`);
  return Number(text);
}

/** 16 random bytes, top bit clear and second bit set: a positive serial of full length. */
function randomSerial(): bigint {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] & 0x3f) | 0x40;
  return BigInt("0x" + bytes.toHex());
}

function signerOf(token: Token, key: SigningKey): Signer {
  return { keyType: key.keyType, sign: async (tbs) => (await token.sign(key, tbs)).signature };
}

/**
 * Logs in and runs `fn`. The PIN is read first, as the caller (decrypting --credential needs
 * root); with --user every token call is made as that user, while the CA folder and --out files
 * are written as the caller.
 */
async function withToken<T>(
  ctx: Context,
  fn: (token: Token, admin: TokenAdmin) => Promise<T>,
): Promise<T> {
  ctx.say(`logging in to token '${ctx.common.tokenLabel}' (${ctx.common.modulePath})`);
  const pin = await loadPin(ctx.common.pin ?? {});
  const { user } = ctx.common;
  try {
    const opened = await asUser(user, () => openLoggedIn(ctx.common, pin));
    const token = callsAsUser(opened, user);
    try {
      return await fn(token, callsAsUser(new TokenAdmin(opened), user));
    } finally {
      await token.close();
    }
  } finally {
    pin.fill(0);
  }
}

async function keyByLabel(token: Token, label: string, ctx: Context): Promise<SigningKey> {
  const key = await token.key(label);
  if (!key) {
    throw new Error(
      `no signing key labelled '${label}' on token '${ctx.common.tokenLabel}'; 'svcd token list' ` +
        `shows the keys (or pass --key-type to generate one with svcd ca init)`,
    );
  }
  if (!key.publicKeySpki) throw new Error(`key '${label}' (${key.keyType}) has no SPKI encoding`);
  return key;
}

/** The CA certificate and its token key, checked to belong together. */
async function caKey(token: Token, folder: CaFolder, ctx: Context) {
  const cert = pkijs.Certificate.fromBER(folder.caDer.slice().buffer);
  const spki = new Uint8Array(cert.subjectPublicKeyInfo.toSchema().toBER());
  const key = await keyByLabel(token, folder.config.keyLabel, ctx);
  if (!bytesEqual(spki, key.publicKeySpki!)) {
    throw new Error(
      `the token key '${folder.config.keyLabel}' is not the key of ${
        CaFolder.paths(ctx.dir).caCert
      } ` +
        `(another token, or the key was replaced); pass the --token that holds the CA key`,
    );
  }
  return { cert, spki, key };
}

/** notBefore now, notAfter after `n` days, never past the CA's own notAfter. */
function validity(n: number, ca?: pkijs.Certificate): { notBefore: Date; notAfter: Date } {
  const notBefore = new Date(Math.floor(Date.now() / 1000) * 1000);
  const notAfter = new Date(notBefore.getTime() + n * DAY_MS);
  const caEnd = ca?.notAfter.value;
  if (caEnd && notAfter > caEnd) {
    const left = Math.floor((caEnd.getTime() - notBefore.getTime()) / DAY_MS);
    throw new UsageError(
      `the CA expires on ${caEnd.toISOString()}; a certificate cannot outlive it: use --days ${left} or less`,
    );
  }
  return { notBefore, notAfter };
}

async function init(ctx: Context): Promise<number> {
  const label = required(ctx, "key-label");
  const type = str(ctx.values["key-type"]);
  if (type !== undefined && !isKeyTypeName(type)) {
    throw new UsageError(`unknown key type '${type}'; one of: ${KEY_TYPE_NAMES.join(", ")}`);
  }
  const subject = nameFromRfc4514(str(ctx.values.subject) ?? "CN=svcd CA");
  const { notBefore, notAfter } = validity(days(ctx, DEFAULT_DAYS.ca));
  const urls = urlOptions(ctx);
  const caPath = CaFolder.paths(ctx.dir).caCert;
  if (await Deno.stat(caPath).then(() => true, () => false)) {
    throw new Error(`${ctx.dir} already holds a CA (${caPath}); choose another --ca-dir`);
  }
  const der = await withToken(ctx, async (token, admin) => {
    let key: SigningKey;
    if (type) {
      ctx.say(`generating ${type} key '${label}' on the token`);
      key = await admin.generateKeyPair(label, type);
    } else key = await keyByLabel(token, label, ctx);
    ctx.say(`signing the CA certificate with '${label}' (${key.keyType})`);
    const spki = key.publicKeySpki!;
    return await buildCertificate({
      serial: randomSerial(),
      issuer: subject,
      subject,
      spki,
      notBefore,
      notAfter,
      extensions: caExtensions(spki),
    }, signerOf(token, key));
  });
  const folder = await CaFolder.create(ctx.dir, { keyLabel: label }, der, randomSerial());
  if (urls) await folder.locked(() => folder.recordUrls(urls));
  const daemonUser = ctx.common.user ? getpwnam(ctx.common.user) : null;
  if (daemonUser) await folder.shareCrlCounter(daemonUser.gid);
  ctx.say(`CA '${nginxSubject(subject)}' valid until ${notAfter.toISOString()}`);
  ctx.say(`wrote ${caPath} and the CA folder ${ctx.dir}`);
  console.log(`nginx: ssl_client_certificate ${caPath};`);
  console.log(
    `svcd serve: --public-socket PATH --revocation-db ${CaFolder.paths(ctx.dir).index} ` +
      `--ca-cert ${caPath} --ocsp-label ${label}`,
  );
  return EXIT.ok;
}

/** What is certified: subject and SPKI, from --csr or --public-key. */
async function subjectAndKey(ctx: Context) {
  const csr = str(ctx.values.csr), pubkey = str(ctx.values["public-key"]);
  const subjectText = str(ctx.values.subject);
  if (!csr === !pubkey) throw new UsageError("give exactly one of --csr FILE or --public-key FILE");
  if (pubkey && !subjectText) throw new UsageError("--public-key needs --subject DN");
  if (csr) {
    const request = await readRequest(await Deno.readFile(csr));
    ctx.say(`request ${csr}: self-signature verified`);
    return {
      subject: subjectText ? nameFromRfc4514(subjectText) : request.subject,
      spki: request.spki,
    };
  }
  return {
    subject: nameFromRfc4514(subjectText!),
    spki: readPublicKey(await Deno.readFile(pubkey!)),
  };
}

/**
 * Signs an end-entity certificate with the CA key and records it: an index line, certs/SERIAL.pem
 * and each of `copies`. `subjectKey` gives the SPKI once the token is open.
 */
async function issueEndEntity(
  ctx: Context,
  folder: CaFolder,
  subject: pkijs.RelativeDistinguishedNames,
  subjectKey: (token: Token) => Promise<Uint8Array>,
  lifetime: number,
  extensions: (
    spki: Uint8Array,
    caSpki: Uint8Array,
    pointers: pkijs.Extension[],
  ) => pkijs.Extension[],
  copies: string[],
): Promise<{ der: Uint8Array; serial: string; path: string; notAfter: Date }> {
  return await withToken(ctx, async (token) => {
    const ca = await caKey(token, folder, ctx);
    const spki = await subjectKey(token);
    const { notBefore, notAfter } = validity(lifetime, ca.cert);
    return await folder.locked(async () => {
      const serialNumber = await folder.takeSerial();
      const serial = serialHex(serialNumber);
      ctx.say(`signing certificate ${serial} with the CA key '${folder.config.keyLabel}'`);
      const der = await buildCertificate({
        serial: serialNumber,
        issuer: ca.cert.subject,
        subject,
        spki,
        notBefore,
        notAfter,
        extensions: extensions(
          spki,
          ca.spki,
          revocationPointers(folder.config.urls, serialNumber),
        ),
      }, signerOf(token, ca.key));
      // The index line first: a certificate the index does not know would be "unknown" to OCSP.
      await folder.appendIndex({
        status: "V",
        expires: notAfter.getTime(),
        serial,
        subject: slashSubject(subject),
      });
      const path = await folder.storeCertificate(serial, der, copies);
      return { der, serial, path, notAfter };
    });
  });
}

function outCopies(ctx: Context): string[] {
  const out = str(ctx.values.out);
  return out ? [out] : [];
}

async function issue(ctx: Context): Promise<number> {
  const lifetime = days(ctx, DEFAULT_DAYS.client);
  const folder = await CaFolder.open(ctx.dir);
  const { subject, spki } = await subjectAndKey(ctx);
  // Before any signing: a subject the tool cannot print as nginx does is refused here.
  const nginx = nginxSubject(subject);
  if (nginx === "") {
    throw new UsageError(
      "the certificate subject would be empty: the proxy would pass an empty identity, which the " +
        "daemon refuses; give --subject DN",
    );
  }
  const slash = slashSubject(subject);
  const grants = (ctx.values.grant as string[] | undefined) ?? [];
  const bad = grants.find((g) => g === "" || /[\t\n\r]/.test(g));
  if (bad !== undefined) throw new UsageError("--grant needs a key label without TAB or newline");
  const done = await issueEndEntity(
    ctx,
    folder,
    subject,
    () => Promise.resolve(spki),
    lifetime,
    clientExtensions,
    outCopies(ctx),
  );
  console.log(
    `certificate ${done.serial} written to ${done.path} (valid until ${done.notAfter.toISOString()})`,
  );
  console.log(`\nsubject as nginx passes it in $ssl_client_s_dn (RFC 4514):\n${nginx}`);
  console.log(
    `\npolicy line${
      grants.length === 1 ? "" : "s"
    } to add to the policy file (subject TAB key label):`,
  );
  for (const label of grants.length > 0 ? grants : ["KEY-LABEL"]) console.log(`${nginx}\t${label}`);
  if (grants.length === 0) {
    console.log("(replace KEY-LABEL with a key label, or pass --grant LABEL)");
  }
  console.log(
    `\nwarning: the slash form '${slash}' (what openssl and index.txt show) would never match: ` +
      `the daemon compares the subject byte for byte with what the proxy sends`,
  );
  return EXIT.ok;
}

async function responder(ctx: Context): Promise<number> {
  const label = required(ctx, "key-label");
  const lifetime = days(ctx, DEFAULT_DAYS.responder);
  const folder = await CaFolder.open(ctx.dir);
  const subject = nameFromRfc4514(str(ctx.values.subject) ?? "CN=svcd OCSP responder");
  const path = CaFolder.paths(ctx.dir).responder;
  const done = await issueEndEntity(
    ctx,
    folder,
    subject,
    async (token) => (await keyByLabel(token, label, ctx)).publicKeySpki!,
    lifetime,
    responderExtensions,
    [path, ...outCopies(ctx)],
  );
  ctx.say(
    `responder certificate ${done.serial} for key '${label}' written to ${path} and ${done.path}`,
  );
  ctx.say(`valid until ${done.notAfter.toISOString()}`);
  console.log(`svcd serve: --ocsp-label ${label} --ocsp-cert ${path}`);
  return EXIT.ok;
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

async function revoke(ctx: Context): Promise<number> {
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

async function crl(ctx: Context): Promise<number> {
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

async function publish(ctx: Context): Promise<number> {
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
function urlOptions(ctx: Context): CaUrls | undefined {
  const urls: CaUrls = {};
  try {
    const url = (flag: string) => {
      const v = str(ctx.values[flag]);
      return v === undefined ? undefined : checkUrl(v, `--${flag}`);
    };
    urls.ocsp = url("ocsp-url");
    urls.crl = url("crl-url");
    urls.caIssuers = url("ca-issuers-url");
  } catch (err) {
    if (err instanceof UrlError) throw new UsageError(err.message);
    throw err;
  }
  const n = str(ctx.values["crl-partitions"]);
  if (n !== undefined) {
    const value = /^[0-9]{1,4}$/.test(n) ? Number(n) : NaN;
    if (!(value >= 1 && value <= MAX_CRL_PARTITIONS)) {
      throw new UsageError(`--crl-partitions must be 1–${MAX_CRL_PARTITIONS}, not '${n}'`);
    }
    urls.crlPartitions = value;
  }
  const given = Object.values(urls).some((v) => v !== undefined);
  return given ? urls : undefined;
}

async function urls(ctx: Context): Promise<number> {
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

async function status(ctx: Context): Promise<number> {
  if (ctx.positionals.length !== 1) throw new UsageError("give exactly one CERT file");
  const folder = await CaFolder.open(ctx.dir);
  const der = derFromPem(await Deno.readFile(ctx.positionals[0]), "CERTIFICATE");
  const label = str(ctx.values["ocsp-label"]);
  const answer = await withToken(ctx, (token) => caStatus(token, folder, der, label));
  console.log(answer);
  return EXIT.ok;
}

function time(ms: number | undefined): string {
  return ms === undefined ? "-" : new Date(ms).toISOString().replace(".000Z", "Z");
}

/**
 * The index as text columns. Example: `formatList(entries)`.
 *
 * @example
 * ```ts
 * import { parseIndex } from "../ocsp/index_db.ts";
 * declare const text: string;
 * console.log(formatList(parseIndex(text)));
 * ```
 */
export function formatList(entries: IndexEntry[]): string {
  const rows = [["STATUS", "SERIAL", "EXPIRES", "REVOKED", "REASON", "SUBJECT"]];
  for (const e of entries) {
    rows.push([
      e.status,
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

async function list(ctx: Context): Promise<number> {
  const folder = await CaFolder.open(ctx.dir);
  const { entries } = await folder.readIndex();
  console.log(formatList(entries));
  return EXIT.ok;
}

// Runnable on its own, as lib/token_admin/cli.ts is; main.ts dispatches `svcd ca …` here as well.
if (import.meta.main) {
  Deno.exit(await runCaCommand(Deno.args));
}
