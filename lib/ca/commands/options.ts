/**
 * The options of `svcd ca`, one table for every command, read through typed accessors
 * (lib/cli/option_table.ts): a misspelt flag does not compile.
 */
import { KEY_TYPE_NAMES } from "../../token/mod.ts";
import { DEFAULT_CA_DIR } from "../store.ts";
import { MAX_CRL_PARTITIONS } from "../urls.ts";
import { PROFILES } from "../certificate.ts";
import { revocableReasons } from "./revocation.ts";
import { sharedSpec } from "../../cli/shared_options.ts";
import { type OptionReader, optionTable } from "../../cli/option_table.ts";
import { COMMAND_AND_COMMON } from "../../cli/options.ts";
import { DEFAULT_DAYS } from "./context.ts";

/** The commands that sign with the CA key, so log in. */
export const SIGNING_COMMANDS = [
  "init",
  "issue",
  "certify",
  "responder",
  "crl",
  "publish",
  "status",
] as const;

/** Every option of `svcd ca`, with the commands it applies to. */
export const CA_OPTIONS = optionTable(COMMAND_AND_COMMON, {
  "key-label": {
    kind: "text",
    value: "LABEL",
    commands: ["init", "certify", "responder"],
    group: "command",
    help: "the token key: the CA's (init), the one to certify (certify) or the OCSP " +
      "responder's (responder)",
  },
  profile: {
    kind: "text",
    value: "PROFILE",
    commands: ["certify"],
    group: "command",
    help: `what the key is certified for: ${PROFILES.join(", ")}`,
  },
  dns: {
    kind: "text",
    value: "NAME",
    multiple: true,
    commands: ["certify"],
    group: "command",
    help: "a DNS name of the TLS server (subjectAltName; repeatable; needed with --profile " +
      "tls-server, the first is the default CN)",
  },
  "key-type": {
    kind: "text",
    value: "TYPE",
    commands: ["init"],
    group: "command",
    help: `generate the CA key first, of this type: ${KEY_TYPE_NAMES.join(", ")}`,
  },
  subject: {
    kind: "text",
    value: "DN",
    commands: ["init", "issue", "certify", "responder"],
    group: "command",
    help: 'RFC 4514, most specific first, the form nginx writes (default: init "CN=svcd ' +
      'CA", responder "CN=svcd OCSP responder", certify "CN=" the first --dns name or the ' +
      "key label; issue: the request's, required with --public-key)",
  },
  days: {
    kind: "count",
    min: 1,
    max: 999_999,
    value: "N",
    commands: ["init", "issue", "certify", "responder", "crl", "publish"],
    group: "command",
    help: `validity in days (default: ${DEFAULT_DAYS.ca} for init, ${DEFAULT_DAYS.client} for ` +
      `a client or a certified key, ${DEFAULT_DAYS.responder} for a responder, never past ` +
      `the CA's own expiry; ` +
      `crl and publish: nextUpdate is now + ${DEFAULT_DAYS.crl} days)`,
  },
  "ocsp-url": {
    kind: "text",
    value: "URL",
    commands: ["init", "urls"],
    group: "command",
    help: "the OCSP responder's URL (POST), e.g. http://pki.example.org/ocsp: AIA id-ad-ocsp",
  },
  "crl-url": {
    kind: "text",
    value: "URL",
    commands: ["init", "urls"],
    group: "command",
    help: "the folder URL of the CRLs, e.g. http://pki.example.org/crl: CRL Distribution " +
      "Points name URL/full.crl, or URL/K.crl with partitions",
  },
  "crl-partitions": {
    kind: "count",
    min: 1,
    max: MAX_CRL_PARTITIONS,
    value: "N",
    commands: ["init", "urls"],
    group: "command",
    help: `CRL partitions, 1–${MAX_CRL_PARTITIONS} (default 1: one CRL); a certificate's is ` +
      "its serial mod N, fixed with the CRL URL",
  },
  "ca-issuers-url": {
    kind: "text",
    value: "URL",
    commands: ["init", "urls"],
    group: "command",
    help: "where the CA certificate is published, e.g. http://pki.example.org/certificates: " +
      "AIA id-ad-caIssuers",
  },
  csr: {
    kind: "path",
    value: "FILE",
    commands: ["issue"],
    group: "command",
    help: "PKCS#10 request (PEM or DER) to certify",
  },
  "public-key": {
    kind: "path",
    value: "FILE",
    commands: ["issue"],
    group: "command",
    help: "public key to certify (PEM PUBLIC KEY or DER SPKI), with --subject",
  },
  grant: {
    kind: "text",
    value: "LABEL",
    multiple: true,
    commands: ["issue"],
    group: "command",
    help: "key label the client may use: printed as a policy line (repeatable)",
  },
  out: {
    kind: "path",
    value: "FILE",
    commands: ["issue", "certify", "responder", "crl"],
    group: "command",
    help: "also write the certificate or CRL (PEM) there",
  },
  reason: {
    kind: "text",
    value: "REASON",
    commands: ["revoke"],
    group: "command",
    help: `RFC 5280 reason: ${revocableReasons().join(", ")}`,
  },
  "ocsp-label": {
    kind: "text",
    value: "LABEL",
    commands: ["status"],
    group: "command",
    help: "the responder key that signs the answer (default: the CA key)",
  },
  "ca-dir": {
    kind: "path",
    value: "DIR",
    fallback: DEFAULT_CA_DIR,
    group: "common",
    help: "the CA folder",
  },
  module: sharedSpec("module", { group: "common" }),
  token: sharedSpec("token", { group: "common" }),
  credential: sharedSpec("credential", {
    group: "common",
    note: `only the commands that sign (${SIGNING_COMMANDS.join(", ")}) log in`,
  }),
  user: sharedSpec("user", {
    group: "common",
    note: "the CA folder and --out files are still written as root",
  }),
});

/** The parsed options of a `svcd ca` command line. */
export type CaOptions = OptionReader<typeof CA_OPTIONS>;
