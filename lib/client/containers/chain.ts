/**
 * Certificates as the containers use them: a certificate's key as a `verifyLocally` key (its key
 * type read from the SubjectPublicKeyInfo's algorithm), a signature checked with it, and the path
 * from a signer's certificate through the certificates a container carries to one of the CA
 * certificates the user trusts — every signature on the way checked, every certificate in its
 * validity period, every issuer a CA (basicConstraints cA).
 *
 * @example
 * ```ts
 * import { checkPath } from "./chain.ts";
 * import { readCertificates } from "../../ocsp/mod.ts";
 * declare const signer: Uint8Array, carried: Uint8Array[];
 * const anchors = readCertificates(await Deno.readFile("ca.pem"));
 * const problem = await checkPath(signer, carried, anchors, Date.now()); // undefined: it chains
 * ```
 */
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import {
  type CertificateInfo,
  keyTypeOfSignatureAlgorithm,
  parseCertificate,
  SIGNATURE_ALGORITHMS,
  spkiAlgorithmIdentifier,
} from "../../ocsp/mod.ts";
import type { KeyTypeName } from "../../token/mod.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { digestOf, localDigestName } from "../digests.ts";
import { verifyLocally } from "../verify.ts";

/** The longest path looked for (signer, intermediates, CA). */
const MAX_PATH = 8;

/** A certificate's public key, as verifyLocally takes one. */
export interface CertificateKey {
  keyType: KeyTypeName;
  publicKeyRaw: Uint8Array;
  publicKeySpki: Uint8Array;
}

/**
 * The key of `cert` as a key of the type a signature algorithm names (`signedAs`, from
 * keyTypeOfSignatureAlgorithm), or undefined when there is none or the certificate's key cannot
 * be of that type. The signature decides: one RSA key's SPKI is the same for its PSS and its
 * PKCS #1 v1.5 key type.
 */
export function certificateKey(
  cert: CertificateInfo,
  signedAs: KeyTypeName | null,
): CertificateKey | undefined {
  if (signedAs === null) return undefined;
  if (!bytesEqual(spkiAlgorithmIdentifier(signedAs), cert.spkiAlgorithm)) return undefined;
  return { keyType: signedAs, publicKeyRaw: cert.publicKey, publicKeySpki: cert.spki };
}

/** Whether `signature` is `key`'s over `message` (the key type's scheme, as svcd signs). */
export async function signatureValid(
  key: CertificateKey,
  message: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  const name = localDigestName(key.keyType);
  return await verifyLocally(
    key,
    signature,
    name ? { digest: digestOf(name, key.publicKeyRaw, message) } : { message },
  );
}

/** Whether `issuer`'s key signed `cert`. */
async function issuedBy(cert: CertificateInfo, issuer: CertificateInfo): Promise<boolean> {
  if (!bytesEqual(cert.issuer, issuer.subject)) return false;
  const key = certificateKey(issuer, keyTypeOfSignatureAlgorithm(cert.signatureAlgorithm));
  if (!key) return false;
  const keyType = key.keyType;
  let raw: Uint8Array;
  try {
    raw = SIGNATURE_ALGORITHMS[keyType].decodeSignature(cert.signature);
  } catch {
    return false;
  }
  return await signatureValid(key, cert.tbs, raw);
}

/** Whether `cert` says it is a CA (basicConstraints cA TRUE). */
function isCa(cert: CertificateInfo): boolean {
  try {
    const parsed = new pkijs.Certificate({ schema: asn1js.fromBER(cert.der.slice()).result });
    const ext = parsed.extensions?.find((e) => e.extnID === "2.5.29.19");
    return (ext?.parsedValue as pkijs.BasicConstraints | undefined)?.cA === true;
  } catch {
    return false;
  }
}

function describeName(cert: CertificateInfo): string {
  try {
    const name = pkijs.RelativeDistinguishedNames.fromBER(cert.subject.slice().buffer);
    return name.typesAndValues.map((t) => String(t.value.valueBlock.value)).join(", ");
  } catch {
    return "a certificate";
  }
}

/** How a certificate's validity period stands at `now`, with the date that decides it. */
export function validityAt(
  cert: CertificateInfo,
  now: number,
): { state: "valid" | "expired" | "not yet valid"; date: string } {
  const day = (ms: number) => new Date(ms).toISOString();
  if (now < cert.notBefore) return { state: "not yet valid", date: day(cert.notBefore) };
  if (now > cert.notAfter) return { state: "expired", date: day(cert.notAfter) };
  return { state: "valid", date: day(cert.notAfter) };
}

function outsideValidity(cert: CertificateInfo, now: number): string | undefined {
  if (now < cert.notBefore) {
    return `the certificate of ${describeName(cert)} is not valid before ${
      new Date(cert.notBefore).toISOString()
    }`;
  }
  if (now > cert.notAfter) {
    return `the certificate of ${describeName(cert)} expired on ${
      new Date(cert.notAfter).toISOString()
    }`;
  }
  return undefined;
}

/**
 * Why `signer` does not chain to one of `anchors` through `carried` at `now`, or undefined when it
 * does.
 */
export async function checkPath(
  signer: Uint8Array,
  carried: Uint8Array[],
  anchors: CertificateInfo[],
  now: number,
): Promise<string | undefined> {
  const pool = carried.flatMap((der) => {
    try {
      return [parseCertificate(der)];
    } catch {
      return []; // a certificate that does not parse issues nothing
    }
  });
  let current = parseCertificate(signer);
  for (let depth = 0; depth < MAX_PATH; depth++) {
    const expired = outsideValidity(current, now);
    if (expired) return expired;
    if (anchors.some((a) => bytesEqual(a.der, current.der))) return undefined;
    for (const anchor of anchors) {
      if (await issuedBy(current, anchor)) {
        if (!isCa(anchor)) return `${describeName(anchor)} in the CA file is not a CA`;
        return outsideValidity(anchor, now);
      }
    }
    let next: CertificateInfo | undefined;
    for (const candidate of pool) {
      if (candidate.der !== current.der && await issuedBy(current, candidate)) {
        next = candidate;
        break;
      }
    }
    if (!next) {
      return `the certificate of ${describeName(current)} is issued by no certificate in the CA ` +
        "file or the signature";
    }
    if (!isCa(next)) return `the issuer ${describeName(next)} is not a CA`;
    current = next;
  }
  return `no path of at most ${MAX_PATH} certificates to the CA file`;
}
