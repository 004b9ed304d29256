/**
 * What `svcd ca issue` certifies: a PKCS#10 request (PEM or DER) whose self-signature is checked,
 * or a bare public key (PEM "PUBLIC KEY" or DER SubjectPublicKeyInfo). Self-signatures are checked
 * with node:crypto (ECDSA, Ed25519, RSA PKCS#1 v1.5 and PSS), @noble/post-quantum (ML-DSA) and the
 * project's composite verifier.
 *
 * @example
 * ```ts
 * import { readRequest } from "./csr.ts";
 * const { subject, spki } = await readRequest(await Deno.readFile("alice.csr"));
 * ```
 */
import { verify as nodeVerify } from "node:crypto";
import { constants } from "node:crypto";
import { Buffer } from "node:buffer";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { verifyIndependently } from "../token_admin/mod.ts";

/** A request or key the tool refuses to certify; the message says why. */
export class RequestError extends Error {
  override name = "RequestError";
}

/** A parsed, self-signature-checked request. */
export interface CheckedRequest {
  subject: pkijs.RelativeDistinguishedNames;
  /** DER SubjectPublicKeyInfo, exactly as in the request. */
  spki: Uint8Array;
}

/**
 * DER from PEM (the one block with `label`) or the bytes themselves when they are not PEM.
 *
 * @example
 * ```ts
 * derFromPem(await Deno.readFile("ca.pem"), "CERTIFICATE");
 * ```
 */
export function derFromPem(input: Uint8Array, label: string): Uint8Array {
  if (input[0] === 0x30) return input;
  const text = new TextDecoder().decode(input);
  const re = new RegExp(`-----BEGIN ${label}-----([A-Za-z0-9+/=\\s]+)-----END ${label}-----`);
  const match = text.match(re);
  if (!match) {
    throw new RequestError(`expected DER or a PEM block '-----BEGIN ${label}-----'; found neither`);
  }
  return Uint8Array.fromBase64(match[1].replace(/\s+/g, ""));
}

function fromBerStrict<T>(der: Uint8Array, parse: (d: ArrayBuffer) => T, what: string): T {
  const parsed = asn1js.fromBER(der.slice().buffer);
  if (parsed.offset !== der.byteLength) {
    throw new RequestError(`${what}: not one complete DER structure`);
  }
  try {
    return parse(der.slice().buffer);
  } catch (err) {
    throw new RequestError(`${what}: ${(err as Error).message}`);
  }
}

/**
 * Reads a PKCS#10 request and checks its self-signature (proof that the requester holds the key).
 *
 * @example
 * ```ts
 * declare const csrPemBytes: Uint8Array;
 * const { subject, spki } = await readRequest(csrPemBytes);
 * ```
 */
export async function readRequest(input: Uint8Array): Promise<CheckedRequest> {
  let der = derFromPem(input, "CERTIFICATE REQUEST");
  if (der !== input) der = der.slice();
  const csr = fromBerStrict(der, (d) => pkijs.CertificationRequest.fromBER(d), "the request");
  const spki = new Uint8Array(csr.subjectPublicKeyInfo.toSchema().toBER());
  const signature = new Uint8Array(csr.signatureValue.valueBlock.valueHexView);
  const ok = await verifySignature(
    new Uint8Array(csr.tbsView),
    csr.signatureAlgorithm,
    spki,
    signature,
  );
  if (!ok) {
    throw new RequestError(
      "the request's self-signature does not verify: it was altered or not signed with the key " +
        "it carries; ask the client for a fresh request",
    );
  }
  return { subject: csr.subject, spki };
}

/**
 * Reads a public key (PEM "PUBLIC KEY" or DER SubjectPublicKeyInfo) as DER.
 *
 * @example
 * ```ts
 * const spki = readPublicKey(await Deno.readFile("alice.pub.pem"));
 * ```
 */
export function readPublicKey(input: Uint8Array): Uint8Array {
  const der = derFromPem(input, "PUBLIC KEY").slice();
  fromBerStrict(der, (d) => pkijs.PublicKeyInfo.fromBER(d), "the public key");
  return der;
}

