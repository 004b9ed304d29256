/**
 * `svcd client keys | sign | verify`: the client side of svcd, reaching it through the operator's
 * proxy over HTTPS with a client certificate.
 *
 * @example
 * ```sh
 * export SVCD_ADDR=https://sign.example.org SVCD_CACERT=ca.pem \
 *   SVCD_CLIENT_CERT=me.pem SVCD_CLIENT_KEY=me.key
 * svcd client sign --key-label release release.tar.gz
 * svcd client verify --key-label release release.tar.gz release.tar.gz.sig
 * ```
 */
import { ClientError, NOT_CAPABLE_HINT } from "./errors.ts";
import { type RetryWait, SvcdConnection } from "./http.ts";
import {
  DEFAULT_MAX_BODY,
  DEFAULT_RETRIES,
  ENVIRONMENT,
  resolveSettings,
  type SettingFlags,
  type Settings,
} from "./settings.ts";
import {
  isContainerFormat,
  isSignatureFormat,
  MalformedSignature,
  SIGNATURE_FORMATS,
  type SignatureFormat,
} from "./format.ts";
import { listKeys, type Print, signFiles, verifyFile } from "./commands.ts";
import { verifyCms } from "./containers/verify_cms.ts";
import { type CommandGroup, headings } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { cliOptions, OptionReader, optionTable } from "../cli/option_table.ts";

/** The headings of `svcd client --help`. */
const CLIENT_HEADINGS = headings({
  command: "command options",
  connection: "connection (flags, else the environment)",
});

/** The options of `svcd client`, read through typed accessors. */
const CLIENT_OPTIONS = optionTable(CLIENT_HEADINGS, {
  "key-label": {
    kind: "text",
    value: "LABEL",
    commands: ["sign", "verify"],
    group: "command",
    help: "the key to use ('svcd client keys' lists yours)",
  },
  out: {
    kind: "path",
    value: "FILE",
    commands: ["sign"],
    group: "command",
    help: "write the signature there (one FILE only; default FILE.sig)",
  },
  "out-dir": {
    kind: "path",
    value: "DIR",
    commands: ["keys"],
    group: "command",
    help: "write each public key as DIR/LABEL.pem (and certificate and chain as LABEL.crt.pem)",
  },
  format: {
    kind: "text",
    value: "FORMAT",
    fallback: "raw",
    commands: ["sign", "verify"],
    group: "command",
    help: "raw (ECDSA as r||s), der (ECDSA only: the X9.62 form openssl takes), base64 " +
      "(of raw), cms (a detached CMS SignedData, DER, with the key's certificate and chain: " +
      "openssl cms -verify -binary -inform DER -content FILE -CAfile CA checks it) or jws " +
      "(sign only: JWS compact serialisation, x5c or kid)",
  },
  detached: {
    kind: "switch",
    commands: ["sign"],
    group: "command",
    help: "--format jws: leave the payload out (RFC 7515 appendix F: header..signature)",
  },
  "signer-ca-cert": {
    kind: "path",
    value: "FILE",
    commands: ["verify"],
    group: "command",
    help: "--format cms: the PEM CA certificate(s) the signer's certificate must chain to",
  },
  remote: {
    kind: "switch",
    commands: ["verify"],
    group: "command",
    help: "have svcd's /verify check the signature instead of checking it here",
  },
  addr: {
    kind: "text",
    value: "URL",
    group: "connection",
    help: "https://HOST[:PORT] of svcd's proxy (default $SVCD_ADDR)",
  },
  "ca-cert": {
    kind: "path",
    value: "FILE",
    group: "connection",
    help: "PEM CA that issued the proxy's server certificate (default $SVCD_CACERT)",
  },
  "client-cert": {
    kind: "path",
    value: "FILE",
    group: "connection",
    help: "your PEM client certificate (default $SVCD_CLIENT_CERT)",
  },
  "client-key": {
    kind: "path",
    value: "FILE",
    group: "connection",
    help: "its PEM private key (default $SVCD_CLIENT_KEY)",
  },
  retries: {
    kind: "count",
    value: "N",
    fallback: DEFAULT_RETRIES,
    min: 0,
    max: 100,
    group: "connection",
    help: "how often a 429 or 503 is retried after its Retry-After",
  },
  "max-body": {
    kind: "count",
    min: 1,
    max: 2 ** 40,
    value: "BYTES",
    group: "connection",
    help: "the largest file sent whole (with --remote, with its signature). Default: the " +
      "limit svcd states in GET /token (max_body, its --max-body), else " +
      `${DEFAULT_MAX_BODY} (svcd's default). It only lowers svcd's stated limit, e.g. to a ` +
      "smaller proxy limit; a larger value is ignored, as svcd would refuse the body",
  },
  "insecure-http": {
    kind: "switch",
    group: "connection",
    help: "allow --addr unix:/PATH, svcd's socket without TLS (tests on one host only)",
  },
});

