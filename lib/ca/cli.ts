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
import { COMMAND_AND_COMMON, type CommandGroup } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { cliOptions, OptionReader } from "../cli/option_table.ts";
import { type Context, usage, UsageError } from "./commands/context.ts";
import { CA_OPTIONS, type CaOptions } from "./commands/options.ts";
import { init, issue, responder } from "./commands/issue.ts";
import { certify } from "./commands/certify.ts";
import { crl, list, publish, revoke, status, urls } from "./commands/revocation.ts";

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
  options: cliOptions(CA_OPTIONS),
  groups: COMMAND_AND_COMMON,
};

/** Runs `svcd ca <args>`; returns the exit code. Example: `await runCaCommand(["list"])`. */
export async function runCaCommand(args: string[]): Promise<number> {
  const line = parseCommandLine(CA_COMMAND, args, {
    allowPositionals: true,
    usageError: (message, command) => usage(command, message),
  });
  if ("exit" in line) return line.exit;
  const { command, positionals } = line;
  const options: CaOptions = new OptionReader(
    CA_OPTIONS,
    line.values,
    (_flag, message) => new UsageError(message),
  );
  let ctx: Context;
  try {
    ctx = context(command, options, positionals);
  } catch (err) {
    if (err instanceof UsageError) return usage(command, err.message);
    throw err;
  }
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

/** What every command of `svcd ca` is given. */
function context(command: string, options: CaOptions, positionals: string[]): Context {
  const credential = options.get("credential");
  return {
    dir: options.get("ca-dir"),
    common: {
      modulePath: options.get("module"),
      tokenLabel: options.get("token"),
      pin: credential ? { encryptedFile: credential } : {},
      user: options.get("user"),
    },
    options,
    positionals,
    // Progress goes to stderr: stdout carries what a script reads (status, policy lines, list).
    say: (line) => console.error(`svcd ca ${command}: ${line}`),
  };
}

// Runnable on its own, as lib/token_admin/cli.ts is; main.ts dispatches `svcd ca …` here as well.
if (import.meta.main) {
  Deno.exit(await runCaCommand(Deno.args));
}
