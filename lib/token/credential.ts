/**
 * The user PIN and its credential, as bytes only (a PIN never becomes a JS string): read from the
 * service manager's credentials directory (the daemon), or decrypted from the encrypted credential
 * file by systemd-creds (operator commands); and the PIN's one shape, which `svcd token init`
 * generates and the daemon checks before it spends a login attempt.
 *
 * @example
 * ```ts
 * import { isWellFormedPin, readPinCredential } from "./credential.ts";
 * const pin = readPinCredential(); // $CREDENTIALS_DIRECTORY/svc-pin
 * isWellFormedPin(pin); // true for a PIN svcd token init made
 * ```
 */
import { join } from "node:path";
import { CredentialError } from "./errors.ts";

/** The credential's name, as given to `systemd-creds encrypt --name=`. */
export const PIN_CREDENTIAL_NAME = "svc-pin";

/**
 * The PIN bytes from `dir/svc-pin` (dir defaults to $CREDENTIALS_DIRECTORY), with one trailing
 * newline removed. Throws CredentialError, naming the file and the likely cause, when absent.
 * Example: `readPinCredential("/run/credentials/svcd.service")`.
 */
export function readPinCredential(dir?: string): Uint8Array {
  const base = dir ?? Deno.env.get("CREDENTIALS_DIRECTORY");
  if (!base) {
    throw new CredentialError(
      `CREDENTIALS_DIRECTORY is not set, so ${PIN_CREDENTIAL_NAME} cannot be read: the service ` +
        `manager passed no credentials (a systemd older than 250 ignores LoadCredentialEncrypted= ` +
        `with only a warning); run svcd under a service manager that supports encrypted credentials, ` +
        `or set CREDENTIALS_DIRECTORY for a manual run`,
    );
  }
  const path = join(base, PIN_CREDENTIAL_NAME);
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (err) {
    const why = err instanceof Deno.errors.NotFound
      ? "it does not exist"
      : `it cannot be read (${(err as Error).message})`;
    throw new CredentialError(
      `the PIN credential ${path} is unusable: ${why}. Likely cause: the service manager ignored ` +
        `LoadCredentialEncrypted=${PIN_CREDENTIAL_NAME}:… (no encrypted-credential support) or the ` +
        `credential was not created with 'svcd token init'; no login was attempted`,
    );
  }
  return trimOneNewline(bytes);
}

function trimOneNewline(bytes: Uint8Array): Uint8Array {
  if (bytes.length === 0) {
    throw new CredentialError(
      `the PIN credential ${PIN_CREDENTIAL_NAME} is empty; no login was attempted`,
    );
  }
  if (bytes[bytes.length - 1] !== 0x0a) return bytes;
  // Zero the newline byte in place so the only copy of the file content stays wipeable as one buffer.
  bytes[bytes.length - 1] = 0;
  return bytes.subarray(0, bytes.length - 1);
}

/** Longest credential accepted from systemd-creds: a PIN is 44 bytes; anything near this is not one. */
const MAX_CREDENTIAL_BYTES = 1024;

/**
 * The PIN from an encrypted credential file (`/etc/svcd/svc-pin.cred`), decrypted by
 * `systemd-creds decrypt` straight into memory: its output is read as bytes into one buffer, every
 * chunk wiped after copying, never a string, never a file. Needs root (the host key) like the
 * service manager. Throws CredentialError naming the file and what to do.
 *
 * @example
 * ```ts
 * import type { Token } from "./token.ts";
 * declare const token: Token;
 * const pin = await decryptPinCredential("/etc/svcd/svc-pin.cred");
 * await token.login(pin); // zeroizes it
 * ```
 */
export async function decryptPinCredential(file: string): Promise<Uint8Array> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("systemd-creds", {
      args: ["decrypt", `--name=${PIN_CREDENTIAL_NAME}`, file, "-"],
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (err) {
    throw new CredentialError(
      `systemd-creds cannot be run (${
        (err as Error).message
      }); --credential needs systemd 250 or later`,
    );
  }
  const buffer = new Uint8Array(MAX_CREDENTIAL_BYTES);
  let length = 0;
  let tooLong = false;
  const stderr = new Response(child.stderr).text();
  for await (const chunk of child.stdout) {
    if (length + chunk.length > buffer.length) tooLong = true;
    else buffer.set(chunk, length);
    length += chunk.length;
    chunk.fill(0);
  }
  const { code } = await child.status;
  if (code !== 0 || tooLong) {
    buffer.fill(0);
    const why = tooLong
      ? `it holds ${length} bytes, not a PIN`
      : `systemd-creds decrypt exit ${code}: ${(await stderr).trim()}`;
    throw new CredentialError(
      `the PIN credential ${file} cannot be decrypted (${why}); run the command as root (the ` +
        `credential is bound to this host's key) and check that the file was made by ` +
        `'svcd token init --credential-out'; no login was attempted`,
    );
  }
  await stderr;
  const pin = trimOneNewline(buffer.slice(0, length));
  buffer.fill(0);
  return pin;
}

/**
 * Where an operator command takes the PIN from: the encrypted credential file (`--credential`), or
 * the service manager's credentials directory (default `$CREDENTIALS_DIRECTORY`).
 */
export type PinSource = { encryptedFile: string } | { dir?: string };

/**
 * The PIN bytes from either source. Throws CredentialError.
 *
 * @example
 * ```ts
 * const pin = await loadPin({ encryptedFile: "/etc/svcd/svc-pin.cred" });
 * ```
 */
export async function loadPin(source: PinSource): Promise<Uint8Array> {
  return "encryptedFile" in source
    ? await decryptPinCredential(source.encryptedFile)
    : readPinCredential(source.dir);
}

/** The PIN's alphabet: base64 (RFC 4648). */
const ALPHABET = new TextEncoder().encode(
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
);
const PAD = 0x3d; // "="

/** Base64 of `bytes` as ASCII bytes (RFC 4648, padded). Example: `base64Bytes(Uint8Array.of(0))` → "AA==". */
export function base64Bytes(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(bytes.length / 3) * 4);
  let o = 0;
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out[o++] = ALPHABET[(n >> 18) & 63];
    out[o++] = ALPHABET[(n >> 12) & 63];
    out[o++] = i + 1 < bytes.length ? ALPHABET[(n >> 6) & 63] : PAD;
    out[o++] = i + 2 < bytes.length ? ALPHABET[n & 63] : PAD;
  }
  return out;
}

/** A fresh PIN: base64 of 32 random bytes, 44 bytes long; the random bytes are wiped. */
export function generatePin(): Uint8Array {
  const random = crypto.getRandomValues(new Uint8Array(32));
  const pin = base64Bytes(random);
  random.fill(0);
  return pin;
}

/** Length of a PIN made by {@link generatePin}: base64 of 32 bytes. */
export const PIN_LENGTH = 44;

/**
 * Whether `pin` has the shape of a PIN {@link generatePin} makes (44 base64 characters, one "="
 * at the end), so a credential that cannot be one is refused before a login attempt is spent.
 *
 * @example
 * ```ts
 * isWellFormedPin(generatePin()); // → true
 * ```
 */
export function isWellFormedPin(pin: Uint8Array): boolean {
  if (pin.length !== PIN_LENGTH || pin[PIN_LENGTH - 1] !== PAD) return false;
  for (let i = 0; i < PIN_LENGTH - 1; i++) {
    if (!ALPHABET.includes(pin[i])) return false;
  }
  return true;
}
