/**
 * `svcd token …`: operator tooling — init, keygen, list, selftest, pubkey.
 *
 * @example
 * ```sh
 * deno task svcd token init --token svcd --credential-out /etc/svcd/svc-pin.cred
 * CREDENTIALS_DIRECTORY=/run/creds deno task svcd token keygen --key-label web --key-type ed25519
 * ```
 */
import {
  AUDIT_MAC_LABEL,
  AUDIT_SIGN_LABEL,
  CredentialError,
  fingerprint,
  generatePin,
  isKeyTypeName,
  KEY_TYPE_NAMES,
  type KeyTypeName,
  loadPin,
  MechanismUnavailableError,
  type PinSource,
  Pkcs11Error,
  type SigningKey,
  Token,
} from "../token/mod.ts";
import { verifyIndependently } from "./independent_verify.ts";
import { initToken, writePinCredential } from "./provision.ts";
import { TokenAdmin } from "./admin.ts";
import { pem } from "../der/mod.ts";
import { asUser, isRoot } from "./run_as.ts";
import { COMMAND_AND_COMMON, type CommandGroup } from "../cli/options.ts";
import { parseCommandLine } from "../cli/command_line.ts";
import { EXIT } from "../cli/exit.ts";
import { sharedSpec } from "../cli/shared_options.ts";
import { cliOptions, OptionReader, optionTable } from "../cli/option_table.ts";

/** The options of `svcd token`, read through typed accessors. */
const TOKEN_OPTIONS = optionTable(COMMAND_AND_COMMON, {
  "key-label": {
    kind: "text",
    value: "LABEL",
    multiple: true,
    commands: ["keygen", "pubkey"],
    group: "command",
    help: "the key's label (keygen: repeat with --key-type for several keys)",
  },
  "key-type": {
    kind: "text",
    value: "TYPE",
    multiple: true,
    commands: ["keygen"],
    group: "command",
    help: `key type: ${KEY_TYPE_NAMES.join(", ")}`,
  },
  "credential-out": {
    kind: "path",
    value: "FILE",
    commands: ["init"],
    group: "command",
    help: "write the user PIN into this encrypted credential (systemd-creds, needs root)",
  },
  "plain-credential-dir": {
    kind: "path",
    value: "DIR",
    commands: ["init"],
    group: "command",
    help: "write the user PIN into DIR/svc-pin, mode 0400, unencrypted (tests and demos only)",
  },
  out: {
    kind: "path",
    value: "FILE",
    commands: ["pubkey"],
    group: "command",
    help: "write the PEM there instead of to stdout",
  },
  module: sharedSpec("module", { group: "common" }),
  token: sharedSpec("token", { group: "common", note: "init: the label the new token gets" }),
  credential: sharedSpec("credential", {
    group: "common",
    commands: ["keygen", "list", "selftest", "pubkey", "rotate-pin"],
  }),
  user: sharedSpec("user", { group: "common" }),
});

/** `svcd token`: its commands and the one table of their options. */
export const TOKEN_COMMAND: CommandGroup = {
  name: "token",
  summary: "operator tooling for the token: initialise, generate keys, list, test, rotate the PIN",
  usage: ["svcd token COMMAND [options]"],
  commands: [
    {
      name: "init",
      synopsis: "[--token LABEL] (--credential-out FILE | --plain-credential-dir DIR)",
      summary: "initialise a token; PINs are generated and never shown; the user PIN goes only " +
        "into the encrypted credential svc-pin (systemd-creds), or DIR/svc-pin (mode 0400) for " +
        `tests and demos; creates the audit keys ${AUDIT_MAC_LABEL} and ${AUDIT_SIGN_LABEL}`,
    },
    {
      name: "keygen",
      synopsis: "--key-label LABEL --key-type TYPE [--key-label LABEL --key-type TYPE]…",
      summary: "generate key pairs (private key sensitive, not extractable); TYPE is one of " +
        `${KEY_TYPE_NAMES.join(", ")}; exits 3 if the module does not offer one of them`,
    },
    {
      name: "list",
      synopsis: "",
      summary: "keys with label, type, mechanism and SHA-256 fingerprint of the public key",
    },
    {
      name: "selftest",
      synopsis: "",
      summary: "sign a fresh random message with every key, verify it in the module and " +
        "independently; exits 1 if any check fails",
    },
    {
      name: "pubkey",
      synopsis: "--key-label LABEL [--out FILE]",
      summary: "the public key as PEM (SubjectPublicKeyInfo)",
    },
    {
      name: "rotate-pin",
      synopsis: "--credential FILE",
      summary: "a new user PIN (never shown), set on the token with the old one from FILE, then " +
        "FILE replaced by the new encrypted credential; restart the daemon afterwards",
    },
  ],
  options: cliOptions(TOKEN_OPTIONS),
  groups: COMMAND_AND_COMMON,
  notes: "On a host set up from the Debian package (see " +
    "/usr/share/doc/svcd/operations.md):\n\n" +
    "  svcd token init --token svcd \\\n" +
    "    --credential-out /etc/svcd/svc-pin.cred --user svcd\n" +
    "  svcd token keygen --key-label web --key-type ec-p256 \\\n" +
    "    --credential /etc/svcd/svc-pin.cred --user svcd",
};

