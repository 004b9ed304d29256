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
import { parseArgs } from "node:util";
import { ClientError, NOT_CAPABLE_HINT } from "./errors.ts";
import { type RetryWait, SvcdConnection } from "./http.ts";
import {
  DEFAULT_MAX_BODY,
  DEFAULT_RETRIES,
  ENVIRONMENT,
  resolveSettings,
  type Settings,
} from "./settings.ts";
import { isSignatureFormat, SIGNATURE_FORMATS, type SignatureFormat } from "./format.ts";
import { listKeys, type Print, signFiles, verifyFile } from "./commands.ts";

const USAGE = `usage: svcd client <command> [options]

commands:
  keys [--out-dir DIR]
        your keys: label, type and the digest modes svcd takes for each; with --out-dir,
        each public key as DIR/LABEL.pem
  sign --key-label L [--out SIG] [--format raw|der|base64] FILE…
        sign each FILE into FILE.sig (or --out for one FILE). The file is hashed here, as it is
        read, and only its digest is sent where the key type has a digest mode (ECDSA, RSA-PSS;
        ML-DSA sends mu); otherwise the file itself is sent, and a file larger than --max-body is
        refused before anything is sent. Each signature is verified here with the key's public
        key before it is written: one that does not verify is never written (exit 1).
        --format: raw (default; ECDSA as r||s), der (ECDSA only: the X9.62 form openssl
        takes), base64 (of raw)
  verify --key-label L [--remote] [--format raw|der|base64] FILE SIG
        exit 0 when SIG is the key's valid signature of FILE, 1 when not (as openssl dgst
        -verify); checked here with the public key, or by svcd's /verify with --remote

connection (flags, else the environment):
  --addr URL          https://HOST[:PORT] of svcd's proxy (SVCD_ADDR)
  --ca-cert FILE      PEM CA that issued the proxy's server certificate (SVCD_CACERT)
  --client-cert FILE  your PEM client certificate (SVCD_CLIENT_CERT)
  --client-key FILE   its PEM private key (SVCD_CLIENT_KEY)
  --retries N         how often a 429 or 503 is retried after its Retry-After (default
                      ${DEFAULT_RETRIES})
  --max-body BYTES    the largest file sent whole: svcd's --max-body (default ${DEFAULT_MAX_BODY})
  --insecure-http     allow --addr http://… or unix:/PATH without TLS (tests on one host only)

exit codes: 0 done (verify: valid), 1 failed (verify: not valid; the message says why and what
to do), 2 usage.
`;

/** Test seams: where lines go, the environment, how a Retry-After is waited out. */
export interface ClientIo {
  print?: Print;
  env?: Record<string, string | undefined>;
  wait?: RetryWait;
}

type Values = Record<string, string | boolean | undefined>;

/**
 * Runs `svcd client <args>`; returns the exit code.
 *
 * @example
 * ```ts ignore
 * Deno.exit(await runClientCommand(["keys"]));
 * ```
 */