const ECDSA_HASH: Record<string, string> = {
  "1.2.840.10045.4.3.2": "sha256",
  "1.2.840.10045.4.3.3": "sha384",
  "1.2.840.10045.4.3.4": "sha512",
};
const RSA_PKCS1_HASH: Record<string, string> = {
  "1.2.840.113549.1.1.11": "sha256",
  "1.2.840.113549.1.1.12": "sha384",
  "1.2.840.113549.1.1.13": "sha512",
};
const HASH_BY_OID: Record<string, string> = {
  "2.16.840.1.101.3.4.2.1": "sha256",
  "2.16.840.1.101.3.4.2.2": "sha384",
  "2.16.840.1.101.3.4.2.3": "sha512",
};
const ML_DSA: Record<string, typeof ml_dsa65> = {
  "2.16.840.1.101.3.4.3.17": ml_dsa44,
  "2.16.840.1.101.3.4.3.18": ml_dsa65,
  "2.16.840.1.101.3.4.3.19": ml_dsa87,
};
const ED25519 = "1.3.101.112";
const RSA_PSS = "1.2.840.113549.1.1.10";
const COMPOSITE_MLDSA65_ED25519 = "1.3.6.1.5.5.7.6.48";

/**
 * Verifies `signature` over `data` by the signature AlgorithmIdentifier and the signer's SPKI.
 * False for a wrong signature; RequestError for an algorithm the tool does not know.
 *
 * @example
 * ```ts
 * import type * as pkijs from "pkijs";
 * declare const tbs: Uint8Array, cert: pkijs.Certificate;
 * declare const issuerSpki: Uint8Array, signatureBytes: Uint8Array;
 * await verifySignature(tbs, cert.signatureAlgorithm, issuerSpki, signatureBytes);
 * ```
 */
export async function verifySignature(
  data: Uint8Array,
  algorithm: pkijs.AlgorithmIdentifier,
  spki: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  const oid = algorithm.algorithmId;
  const key = { key: Buffer.from(spki), format: "der" as const, type: "spki" as const };
  const keyOid = pkijs.PublicKeyInfo.fromBER(spki.slice().buffer).algorithm.algorithmId;
  const rawKey = () =>
    new Uint8Array(
      pkijs.PublicKeyInfo.fromBER(spki.slice().buffer).subjectPublicKey.valueBlock.valueHexView,
    );
  try {
    if (ECDSA_HASH[oid]) return nodeVerify(ECDSA_HASH[oid], data, key, signature);
    if (RSA_PKCS1_HASH[oid]) return nodeVerify(RSA_PKCS1_HASH[oid], data, key, signature);
    if (oid === ED25519) return nodeVerify(null, data, key, signature);
    if (oid === RSA_PSS) {
      const params = new pkijs.RSASSAPSSParams({ schema: algorithm.algorithmParams });
      const hash = HASH_BY_OID[params.hashAlgorithm.algorithmId];
      if (!hash) throw new RequestError("RSASSA-PSS with an unsupported hash");
      return nodeVerify(hash, data, {
        ...key,
        padding: constants.RSA_PKCS1_PSS_PADDING,
        saltLength: params.saltLength,
      }, signature);
    }
    if (ML_DSA[oid] && keyOid === oid) return ML_DSA[oid].verify(signature, data, rawKey());
    if (oid === COMPOSITE_MLDSA65_ED25519 && keyOid === oid) {
      const result = await verifyIndependently(
        { keyType: "composite-mldsa65-ed25519", publicKeyRaw: rawKey() },
        data,
        signature,
      );
      return result.ok;
    }
  } catch (err) {
    if (err instanceof RequestError) throw err;
    return false;
  }
  throw new RequestError(
    `signature algorithm ${oid} is not one svcd checks (ECDSA, Ed25519, RSA PKCS#1 v1.5/PSS, ` +
      `ML-DSA-44/65/87, ML-DSA-65+Ed25519)`,
  );
}
