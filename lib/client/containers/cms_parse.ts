/**
 * Reads back a detached CMS SignedData with one signer that uses signed attributes (RFC 5652),
 * exactly as ./cms.ts writes it (strict DER), for `svcd client verify --format cms`.
 *
 * @example
 * ```ts
 * import { parseSignedData } from "./cms_parse.ts";
 * declare const p7s: Uint8Array;
 * parseSignedData(p7s).signedAttributes; // what the signature covers
 * ```
 */
import { ctx, DerReader, oidContent, TAG } from "../../der/mod.ts";
import { bytesEqual, concat } from "../../bytes/mod.ts";
import { type CmsDigest, DIGEST_OIDS } from "./algorithms.ts";
import { CMS_OIDS } from "./cms.ts";

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
