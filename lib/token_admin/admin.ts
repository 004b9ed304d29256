/**
 * Operator administration of an opened token: generating key pairs and the audit MAC key, and
 * changing the user PIN (`svcd token keygen`, `init`, `rotate-pin`, `svcd ca init`). The daemon
 * never calls these; they work in read-write sessions of their own, outside the token's pool,
 * through the token's administration interface (Token.administration). A TokenAdmin is an object
 * of its own (not functions over a Token) so that `callsAsUser` can make its calls as the
 * daemon's user, as it does a Token's.
 *
 * @example
 * ```ts
 * import { Token } from "../token/mod.ts";
 * import { TokenAdmin } from "./admin.ts";
 * const token = Token.open({ modulePath: "/usr/lib/softhsm/libsofthsm2.so", tokenLabel: "svcd" });
 * await token.login(Token.readPinCredential());
 * const key = await new TokenAdmin(token).generateKeyPair("web-signing", "ed25519");
 * ```
 */
import { check } from "../../ffi/pkcs11/mod.ts";
import {
  KEY_TYPES,
  type KeyTypeName,
  type SigningKey,
  type Token,
  type TokenAdministration,
} from "../token/mod.ts";
import { storeKeyCertificate } from "./certificate_object.ts";
import {
  generateMacSecret,
  generateSigningKeyPair,
  requireKeyGeneration,
  requireMacKeyGeneration,
} from "./keygen.ts";

/** The administration of one opened token (which must stay open while it is used). */
export class TokenAdmin {
  readonly #token: TokenAdministration;

  /** Example: `new TokenAdmin(token)`. */
  constructor(token: Token) {
    this.#token = token.administration();
  }

  /**
   * Generates a key pair on the token (needs a login): private key sensitive and non-extractable.
   * Throws MechanismUnavailableError before any attempt if the module lacks the mechanism, and
   * refuses a label already on the token.
   */
  async generateKeyPair(label: string, type: KeyTypeName): Promise<SigningKey> {
    const token = this.#token;
    const spec = KEY_TYPES[type];
    requireKeyGeneration(token.offered, spec);
    token.offered.signingFor(spec, label); // refuse a key we could not sign with
    if (await token.labelTaken(label)) {
      throw new Error(
        `a key labelled '${label}' already exists on the token; choose another label`,
      );
    }
    await token.inReadWriteSession((mod, s) => generateSigningKeyPair(mod, s, spec, label));
    const key = await token.freshKey(label);
    if (!key) {
      throw new Error(
        `generated key '${label}' cannot be found again; the module did not store it`,
      );
    }
    return key;
  }

  /**
   * Changes the user PIN from `oldPin` to `newPin` (C_SetPIN in a read-write session that is not
   * logged in, which changes the user's PIN). Both buffers are zeroed when the call returns.
   */
  async setUserPin(oldPin: Uint8Array, newPin: Uint8Array): Promise<void> {
    try {
      await this.#token.inReadWriteSession((mod, s) =>
        check(
          "C_SetPIN",
          mod.fn.C_SetPIN(s, oldPin, oldPin.byteLength, newPin, newPin.byteLength),
        )
      );
    } finally {
      oldPin.fill(0);
      newPin.fill(0);
    }
  }

  /**
   * Generates the sensitive, non-extractable 32-byte CKK_GENERIC_SECRET HMAC key `label`
   * (CKA_SIGN/CKA_VERIFY) with CKM_GENERIC_SECRET_KEY_GEN. Needs a login.
   */
  async generateMacKey(label: string): Promise<void> {
    requireMacKeyGeneration(this.#token.offered);
    await this.#token.inReadWriteSession((mod, s) => generateMacSecret(mod, s, label));
  }

  /**
   * Stores `der` as the key's certificate object (CKA_ID and CKA_LABEL of the key) and destroys
   * the key's earlier ones after; resolves with their DER. Throws CertificateRefused, storing
   * nothing, when the certificate's public key is not the key's (./certificate_object.ts).
   */
  storeCertificate(key: SigningKey, der: Uint8Array): Promise<Uint8Array[]> {
    return storeKeyCertificate(this.#token, key, der);
  }
}