export async function runClientCommand(args: string[], io: ClientIo = {}): Promise<number> {
  const [command, ...rest] = args;
  if (command === undefined || command === "-h" || command === "--help" || command === "help") {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (!["keys", "sign", "verify"].includes(command)) {
    return usageError(`unknown command '${command}'`);
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      strict: true,
      allowPositionals: true,
      options: {
        addr: { type: "string" },
        "ca-cert": { type: "string" },
        "client-cert": { type: "string" },
        "client-key": { type: "string" },
        "insecure-http": { type: "boolean" },
        retries: { type: "string" },
        "max-body": { type: "string" },
        "key-label": { type: "string" },
        out: { type: "string" },
        "out-dir": { type: "string" },
        format: { type: "string" },
        remote: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (err) {
    return usageError((err as Error).message);
  }
  if (parsed.values.help) {
    console.log(USAGE);
    return 0;
  }
  const print = io.print ?? ((line: string) => console.log(line));
  let conn: SvcdConnection | undefined;
  try {
    const job = checkCommand(command, parsed.values, parsed.positionals);
    const settings = resolveSettings(parsed.values, io.env ?? clientEnvironment());
    conn = await SvcdConnection.open(settings, io.wait);
    return await job(conn, settings, print);
  } catch (err) {
    if (err instanceof ClientError) {
      if (err.usage) return usageError(err.message);
      console.error(`svcd client ${command}: ${err.message}`);
      return 1;
    }
    if (err instanceof Deno.errors.NotCapable) {
      console.error(`svcd client ${command}: ${err.message.split("\n")[0]}: ${NOT_CAPABLE_HINT}`);
      return 1;
    }
    throw err;
  } finally {
    conn?.close();
  }
}

type Job = (conn: SvcdConnection, settings: Settings, print: Print) => Promise<number>;

/** The command's own options, checked before anything is read or sent. */
function checkCommand(command: string, values: Values, positionals: string[]): Job {
  const only = (allowed: string[]) => {
    for (const flag of ["key-label", "out", "out-dir", "format", "remote"]) {
      if (values[flag] !== undefined && !allowed.includes(flag)) {
        throw new ClientError(`--${flag} does not apply to '${command}'`, { usage: true });
      }
    }
  };
  switch (command) {
    case "keys": {
      only(["out-dir"]);
      if (positionals.length > 0) throw usage(`keys takes no FILE ('${positionals[0]}')`);
      const outDir = values["out-dir"] as string | undefined;
      return async (conn, _settings, print) => {
        await listKeys(conn, outDir, print);
        return 0;
      };
    }
    case "sign": {
      only(["key-label", "out", "format"]);
      const keyLabel = needKeyLabel(values);
      const format = formatOf(values);
      if (positionals.length === 0) throw usage("sign needs at least one FILE");
      return async (conn, settings, print) => {
        await signFiles(conn, {
          keyLabel,
          files: positionals,
          out: values.out as string | undefined,
          format,
          maxBody: settings.maxBody,
        }, print);
        return 0;
      };
    }
    default: {
      only(["key-label", "format", "remote"]);
      const keyLabel = needKeyLabel(values);
      const format = formatOf(values);
      if (positionals.length !== 2) throw usage("verify needs FILE and SIG");
      return async (conn, settings, print) => {
        const valid = await verifyFile(conn, {
          keyLabel,
          file: positionals[0],
          signature: positionals[1],
          format,
          remote: values.remote === true,
          maxBody: settings.maxBody,
        });
        print(valid ? "Verified OK" : "Verification failure");
        return valid ? 0 : 1;
      };
    }
  }
}

function needKeyLabel(values: Values): string {
  const label = values["key-label"];
  if (typeof label !== "string" || label === "") {
    throw usage("--key-label L is required: the key to use ('svcd client keys' lists yours)");
  }
  return label;
}

function formatOf(values: Values): SignatureFormat {
  const format = (values.format as string | undefined) ?? "raw";
  if (!isSignatureFormat(format)) {
    throw usage(`--format '${format}': one of ${SIGNATURE_FORMATS.join(", ")}`);
  }
  return format;
}

function usage(message: string): ClientError {
  return new ClientError(message, { usage: true });
}

function usageError(message: string): number {
  console.error(`svcd client: ${message}\n\n${USAGE}`);
  return 2;
}

/**
 * SVCD_* from the environment; nothing else is read. A variable this process may not read (the
 * daemon's permission set) counts as unset, so the flags still work.
 */
function clientEnvironment(): Record<string, string | undefined> {
  const env: Record<string, string | undefined> = {};
  for (const name of Object.keys(ENVIRONMENT)) {
    const allowed = Deno.permissions.querySync({ name: "env", variable: name }).state === "granted";
    env[name] = allowed ? Deno.env.get(name) : undefined;
  }
  return env;
}