/** `svcd client`: its commands and the one table of their options. */
export const CLIENT_COMMAND: CommandGroup = {
  name: "client",
  summary: "sign and verify files through svcd's proxy with a client certificate",
  usage: ["svcd client COMMAND [options]"],
  commands: [
    {
      name: "keys",
      synopsis: "[--out-dir DIR]",
      summary: "your keys: label, type, the digest modes svcd takes for each and its " +
        "certificate's validity; with --out-dir, each public key as DIR/LABEL.pem and a " +
        "certified key's certificate and chain as DIR/LABEL.crt.pem",
    },
    {
      name: "sign",
      synopsis: "--key-label LABEL [--out FILE] [--format FORMAT] [--detached] FILE…",
      summary: "sign each FILE into FILE.sig (cms: FILE.p7s, jws: FILE.jws; or --out for one " +
        "FILE). The file is hashed here, " +
        "as it is read, and only its digest is sent where the key type has a digest mode " +
        "(ECDSA, RSA; ML-DSA sends mu); otherwise the file itself is sent, and a file " +
        "larger than the server takes (see --max-body) is refused before anything is sent, " +
        "naming the limit. Each signature is verified " +
        "here with the key's public key before it is written: one that does not verify is " +
        "never written (exit 1)",
    },
    {
      name: "verify",
      synopsis: "(--key-label LABEL [--remote] [--format FORMAT] | --format cms " +
        "--signer-ca-cert FILE) FILE SIG",
      summary: "exit 0 when SIG is the key's valid signature of FILE, 1 when not, also when " +
        "SIG does not parse in its --format (as openssl dgst -verify); checked here with the " +
        "public key, or by svcd's /verify with --remote. A CMS SignedData is checked here " +
        "against FILE and --signer-ca-cert alone (its signer is its certificate; no key label, " +
        "no svcd)",
    },
  ],
  options: cliOptions(CLIENT_OPTIONS),
  groups: CLIENT_HEADINGS,
};

/** Test seams: where lines go, the environment, how a Retry-After is waited out. */
export interface ClientIo {
  print?: Print;
  env?: Record<string, string | undefined>;
  wait?: RetryWait;
}

/** The parsed options of a `svcd client` command line. */
type ClientOptions = OptionReader<typeof CLIENT_OPTIONS>;

/** Runs `svcd client <args>`; returns the exit code. */
export async function runClientCommand(args: string[], io: ClientIo = {}): Promise<number> {
  const line = parseCommandLine(CLIENT_COMMAND, args, {
    allowPositionals: true,
    usageError: (message) => usageError(message),
  });
  if ("exit" in line) return line.exit;
  const { command, positionals } = line;
  const print = io.print ?? ((line: string) => console.log(line));
  let conn: SvcdConnection | undefined;
  try {
    const options: ClientOptions = new OptionReader(
      CLIENT_OPTIONS,
      line.values,
      (_flag, message) => usage(message),
    );
    const job = checkCommand(command, options, positionals);
    if (typeof job === "object") return await job.offline(print);
    const flags = settingFlags(options);
    const settings = io.env ? resolveSettings(flags, io.env) : settingsFromProcess(flags);
    conn = await SvcdConnection.open(settings, io.wait);
    return await job(conn, settings, print);
  } catch (err) {
    if (err instanceof ClientError) {
      if (err.usage) return usageError(err.message);
      console.error(`svcd client ${command}: ${err.message}`);
      return EXIT.failed;
    }
    if (err instanceof Deno.errors.NotCapable) {
      console.error(`svcd client ${command}: ${err.message.split("\n")[0]}: ${NOT_CAPABLE_HINT}`);
      return EXIT.failed;
    }
    throw err;
  } finally {
    conn?.close();
  }
}

type Job = (conn: SvcdConnection, settings: Settings, print: Print) => Promise<number>;
/** A job that needs no svcd (a CMS SignedData is checked against its CA file alone). */
type OfflineJob = { offline: (print: Print) => Promise<number> };

