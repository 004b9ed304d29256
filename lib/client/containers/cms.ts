/**
 * A detached CMS SignedData (RFC 5652) with one signer: the signed attributes (content type,
 * message digest, signing time) are made here, their DER is what the key signs (§5.4: the SET OF
 * form, tag 0x31), and the SignedData carries the signer's certificate and its chain. The reader
 * takes back exactly what the writer makes (strict DER), for `svcd client verify --format cms`.
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
import {
  ctx,
  DerReader,
  integer,
  octetString,
  oid,
  oidContent,
  sequence,
  TAG,
  tlv,
  x509Time,
} from "../../der/mod.ts";
import { bytesEqual, concat } from "../../bytes/mod.ts";
import { parseCertificate } from "../../ocsp/mod.ts";
import {
  type CmsDigest,
  type ContainerAlgorithm,
  DIGEST_OIDS,
  digestAlgorithmIdentifier,
} from "./algorithms.ts";

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

/** A SignedData as `svcd client verify --format cms` checks it. */
export interface ParsedSignedData {
  /** The certificates it carries (DER), in order. */
  certificates: Uint8Array[];
  /** The signer: issuer Name (DER) and serial INTEGER content. */
  signerIssuer: Uint8Array;
  signerSerial: Uint8Array;
  digest: CmsDigest;
  /** The signed attributes re-tagged as the SET OF the signature covers. */
  signedAttributes: Uint8Array;
  /** The messageDigest attribute's value. */
  messageDigest: Uint8Array;
  /** SignerInfo.signatureAlgorithm (DER). */
  signatureAlgorithm: Uint8Array;
  /** SignerInfo.signature's content. */
  signature: Uint8Array;
}

/**
 * Reads a detached SignedData with one signer that uses signed attributes; throws a DerError or an
 * Error saying what is not as RFC 5652 requires (eContent present, no messageDigest, a content
 * type other than id-data…).
 */
export function parseSignedData(der: Uint8Array): ParsedSignedData {
  const top = new DerReader(der);
  const info = top.enter(TAG.SEQUENCE, "ContentInfo");
  top.finish("ContentInfo");
  expectOid(info, CMS_OIDS.signedData, "contentType id-signedData");
  const wrapper = info.enter(ctx(0), "[0] content");
  info.finish();
  const sd = wrapper.enter(TAG.SEQUENCE, "SignedData");
  wrapper.finish();
  sd.readSmallInteger();
  const digestAlgs = sd.enter(TAG.SET, "digestAlgorithms");
  while (!digestAlgs.done) digestAlgs.expect(TAG.SEQUENCE);
  const encap = sd.enter(TAG.SEQUENCE, "encapContentInfo");
  expectOid(encap, CMS_OIDS.data, "eContentType id-data");
  if (!encap.done) throw new Error("the SignedData carries its content: not a detached signature");
  const certificates: Uint8Array[] = [];
  const certs = sd.enterOptional(ctx(0));
  while (certs && !certs.done) certificates.push(certs.raw(certs.expect(TAG.SEQUENCE)));
  if (sd.peekTag() === ctx(1)) sd.next(); // CRLs: not used here
  const signerInfos = sd.enter(TAG.SET, "signerInfos");
  sd.finish();
  const si = signerInfos.enter(TAG.SEQUENCE, "SignerInfo");
  if (!signerInfos.done) throw new Error("more than one SignerInfo: svcd writes one");
  return { certificates, ...parseSignerInfo(si) };
}

type SignerFields = Omit<ParsedSignedData, "certificates">;

function parseSignerInfo(si: DerReader): SignerFields {
  if (si.readSmallInteger() !== 1) throw new Error("SignerInfo version is not 1 (issuerAndSerial)");
  const sid = si.enter(TAG.SEQUENCE, "IssuerAndSerialNumber");
  const signerIssuer = sid.raw(sid.expect(TAG.SEQUENCE, "issuer Name"));
  const signerSerial = sid.content(sid.expect(TAG.INTEGER, "serialNumber"));
  sid.finish();
  const digest = readDigestAlgorithm(si);
  const attrsTlv = si.expect(ctx(0), "signedAttrs");
  const signedAttrs = concat([
    Uint8Array.of(TAG.SET),
    si.bytes.subarray(attrsTlv.start + 1, attrsTlv.end),
  ]);
  const signatureAlgorithm = si.raw(si.expect(TAG.SEQUENCE, "signatureAlgorithm"));
  const signature = si.readOctetString();
  if (si.peekTag() === ctx(1)) si.next(); // unsigned attributes: not covered by the signature
  si.finish("SignerInfo");
  return {
    signerIssuer,
    signerSerial,
    digest,
    signedAttributes: signedAttrs,
    messageDigest: readAttributes(signedAttrs),
    signatureAlgorithm,
    signature,
  };
}

function readDigestAlgorithm(r: DerReader): CmsDigest {
  const alg = r.enter(TAG.SEQUENCE, "digestAlgorithm");
  const id = alg.readOid();
  if (!alg.done) alg.readNull(); // NULL parameters are accepted as RFC 5754 §2 says
  alg.finish();
  for (const [name, dotted] of Object.entries(DIGEST_OIDS)) {
    if (bytesEqual(id, oidContent(dotted))) return name as CmsDigest;
  }
  throw new Error("the digest algorithm is not SHA-256, SHA-384 or SHA-512");
}

/** The messageDigest value, once contentType is id-data (RFC 5652 §5.3 requires both). */
function readAttributes(set: Uint8Array): Uint8Array {
  const r = new DerReader(set).enter(TAG.SET, "signedAttrs");
  let digest: Uint8Array | undefined;
  let contentType = false;
  while (!r.done) {
    const attr = r.enter(TAG.SEQUENCE, "Attribute");
    const type = attr.readOid();
    const values = attr.enter(TAG.SET, "attrValues");
    attr.finish();
    if (bytesEqual(type, oidContent(CMS_OIDS.messageDigest))) {
      if (digest) throw new Error("two messageDigest attributes");
      digest = values.readOctetString();
      values.finish("messageDigest value");
    } else if (bytesEqual(type, oidContent(CMS_OIDS.contentType))) {
      expectOid(values, CMS_OIDS.data, "content type id-data");
      values.finish("contentType value");
      contentType = true;
    }
  }
  if (!digest || !contentType) {
    throw new Error("the signed attributes lack the messageDigest or the contentType");
  }
  return digest;
}

function expectOid(r: DerReader, dotted: string, what: string): void {
  if (!bytesEqual(r.readOid(), oidContent(dotted))) throw new Error(`expected ${what}`);
}
