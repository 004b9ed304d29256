/**
 * A CMS SignedData read by pkijs (not by the client's own reader): the signer info, and the signed
 * attributes re-tagged as the SET OF the signature covers (RFC 5652 §5.4), for tests that check
 * `svcd client sign --format cms` with an independent parser.
 *
 * @example
 * ```ts
 * import { readSignedData } from "./cms_pkijs.ts";
 * declare const der: Uint8Array;
 * const { signerInfo, signedAttributes, signature } = readSignedData(der);
 * ```
 */
import assert from "node:assert/strict";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";

/** What a test checks of a SignedData with one signer. */
export interface ReadSignedData {
  signedData: pkijs.SignedData;
  signerInfo: pkijs.SignerInfo;
  /** The signed attributes' DER, tag SET OF: what the signature is over. */
  signedAttributes: Uint8Array;
  /** The signature value (OCTET STRING content). */
  signature: Uint8Array;
  /** The attribute values by OID. */
  attributes: Map<string, unknown>;
}

/** Reads a ContentInfo holding a SignedData; asserts the content type and one signer. */
export function readSignedData(der: Uint8Array): ReadSignedData {
  const info = new pkijs.ContentInfo({ schema: asn1js.fromBER(der.slice().buffer).result });
  assert.equal(info.contentType, "1.2.840.113549.1.7.2", "id-signedData");
  const signedData = new pkijs.SignedData({ schema: info.content });
  assert.equal(signedData.signerInfos.length, 1);
  const signerInfo = signedData.signerInfos[0];
  const attrs = signerInfo.signedAttrs;
  assert.ok(attrs, "signed attributes");
  const signedAttributes = new Uint8Array(attrs.toSchema().toBER());
  signedAttributes[0] = 0x31;
  return {
    signedData,
    signerInfo,
    signedAttributes,
    signature: new Uint8Array(signerInfo.signature.valueBlock.valueHexView),
    attributes: new Map(attrs.attributes.map((a) => [a.type, a.values[0]])),
  };
}