/** The command's own options, checked before anything is read or sent. */
function checkCommand(
  command: string,
  options: ClientOptions,
  positionals: string[],
): Job | OfflineJob {
  switch (command) {
    case "keys": {
      if (positionals.length > 0) throw usage(`keys takes no FILE ('${positionals[0]}')`);
      const outDir = options.get("out-dir");
      return async (conn, _settings, print) => {
        await listKeys(conn, outDir, print);
        return EXIT.ok;
      };
    }
    case "sign": {
      const keyLabel = needKeyLabel(options);
      const format = formatOf(options);
      const detached = options.get("detached");
      if (positionals.length === 0) throw usage("sign needs at least one FILE");
      if (detached && format !== "jws") {
        throw usage("--detached is a JWS form: give it with --format jws");
      }
      return async (conn, settings, print) => {
        await signFiles(conn, {
          keyLabel,
          files: positionals,
          out: options.get("out"),
          format,
          detached,
          maxBody: settings.maxBody,
        }, print);
        return EXIT.ok;
      };
    }
    default: {
      const format = formatOf(options);
      if (positionals.length !== 2) throw usage("verify needs FILE and SIG");
      if (format === "cms") return checkCmsVerify(options, positionals);
      if (options.isGiven("signer-ca-cert")) {
        throw usage("--signer-ca-cert is for --format cms, whose signer is a certificate");
      }
      if (isContainerFormat(format)) {
        throw usage(
          `--format ${format} is not verified here: check a JWS with a JOSE library and the ` +
            "key from its x5c certificate (or 'svcd client keys --out-dir')",
        );
      }
      const keyLabel = needKeyLabel(options);
      const remote = options.get("remote");
      return async (conn, settings, print) => {
        let valid: boolean;
        try {
          valid = await verifyFile(conn, {
            keyLabel,
            file: positionals[0],
            signature: positionals[1],
            format,
            remote,
            maxBody: settings.maxBody,
          });
        } catch (err) {
          // The same outcome as a signature that does not verify; stderr gets the reason.
          if (err instanceof MalformedSignature) print("Verification failure");
          throw err;
        }
        print(valid ? "Verified OK" : "Verification failure");
        return valid ? EXIT.ok : EXIT.failed;
      };
    }
  }
}

/** `verify --format cms FILE SIG --signer-ca-cert CA`: here, without svcd. */
function checkCmsVerify(options: ClientOptions, positionals: string[]): OfflineJob {
  const caFile = options.get("signer-ca-cert");
  if (caFile === undefined) {
    throw usage(
      "--format cms needs --signer-ca-cert FILE: the PEM CA the signer's certificate must chain to",
    );
  }
  if (options.isGiven("key-label") || options.get("remote")) {
    throw usage(
      "--format cms is checked here against --signer-ca-cert: its signer is the certificate " +
        "inside it, so --key-label and --remote do not apply",
    );
  }
  const [file, signature] = positionals;
  return {
    offline: async (print) => {
      let outcome;
      try {
        outcome = await verifyCms(file, signature, caFile);
      } catch (err) {
        if (err instanceof MalformedSignature) print("Verification failure");
        throw err;
      }
      if (!outcome.valid) console.error(`svcd client verify: ${outcome.reason}`);
      print(outcome.valid ? "Verified OK" : "Verification failure");
      return outcome.valid ? EXIT.ok : EXIT.failed;
    },
  };
}

function needKeyLabel(options: ClientOptions): string {
  const label = options.get("key-label");
  if (label === undefined) {
    throw usage("--key-label L is required: the key to use ('svcd client keys' lists yours)");
  }
  return label;
}

function formatOf(options: ClientOptions): SignatureFormat {
  const format = options.get("format");
  if (!isSignatureFormat(format)) {
    throw usage(`--format '${format}': one of ${SIGNATURE_FORMATS.join(", ")}`);
  }
  return format;
}

/** The connection options as given, for the settings to put over the environment. */
function settingFlags(options: ClientOptions): SettingFlags {
  return {
    addr: options.get("addr"),
    "ca-cert": options.get("ca-cert"),
    "client-cert": options.get("client-cert"),
    "client-key": options.get("client-key"),
    "insecure-http": options.get("insecure-http"),
    retries: options.get("retries"),
    "max-body": options.get("max-body"),
  };
}

function usage(message: string): ClientError {
  return new ClientError(message, { usage: true });
}

/** A usage mistake: the message, then where the help is; exit 2. */
function usageError(message: string): number {
  console.error(`svcd client: ${message}\nsee 'svcd client --help'`);
  return EXIT.usage;
}

/**
 * The settings from the flags and this process's SVCD_* variables; nothing else is read. A
 * variable this process may not read (the daemon's permission set, as `deno task svcd` has it)
 * counts as unset, so the flags still work; a setting missing then is answered in one line that
 * says which variables were out of reach and how to run the client with its own permissions.
 */
function settingsFromProcess(flags: SettingFlags): Settings {
  const env: Record<string, string | undefined> = {};
  const unreadable: string[] = [];
  for (const [name, flag] of Object.entries(ENVIRONMENT)) {
    const allowed = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
    env[name] = allowed ? Deno.env.get(name) : undefined;
    if (!allowed && flags[flag.slice(2) as keyof SettingFlags] === undefined) unreadable.push(name);
  }
  try {
    return resolveSettings(flags, env);
  } catch (err) {
    const missed = unreadable.filter((name) => (err as Error).message.includes(name));
    if (!(err instanceof ClientError) || missed.length === 0) throw err;
    throw new ClientError(
      `${err.message}; this svcd may not read ${missed.join(", ")}: ${NOT_CAPABLE_HINT}`,
    );
  }
}
