/**
 * Token initialisation for `svcd token init`: a fresh token with machine-generated PINs, the user
 * PIN stored only in the svc-pin credential, and the audit keys created.
 *
 * @example
 * ```ts
 * declare const modulePath: string;
 * await initToken({ modulePath, tokenLabel: "svcd", credential: { plainDir: "/tmp/creds" } }, console.log);
 * ```
 */
import { join } from "node:path";
import {
  check,
  CKF_SESSION,
  CKF_TOKEN,
  CKU,
  padText,
  type Pkcs11Module,
} from "../../ffi/pkcs11/mod.ts";
import {
  acquireModule,
  AUDIT_MAC_LABEL,
  AUDIT_SIGN_LABEL,
  generatePin,
  listSlots,
  openSession,
  PIN_CREDENTIAL_NAME,
  readTokenInfo,
  releaseModule,
  Token,
} from "../token/mod.ts";
import { TokenAdmin } from "./admin.ts";

/** Where the user PIN goes: an encrypted credential file, or a plain file DIR/svc-pin (tests, demos). */
export type CredentialTarget = { encryptedFile: string } | { plainDir: string };

/** What init needs. */
export interface InitOptions {
  modulePath: string;
  tokenLabel: string;
  credential: CredentialTarget;
  /**
   * Runs the module work (e.g. as the daemon's user, `asUser("svcd", work)`); the credential is
   * written before, and removed after a failure, by the caller's own user.
   */
  runTokenWork?: <T>(work: () => Promise<T>) => Promise<T>;
}

/**
 * Initialises the first uninitialised token as `tokenLabel`, sets both PINs (never shown), writes
 * the user PIN credential, then creates svc-audit (HMAC) and svc-audit-sign (Ed25519).
 */
export async function initToken(
  opts: InitOptions,
  progress: (line: string) => void,
): Promise<void> {
  const userPin = generatePin();
  const soPin = generatePin();
  const credentialPath = await writePinCredential(opts.credential, userPin);
  progress(`user PIN and SO PIN generated (not shown); user PIN stored in ${credentialPath}`);
  let tokenUsable = false;
  const runTokenWork = opts.runTokenWork ?? ((work) => work());
  try {
    await runTokenWork(async () => {
      const mod = acquireModule(opts.modulePath);
      try {
        const slot = initialiseSlot(mod, opts.tokenLabel, soPin, progress);
        initUserPin(mod, findInitialisedSlot(mod, opts.tokenLabel) ?? slot, soPin, userPin);
        tokenUsable = true;
        progress(`user PIN set on token '${opts.tokenLabel}'`);
      } finally {
        soPin.fill(0);
        releaseModule(mod);
      }
      await createAuditKeys(opts, userPin, progress);
    });
  } catch (err) {
    if (!tokenUsable) await Deno.remove(credentialPath).catch(() => {});
    throw err;
  } finally {
    userPin.fill(0);
  }
}

/**
 * Writes the user PIN to its credential: encrypted with systemd-creds into a new file (0600), or a
 * plain DIR/svc-pin (0400) for tests and demos. Never overwrites one. Returns the path written.
 *
 * @example
 * ```ts
 * declare const pin: Uint8Array;
 * await writePinCredential({ encryptedFile: "/etc/svcd/svc-pin.cred.new" }, pin);
 * ```
 */
export async function writePinCredential(
  target: CredentialTarget,
  pin: Uint8Array,
): Promise<string> {
  if ("plainDir" in target) {
    await Deno.mkdir(target.plainDir, { recursive: true, mode: 0o700 });
    const path = join(target.plainDir, PIN_CREDENTIAL_NAME);
    // createNew: never overwrite the PIN of a token initialised earlier.
    await Deno.writeFile(path, pin, { mode: 0o400, createNew: true }).catch((err) => {
      throw err instanceof Deno.errors.AlreadyExists
        ? new Error(`${path} exists already: it may hold the PIN of another token; remove it first`)
        : err;
    });
    await Deno.chmod(path, 0o400);
    return path;
  }
  const path = target.encryptedFile;
  if (await exists(path)) {
    throw new Error(
      `${path} exists already: it may hold the PIN of another token; remove it first`,
    );
  }
  // The ciphertext comes back on stdout and is written here, so the file is 0600 from its first
  // byte whatever the umask (systemd-creds would create it 0644).
  const child = new Deno.Command("systemd-creds", {
    args: ["encrypt", `--name=${PIN_CREDENTIAL_NAME}`, "-", "-"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(pin);
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  if (code !== 0) {
    throw new Error(
      `systemd-creds encrypt failed (exit ${code}): ${new TextDecoder().decode(stderr).trim()}; ` +
        `run as root (the credential is bound to this host's key), or use --plain-credential-dir ` +
        `DIR for a test or demo token`,
    );
  }
  await Deno.writeFile(path, stdout, { mode: 0o600, createNew: true });
  await Deno.chmod(path, 0o600);
  return path;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

function initialiseSlot(
  mod: Pkcs11Module,
  label: string,
  soPin: Uint8Array,
  progress: (l: string) => void,
): number {
  if (findInitialisedSlot(mod, label) !== undefined) {
    throw new Error(
      `a token labelled '${label}' is already initialised in ${mod.path}; choose another --token`,
    );
  }
  const slot = listSlots(mod, true).find((s) =>
    !(readTokenInfo(mod, s).flags & CKF_TOKEN.TOKEN_INITIALIZED)
  );
  if (slot === undefined) {
    throw new Error(
      `${mod.path} has no uninitialised token left (every slot's token is initialised)`,
    );
  }
  progress(`initialising the token in slot ${slot} as '${label}'`);
  check("C_InitToken", mod.fn.C_InitToken(slot, soPin, soPin.byteLength, padText(label, 32)));
  return slot;
}

function initUserPin(
  mod: Pkcs11Module,
  slot: number,
  soPin: Uint8Array,
  userPin: Uint8Array,
): void {
  const session = openSession(mod, slot, CKF_SESSION.RW_SESSION);
  try {
    check("C_Login", mod.fn.C_Login(session, CKU.SO, soPin, soPin.byteLength));
    try {
      check("C_InitPIN", mod.fn.C_InitPIN(session, userPin, userPin.byteLength));
    } finally {
      mod.fn.C_Logout(session);
    }
  } finally {
    mod.fn.C_CloseSession(session);
  }
}

// Slot ids may change after C_InitToken (SoftHSM derives them from the serial): look up by label.
function findInitialisedSlot(mod: Pkcs11Module, label: string): number | undefined {
  return listSlots(mod, true).find((s) => {
    const info = readTokenInfo(mod, s);
    return (info.flags & CKF_TOKEN.TOKEN_INITIALIZED) !== 0 && info.label === label;
  });
}

async function createAuditKeys(
  opts: InitOptions,
  userPin: Uint8Array,
  progress: (l: string) => void,
): Promise<void> {
  const token = Token.open({ modulePath: opts.modulePath, tokenLabel: opts.tokenLabel });
  try {
    await token.login(userPin.slice());
    await new TokenAdmin(token).generateMacKey(AUDIT_MAC_LABEL);
    progress(`created ${AUDIT_MAC_LABEL} (HMAC-SHA256 secret, sensitive, not extractable)`);
    const key = await new TokenAdmin(token).generateKeyPair(AUDIT_SIGN_LABEL, "ed25519");
    progress(
      `created ${AUDIT_SIGN_LABEL} (${key.keyType}, ${key.mechanism}) for audit checkpoints`,
    );
  } finally {
    token.close();
  }
}
