/**
 * Reads the user PIN from the service manager's credentials directory, as bytes only.
 *
 * @example
 * ```ts
 * import { readPinCredential } from "./credential.ts";
 * const pin = readPinCredential(); // $CREDENTIALS_DIRECTORY/svc-pin
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
