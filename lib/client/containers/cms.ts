/**
 * A detached CMS SignedData (RFC 5652) with one signer: the signed attributes (content type,
 * message digest, signing time) are made here, their DER is what the key signs (§5.4: the SET OF
 * form, tag 0x31), and the SignedData carries the signer's certificate and its chain. The reader
 * in ./cms_parse.ts takes back exactly what this writer makes (strict DER).
 *
 * @example
 * ```ts
 * import { signedAttributes, signedData } from "./cms.ts";
 * import type { ContainerAlgorithm } from "./algorithms.ts";
 * declare const alg: ContainerAlgorithm, digest: Uint8Array, cert: Uint8Array, raw: Uint8Array;
 * const attrs = signedAttributes(digest, Date.now()); // send attrs to /sign
 * const p7s = signedData({ alg, attributes: attrs, signature: raw, certificate: cert, chain: [] });
 * ```
 */
import { ctx, integer, octetString, oid, sequence, TAG, tlv, x509Time } from "../../der/mod.ts";
import { concat } from "../../bytes/mod.ts";
import { parseCertificate } from "../../ocsp/mod.ts";
import { type ContainerAlgorithm, digestAlgorithmIdentifier } from "./algorithms.ts";

/** OIDs of RFC 5652 (content types and the attributes of §11). */
export const CMS_OIDS = {
  data: "1.2.840.113549.1.7.1",
  signedData: "1.2.840.113549.1.7.2",
  contentType: "1.2.840.113549.1.9.3",
  messageDigest: "1.2.840.113549.1.9.4",
  signingTime: "1.2.840.113549.1.9.5",
} as const;

/** DER SET OF: the elements sorted as octet strings (X.690 §11.6). */
function setOf(elements: Uint8Array[]): Uint8Array {
  const sorted = [...elements].sort(compareBytes);
  return tlv(TAG.SET, concat(sorted));
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function attribute(type: string, value: Uint8Array): Uint8Array {
  return sequence(oid(type), setOf([value]));
}

/**
 * The signed attributes as the signature covers them: SET OF { contentType id-data,
 * messageDigest, signingTime } (UTCTime through 2049, as RFC 5652 §11.3 says).
 */
export function signedAttributes(digest: Uint8Array, signingTimeMs: number): Uint8Array {
  return setOf([
    attribute(CMS_OIDS.contentType, oid(CMS_OIDS.data)),
    attribute(CMS_OIDS.messageDigest, octetString(digest)),
    attribute(CMS_OIDS.signingTime, x509Time(signingTimeMs)),
  ]);
}

/** What one SignedData is made of. */
export interface SignedDataParts {
  alg: ContainerAlgorithm;
  /** signedAttributes(): the SET OF DER that was signed. */
  attributes: Uint8Array;
  /** The token's raw signature (ECDSA r‖s). */
  signature: Uint8Array;
  /** The signer's certificate (DER). */
  certificate: Uint8Array;
  /** Its issuers, nearest first (DER). */
  chain: Uint8Array[];
}

/**
 * ContentInfo { id-signedData, SignedData } without eContent (detached), version 1: the signer is
 * named by issuer and serial number, there are no attribute certificates and the content type is
 * id-data (RFC 5652 §5.1).
 */
export function signedData(parts: SignedDataParts): Uint8Array {
  const cert = parseCertificate(parts.certificate);
  const digestAlg = digestAlgorithmIdentifier(parts.alg.cmsDigest);
  const signerInfo = sequence(
    integer(1),
    sequence(cert.issuer, tlv(TAG.INTEGER, cert.serial)),
    digestAlg,
    // [0] IMPLICIT: the same content under the context tag.
    tlv(ctx(0), parts.attributes.subarray(headerLength(parts.attributes))),
    parts.alg.signature.algorithmIdentifier,
    octetString(parts.alg.signature.encodeSignature(parts.signature)),
  );
  const body = sequence(
    integer(1),
    setOf([digestAlg]),
    sequence(oid(CMS_OIDS.data)),
    tlv(ctx(0), concat([parts.certificate, ...parts.chain])),
    setOf([signerInfo]),
  );
  return sequence(oid(CMS_OIDS.signedData), tlv(ctx(0), body));
}

function headerLength(der: Uint8Array): number {
  return der[1] & 0x80 ? 2 + (der[1] & 0x7f) : 2;
}
