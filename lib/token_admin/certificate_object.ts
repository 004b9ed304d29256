/**
 * A key's X.509 certificate stored where PKCS#11 consumers look for it: a CKO_CERTIFICATE token
 * object (CKC_X_509, public) with the key's CKA_ID and CKA_LABEL, CKA_VALUE the DER, and
 * CKA_SUBJECT, CKA_ISSUER and CKA_SERIAL_NUMBER (the DER of the INTEGER) from the certificate.
 * Storing one replaces the key's earlier ones: the new object is made first, the old ones are
 * destroyed after, so the key is never left without a certificate, and one key has one
 * certificate object afterwards. A certificate whose public key is not the key's is refused before
 * anything is stored.
 *
 * @example
 * ```ts
 * import type { SigningKey, Token } from "../token/mod.ts";
 * import { storeKeyCertificate } from "./certificate_object.ts";
 * declare const token: Token, key: SigningKey, der: Uint8Array;
 * const earlier = await storeKeyCertificate(token.administration(), key, der); // now destroyed
 * ```
 */
import {
  type AttributeIn,
  boolBytes,
  check,
  CKA,
  CKC,
  CKO,
  ulongBytes,
} from "../../ffi/pkcs11/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { TAG, tlv } from "../der/mod.ts";
import { parseCertificate } from "../ocsp/mod.ts";
import {
  createObject,
  findObjects,
  getAttributes,
  type SigningKey,
  type TokenAdministration,
  utf8,
} from "../token/mod.ts";

/** A certificate that may not be stored for the key; the message says why and what to do. */
export class CertificateRefused extends Error {
  override name = "CertificateRefused";
}

/**
 * Stores `der` as the key's certificate object and destroys the key's earlier certificate
 * objects; resolves with the DER of those (empty values left out). Throws
 * {@link CertificateRefused} (nothing stored) when its public key is not the key's or the key has
 * no CKA_ID to match it by.
 */
export async function storeKeyCertificate(
  admin: TokenAdministration,
  key: SigningKey,
  der: Uint8Array,
): Promise<Uint8Array[]> {
  const cert = parseCertificate(der);
  if (!key.publicKeySpki || !bytesEqual(cert.spki, key.publicKeySpki)) {
    throw new CertificateRefused(
      `the certificate's public key is not the public key of '${key.label}'; it is not stored`,
    );
  }
  const id = admin.keyId(key);
  if (id.length === 0) {
    throw new CertificateRefused(
      `key '${key.label}' has no CKA_ID, which PKCS#11 consumers match a certificate to its key ` +
        "by; make the key with 'svcd token keygen' (or give it an ID) and certify that one",
    );
  }
  const template: AttributeIn[] = [
    { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
    { type: CKA.CERTIFICATE_TYPE, value: ulongBytes(CKC.X_509) },
    { type: CKA.TOKEN, value: boolBytes(true) },
    { type: CKA.PRIVATE, value: boolBytes(false) },
    { type: CKA.ID, value: id },
    { type: CKA.LABEL, value: utf8(key.label) },
    { type: CKA.VALUE, value: der },
    { type: CKA.SUBJECT, value: cert.subject },
    { type: CKA.ISSUER, value: cert.issuer },
    { type: CKA.SERIAL_NUMBER, value: tlv(TAG.INTEGER, cert.serial) },
  ];
  return await admin.inReadWriteSession((mod, session) => {
    const earlier = findObjects(mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.CERTIFICATE) },
      { type: CKA.ID, value: id },
      { type: CKA.TOKEN, value: boolBytes(true) },
    ]);
    const values = earlier.map((h) => getAttributes(mod, session, h, [CKA.VALUE]).get(CKA.VALUE));
    const made = createObject(mod, session, template);
    for (const old of earlier.filter((h) => h !== made)) {
      check("C_DestroyObject", mod.fn.C_DestroyObject(session, old));
    }
    return values.filter((v): v is Uint8Array => v !== null && v !== undefined && v.length > 0);
  });
}
