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
import { DEFAULT_MODULE, DEFAULT_TOKEN_LABEL, KEY_TYPE_NAMES } from "../token/mod.ts";
import { DEFAULT_CA_DIR } from "./store.ts";
import { MAX_CRL_PARTITIONS } from "./urls.ts";
import { type CommandGroup } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { sharedOption } from "../cli/shared_options.ts";

import { type Context, DEFAULT_DAYS, str, usage, UsageError } from "./commands/context.ts";
import { init, issue, responder } from "./commands/issue.ts";
import { certify } from "./commands/certify.ts";
import { PROFILES } from "./certificate.ts";
import {
  crl,
  list,
  publish,
  revocableReasons,
  revoke,
  status,
  urls,
} from "./commands/revocation.ts";

const SIGNING_COMMANDS = [
  "init",
  "issue",
  "certify",
  "responder",
  "crl",
  "publish",
  "status",
] as const;

/** `svcd ca`: its commands and the one table of their options. */
export const CA_COMMAND: CommandGroup = {
  name: "ca",
  summary: "the CA over a token key: client, token key and OCSP responder certificates, " +
    "revocation, CRL",
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
      name: "certify",
      synopsis: "--key-label LABEL --profile PROFILE [--dns NAME]… [--subject DN] [--days N] " +
        "[--out FILE]",
      summary: "certificate for a token key (code or document signing, TLS), stored in the token",
      description: "Issues a certificate for the token key LABEL with the keyUsage and " +
        "extendedKeyUsage of PROFILE (code-signing: codeSigning; document-signing: " +
        "contentCommitment, documentSigning (RFC 9336) and emailProtection; tls-server: " +
        "serverAuth and a subjectAltName of the --dns names, keyEncipherment too for an RSA " +
        "key; tls-client: clientAuth), and AIA and CDP where the CA folder records URLs. The " +
        "public key is read from the token key. Records it in index.txt and certs/ (OCSP and " +
        "CRLs cover it) and stores it on the token as a CKO_CERTIFICATE object with the key's " +
        "CKA_ID and CKA_LABEL, where GET /token and PKCS#11 applications find it. Certifying a " +
        "key again replaces its certificate (the old object is destroyed once the new one is " +
        "stored) and says whether the old one had expired.",
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
      commands: ["init", "certify", "responder"],
      group: "command",
      help: "the token key: the CA's (init), the one to certify (certify) or the OCSP " +
        "responder's (responder)",
    },
    {
      flag: "profile",
      value: "PROFILE",
      commands: ["certify"],
      group: "command",
      help: `what the key is certified for: ${PROFILES.join(", ")}`,
    },
    {
      flag: "dns",
      value: "NAME",
      multiple: true,
      commands: ["certify"],
      group: "command",
      help: "a DNS name of the TLS server (subjectAltName; repeatable; needed with --profile " +
        "tls-server, the first is the default CN)",
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
      commands: ["init", "issue", "certify", "responder"],
      group: "command",
      help: 'RFC 4514, most specific first, the form nginx writes (default: init "CN=svcd ' +
        'CA", responder "CN=svcd OCSP responder", certify "CN=" the first --dns name or the ' +
        "key label; issue: the request's, required with --public-key)",
    },
    {
      flag: "days",
      value: "N",
      commands: ["init", "issue", "certify", "responder", "crl", "publish"],
      group: "command",
      help: `validity in days (default: ${DEFAULT_DAYS.ca} for init, ${DEFAULT_DAYS.client} for ` +
        `a client or a certified key, ${DEFAULT_DAYS.responder} for a responder, never past ` +
        `the CA's own expiry; ` +
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
      commands: ["issue", "certify", "responder", "crl"],
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
      case "certify":
        return await certify(ctx);
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

// Runnable on its own, as lib/token_admin/cli.ts is; main.ts dispatches `svcd ca …` here as well.
if (import.meta.main) {
  Deno.exit(await runCaCommand(Deno.args));
}