/** Which module and token a command works on (--module, --token). */
export interface Common {
  modulePath: string;
  tokenLabel: string;
  /** Where the PIN comes from (--credential FILE, else $CREDENTIALS_DIRECTORY). */
  pin?: PinSource;
  /** --user: the user the token work runs as. */
  user?: string;
}

/** A value that breaks its option's declaration (an empty --key-label, say): exit 2. */
class OptionMistake extends Error {}

/** The parsed options of a `svcd token` command line. */
type TokenOptions = OptionReader<typeof TOKEN_OPTIONS>;

/** Runs `svcd token <args>`; returns the exit code. Example: `await runTokenCommand(["list"])`. */
export async function runTokenCommand(args: string[]): Promise<number> {
  const line = parseCommandLine(TOKEN_COMMAND, args, { allowPositionals: false, usageError });
  if ("exit" in line) return line.exit;
  const { command } = line;
  const options: TokenOptions = new OptionReader(
    TOKEN_OPTIONS,
    line.values,
    (_flag, message) => new OptionMistake(message),
  );
  try {
    return await runCommand(command, options);
  } catch (err) {
    if (err instanceof OptionMistake) return usageError(err.message, command);
    console.error(`svcd token ${command}: ${describe(err)}`);
    return EXIT.failed;
  }
}

async function runCommand(command: string, options: TokenOptions): Promise<number> {
  const credential = options.get("credential");
  const common: Common = {
    modulePath: options.get("module"),
    tokenLabel: options.get("token"),
    pin: credential ? { encryptedFile: credential } : {},
    user: options.get("user"),
  };
  if (common.user === undefined && isRoot() && command !== "pubkey") {
    console.error(
      `svcd token ${command}: note: running as root without --user; a module such as SoftHSM ` +
        "keeps what it creates readable by root only (pass --user svcd on a packaged host)",
    );
  }
  switch (command) {
    case "init":
      return await init(common, options);
    case "keygen":
      return await keygen(common, options);
    case "list":
      return await list(common);
    case "selftest":
      return await selftest(common);
    case "pubkey":
      return await pubkey(common, options);
    default:
      return await rotatePin(common);
  }
}

/** Exit code of `keygen` when the module does not offer a requested type (the others are made). */
export const EXIT_NOT_OFFERED = EXIT.notOffered;

/** A usage mistake: the message, then where the help is; exit 2. */
function usageError(message: string, command?: string): number {
  const where = command ? `svcd token ${command}` : "svcd token";
  console.error(`${where}: ${message}\nsee '${where} --help'`);
  return EXIT.usage;
}

function describe(err: unknown): string {
  if (
    err instanceof CredentialError || err instanceof Pkcs11Error ||
    err instanceof MechanismUnavailableError
  ) {
    return err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

function progress(line: string): void {
  console.log(`  ${line}`);
}

async function init(common: Common, options: TokenOptions): Promise<number> {
  const tokenLabel = common.tokenLabel;
  const encryptedFile = options.get("credential-out");
  const plainDir = options.get("plain-credential-dir");
  if (!encryptedFile === !plainDir) {
    return usageError(
      "init needs exactly one of --credential-out FILE or --plain-credential-dir DIR",
      "init",
    );
  }
  console.log(`svcd token init: token '${tokenLabel}' in ${common.modulePath}`);
  await initToken(
    {
      modulePath: common.modulePath,
      tokenLabel,
      credential: encryptedFile ? { encryptedFile } : { plainDir: plainDir! },
      runTokenWork: (work) => asUser(common.user, work),
    },
    progress,
  );
  console.log("svcd token init: done");
  return EXIT.ok;
}

/**
 * Reads the PIN first (no module work without it; decrypting needs root), then, as --user if given,
 * opens the token, logs in and runs `work`; the token is closed afterwards.
 */
async function withLoggedIn<T>(common: Common, work: (token: Token) => Promise<T>): Promise<T> {
  const pin = await loadPin(common.pin ?? {});
  return await asUser(common.user, async () => {
    const token = await openLoggedIn(common, pin);
    try {
      return await work(token);
    } finally {
      token.close();
    }
  }).finally(() => pin.fill(0));
}

/**
 * Opens the token and logs in with `pin`, or with the PIN from `common.pin` (read first: no module
 * work without it). Also used by `svcd ca`.
 * Example: `const token = await openLoggedIn({ modulePath, tokenLabel })`.
 */
export async function openLoggedIn(common: Common, pin?: Uint8Array): Promise<Token> {
  pin ??= await loadPin(common.pin ?? {});
  let token: Token;
  try {
    token = Token.open(common);
  } catch (err) {
    pin.fill(0);
    throw err;
  }
  try {
    await token.login(pin);
    return token;
  } catch (err) {
    token.close();
    throw err;
  }
}

async function keygen(common: Common, options: TokenOptions): Promise<number> {
  const labels = options.get("key-label");
  const types = options.get("key-type");
  if (labels.length === 0 || labels.length !== types.length) {
    return usageError(
      "keygen needs --key-label LABEL --key-type TYPE (pairs may repeat, in order)",
      "keygen",
    );
  }
  const bad = types.find((t) => !isKeyTypeName(t));
  if (bad !== undefined) {
    return usageError(`unknown key type '${bad}'; one of: ${KEY_TYPE_NAMES.join(", ")}`, "keygen");
  }
  return await withLoggedIn(common, async (token) => {
    let notOffered = 0;
    for (const [i, label] of labels.entries()) {
      const type = types[i] as KeyTypeName;
      console.log(
        `svcd token keygen: generating ${type} key '${label}' on token '${common.tokenLabel}'`,
      );
      try {
        console.log(keyLine(await new TokenAdmin(token).generateKeyPair(label, type)));
      } catch (err) {
        if (!(err instanceof MechanismUnavailableError)) throw err;
        notOffered++;
        console.error(`svcd token keygen: not offered: ${type}: ${err.message}`);
      }
    }
    return notOffered === 0 ? 0 : EXIT_NOT_OFFERED;
  });
}

function keyLine(key: SigningKey): string {
  return [key.label, key.keyType, key.mechanism, `sha256:${fingerprint(key)}`].join("\t");
}

async function list(common: Common): Promise<number> {
  return await withLoggedIn(common, async (token) => {
    const keys = await token.listKeys((label, reason) =>
      console.error(`skipped ${label}: ${reason}`)
    );
    for (const key of keys) console.log(keyLine(key));
    return EXIT.ok;
  });
}

async function selftest(common: Common): Promise<number> {
  return await withLoggedIn(common, async (token) => {
    let failures = 0;
    const keys = await token.listKeys((label, reason) => {
      failures++;
      console.log(`FAIL\t${label}\t${reason}`);
    });
    if (keys.length === 0) {
      console.log("FAIL\t(no keys)\tthe token holds no signing key; run svcd token keygen");
      return EXIT.failed;
    }
    for (const key of keys) {
      const { problems, verifier } = await checkKey(token, key);
      if (problems.length > 0) failures++;
      const detail = problems.join("; ") ||
        `module verify ok, ${verifier} verify ok, tampered message rejected by both`;
      console.log(`${problems.length === 0 ? "ok" : "FAIL"}\t${keyLine(key)}\t${detail}`);
    }
    const macProblem = await checkMac(token);
    if (macProblem) failures++;
    const macDetail = macProblem ?? "32-byte MAC, same twice";
    console.log(
      `${
        macProblem ? "FAIL" : "ok"
      }\t${AUDIT_MAC_LABEL}\tgeneric-secret\tCKM_SHA256_HMAC\t${macDetail}`,
    );
    return failures === 0 ? 0 : 1;
  });
}

/** Sign a fresh message; verify in the module and independently; a tampered message must fail both. */
async function checkKey(
  token: Token,
  key: SigningKey,
): Promise<{ problems: string[]; verifier: string }> {
  const problems: string[] = [];
  let verifier = "independent";
  try {
    const message = crypto.getRandomValues(new Uint8Array(32));
    const tampered = message.slice();
    tampered[0] ^= 1;
    const { signature } = await token.sign(key, message);
    if (!(await token.verify(key, message, signature))) {
      problems.push("module rejects its own signature");
    }
    if (await token.verify(key, tampered, signature)) {
      problems.push("module accepts a tampered message");
    }
    const independent = await verifyIndependently(key, message, signature);
    verifier = independent.verifier;
    if (!independent.ok) problems.push(`${independent.verifier} rejects the signature`);
    if ((await verifyIndependently(key, tampered, signature)).ok) {
      problems.push(`${independent.verifier} accepts a tampered message`);
    }
  } catch (err) {
    problems.push(describe(err));
  }
  return { problems, verifier };
}

async function checkMac(token: Token): Promise<string | undefined> {
  try {
    const data = crypto.getRandomValues(new Uint8Array(32));
    const a = await token.mac(AUDIT_MAC_LABEL, data);
    const b = await token.mac(AUDIT_MAC_LABEL, data);
    if (a.length !== 32) return `MAC is ${a.length} bytes, expected 32`;
    if (!a.every((v, i) => v === b[i])) return "two MACs of the same data differ";
    return undefined;
  } catch (err) {
    return describe(err);
  }
}

async function pubkey(common: Common, options: TokenOptions): Promise<number> {
  const label = options.get("key-label").at(-1);
  if (!label) return usageError("pubkey needs --key-label LABEL", "pubkey");
  // A module may keep public objects private until login: have the PIN at hand if one is given
  // (decrypting needs root, so before switching to --user).
  const source = common.pin ?? {};
  const pin = "encryptedFile" in source || Deno.env.get("CREDENTIALS_DIRECTORY")
    ? await loadPin(source)
    : undefined;
  const spki = await asUser(common.user, async () => {
    const token = Token.open(common);
    try {
      let key = await token.publicKey(label);
      if (!key && pin) {
        await token.login(pin);
        key = await token.publicKey(label);
      }
      if (!key) {
        throw new Error(`no public key labelled '${label}' on token '${common.tokenLabel}'`);
      }
      if (!key.publicKeySpki) {
        throw new Error(`key '${label}' (${key.keyType}) has no standard SPKI encoding`);
      }
      return key.publicKeySpki;
    } finally {
      token.close();
    }
  }).finally(() => pin?.fill(0));
  const text = pem("PUBLIC KEY", spki);
  const out = options.get("out");
  if (out) await Deno.writeTextFile(out, text);
  else console.log(text.trimEnd());
  return EXIT.ok;
}

/**
 * `rotate-pin`: the old PIN from the credential (root decrypts it), a fresh PIN staged in
 * FILE.new (encrypted, 0600) before the token changes — so a PIN the token holds is always in a
 * file — then C_SetPIN as --user, then FILE.new renamed over FILE. Neither PIN is ever shown.
 */
async function rotatePin(common: Common): Promise<number> {
  const source = common.pin ?? {};
  if (!("encryptedFile" in source)) {
    return usageError(
      "rotate-pin needs --credential FILE (the encrypted credential it replaces)",
      "rotate-pin",
    );
  }
  const file = source.encryptedFile;
  const staged = `${file}.new`;
  const oldPin = await loadPin(source);
  const newPin = generatePin();
  try {
    await writePinCredential({ encryptedFile: staged }, newPin);
    console.log(`svcd token rotate-pin: new PIN generated (not shown), staged in ${staged}`);
    try {
      await asUser(common.user, async () => {
        const token = Token.open(common);
        try {
          await new TokenAdmin(token).setUserPin(oldPin, newPin.slice());
        } finally {
          token.close();
        }
      });
    } catch (err) {
      await Deno.remove(staged).catch(() => {});
      throw new Error(
        `the token's PIN was not changed (${describe(err)}); ${file} still holds it`,
      );
    }
  } finally {
    oldPin.fill(0);
    newPin.fill(0);
  }
  try {
    await Deno.rename(staged, file);
  } catch (err) {
    throw new Error(
      `the token now has the new PIN, which is in ${staged}, but it could not replace ${file} ` +
        `(${(err as Error).message}): mv ${staged} ${file}`,
    );
  }
  console.log(
    `svcd token rotate-pin: done; ${file} holds the new PIN. Restart the daemon ` +
      "(systemctl restart svcd): it logs in with the new PIN",
  );
  return EXIT.ok;
}

// Runnable on its own (`deno run … lib/token_admin/cli.ts list`) so token tooling and its tests do not
// depend on the daemon's import graph; main.ts dispatches `svcd token …` here as well.
if (import.meta.main) {
  Deno.exit(await runTokenCommand(Deno.args));
}
