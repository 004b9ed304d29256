/**
 * X.509 v3 certificates the CA tool issues, built with pkijs: the self-signed CA, client
 * certificates for the proxy, and delegated OCSP responders. The TBSCertificate is encoded once
 * and those exact bytes are handed to the signer (the token key) and kept in the result; the
 * signature AlgorithmIdentifier and value encoding are lib/ocsp/algorithms.ts's, as in responses.
 *
 * @example
 * ```ts
 * import type * as pkijs from "pkijs";
 * import type { Signer } from "../ocsp/mod.ts";
 * declare const issuer: pkijs.RelativeDistinguishedNames, subject: pkijs.RelativeDistinguishedNames;
 * declare const serial: bigint, spki: Uint8Array, caSpki: Uint8Array, signer: Signer;
 * declare const notBefore: Date, notAfter: Date;
 * const der = await buildCertificate({ serial, issuer, subject, spki, notBefore, notAfter,
 *   extensions: clientExtensions(spki, caSpki) }, signer);
 * ```
 */
import { createHash } from "node:crypto";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { SIGNATURE_ALGORITHMS, type Signer } from "../ocsp/mod.ts";
import {
  authorityInfoAccess,
  type CaUrls,
  crlDistributionPoints,
  distributionPointUrl,
  type ExtensionValue,
} from "./urls.ts";

/** The fields of one certificate. */
export interface CertificateFields {
  /** Positive serial number. */
  serial: bigint;
  issuer: pkijs.RelativeDistinguishedNames;
  subject: pkijs.RelativeDistinguishedNames;
  /** DER SubjectPublicKeyInfo of the subject. */
  spki: Uint8Array;
  notBefore: Date;
  notAfter: Date;
  extensions: pkijs.Extension[];
}

const OID = {
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  extKeyUsage: "2.5.29.37",
  subjectKeyIdentifier: "2.5.29.14",
  authorityKeyIdentifier: "2.5.29.35",
  subjectAltName: "2.5.29.17",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
  codeSigning: "1.3.6.1.5.5.7.3.3",
  emailProtection: "1.3.6.1.5.5.7.3.4",
  ocspSigning: "1.3.6.1.5.5.7.3.9",
  documentSigning: "1.3.6.1.5.5.7.3.36",
  ocspNoCheck: "1.3.6.1.5.5.7.48.1.5",
} as const;

/** KeyUsage bit numbers (RFC 5280 §4.2.1.3). */
const KEY_USAGE = {
  digitalSignature: 0,
  contentCommitment: 1,
  keyEncipherment: 2,
  keyCertSign: 5,
  cRLSign: 6,
} as const;

const ab = (bytes: Uint8Array): ArrayBuffer => bytes.slice().buffer;

/**
 * The DER INTEGER content of a positive serial (a leading zero byte when the top bit is set).
 *
 * @example
 * ```ts
 * serialBytes(0x80n); // → [0x00, 0x80]
 * ```
 */
export function serialBytes(serial: bigint): Uint8Array {
  if (serial <= 0n) throw new RangeError("a certificate serial number is positive");
  let hex = serial.toString(16);
  if (hex.length % 2) hex = "0" + hex;
  if (parseInt(hex.slice(0, 2), 16) & 0x80) hex = "00" + hex;
  return Uint8Array.fromHex(hex);
}

/**
 * RFC 5280 §4.1.2.5 (and §5.1.2.4 for CRLs): UTCTime through 2049, GeneralizedTime from 2050;
 * whole seconds.
 *
 * @example
 * ```ts
 * x509Time(new Date("2030-01-01T00:00:00Z")).type; // 0 (UTCTime)
 * ```
 */
export function x509Time(date: Date): pkijs.Time {
  const seconds = new Date(Math.floor(date.getTime() / 1000) * 1000);
  const type = seconds.getUTCFullYear() < 2050 ? 0 : 1;
  return new pkijs.Time({ type, value: seconds });
}

/**
 * Builds and signs a certificate; returns its DER.
 *
 * @example
 * ```ts
 * import type { Signer } from "../ocsp/mod.ts";
 * declare const fields: CertificateFields, signer: Signer;
 * const der = await buildCertificate(fields, signer);
 * ```
 */
export async function buildCertificate(
  fields: CertificateFields,
  signer: Signer,
): Promise<Uint8Array> {
  const { algorithmIdentifier, encodeSignature } = SIGNATURE_ALGORITHMS[signer.keyType];
  const algorithm = pkijs.AlgorithmIdentifier.fromBER(ab(algorithmIdentifier));
  const cert = new pkijs.Certificate({
    version: 2,
    serialNumber: new asn1js.Integer({ valueHex: ab(serialBytes(fields.serial)) }),
    signature: algorithm,
    signatureAlgorithm: pkijs.AlgorithmIdentifier.fromBER(ab(algorithmIdentifier)),
    issuer: fields.issuer,
    subject: fields.subject,
    notBefore: x509Time(fields.notBefore),
    notAfter: x509Time(fields.notAfter),
    subjectPublicKeyInfo: pkijs.PublicKeyInfo.fromBER(ab(fields.spki)),
    extensions: fields.extensions,
  });
  const tbs = new Uint8Array(cert.encodeTBS().toBER());
  cert.tbsView = tbs;
  const signature = encodeSignature(await signer.sign(tbs));
  cert.signatureValue = new asn1js.BitString({ valueHex: ab(signature) });
  return new Uint8Array(cert.toSchema().toBER());
}

/**
 * One extension whose extnValue is the DER of `value`.
 *
 * @example
 * ```ts
 * import * as asn1js from "asn1js";
 * extension("2.5.29.20", false, new asn1js.Integer({ value: 1 })); // cRLNumber 1
 * ```
 */
export function extension(
  extnID: string,
  critical: boolean,
  value: asn1js.BaseBlock,
): pkijs.Extension {
  return new pkijs.Extension({ extnID, critical, extnValue: value.toBER() });
}

/** DER named BIT STRING for KeyUsage: trailing zero bits dropped (X.690 §11.2.2). */
function keyUsage(bits: number[]): asn1js.BitString {
  const highest = Math.max(...bits);
  const bytes = new Uint8Array(Math.floor(highest / 8) + 1);
  for (const bit of bits) bytes[bit >> 3] |= 0x80 >> (bit & 7);
  return new asn1js.BitString({ valueHex: bytes.buffer, unusedBits: 7 - (highest % 8) });
}

/**
 * The key identifier of RFC 5280 §4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits.
 *
 * @example
 * ```ts
 * declare const spkiDer: Uint8Array;
 * keyIdentifier(spkiDer); // 20 bytes
 * ```
 */
export function keyIdentifier(spki: Uint8Array): Uint8Array {
  const info = pkijs.PublicKeyInfo.fromBER(ab(spki));
  const bits = new Uint8Array(info.subjectPublicKey.valueBlock.valueHexView);
  return new Uint8Array(createHash("sha1").update(bits).digest());
}

function subjectKeyId(spki: Uint8Array): pkijs.Extension {
  return extension(
    OID.subjectKeyIdentifier,
    false,
    new asn1js.OctetString({ valueHex: ab(keyIdentifier(spki)) }),
  );
}

/**
 * authorityKeyIdentifier: the keyIdentifier of the issuer's key (its SKI), as certificates and
 * CRLs carry it.
 */
export function authorityKeyId(issuerSpki: Uint8Array): pkijs.Extension {
  const aki = new pkijs.AuthorityKeyIdentifier({
    keyIdentifier: new asn1js.OctetString({ valueHex: ab(keyIdentifier(issuerSpki)) }),
  });
  return extension(OID.authorityKeyIdentifier, false, aki.toSchema());
}

function endEntity(
  usage: string,
  subjectSpki: Uint8Array,
  issuerSpki: Uint8Array,
  pointers: pkijs.Extension[],
  uses: { keyUsage: number[]; purposes: string[] } = {
    keyUsage: [KEY_USAGE.digitalSignature],
    purposes: [usage],
  },
) {
  return [
    extension(OID.basicConstraints, true, new pkijs.BasicConstraints({ cA: false }).toSchema()),
    extension(OID.keyUsage, true, keyUsage(uses.keyUsage)),
    extension(
      OID.extKeyUsage,
      false,
      new pkijs.ExtKeyUsage({ keyPurposes: uses.purposes }).toSchema(),
    ),
    subjectKeyId(subjectSpki),
    authorityKeyId(issuerSpki),
    ...pointers,
  ];
}

/** What a token key is certified for (`svcd ca certify --profile`). */
export const PROFILES = ["code-signing", "document-signing", "tls-server", "tls-client"] as const;

/** One of {@link PROFILES}. */
export type Profile = typeof PROFILES[number];

/**
 * keyUsage and extendedKeyUsage of each profile. Document signing carries both the RFC 9336
 * purpose and emailProtection: CMS verifiers (openssl cms, S/MIME clients) check for the latter,
 * document tools for the former. keyEncipherment is added for a TLS server's RSA key only
 * (RSA key transport; no other key type can encipher).
 */
const PROFILE_USES: Record<Profile, { keyUsage: number[]; purposes: string[] }> = {
  "code-signing": { keyUsage: [KEY_USAGE.digitalSignature], purposes: [OID.codeSigning] },
  "document-signing": {
    keyUsage: [KEY_USAGE.digitalSignature, KEY_USAGE.contentCommitment],
    purposes: [OID.documentSigning, OID.emailProtection],
  },
  "tls-server": { keyUsage: [KEY_USAGE.digitalSignature], purposes: [OID.serverAuth] },
  "tls-client": { keyUsage: [KEY_USAGE.digitalSignature], purposes: [OID.clientAuth] },
};

/**
 * The extensions of a certificate for a token key with `profile`: its keyUsage and
 * extendedKeyUsage, a subjectAltName of `dnsNames` when there are any, the key identifiers and the
 * revocation pointers.
 *
 * @example
 * ```ts
 * declare const spki: Uint8Array, caSpki: Uint8Array;
 * profileExtensions("tls-server", spki, caSpki, [], { rsa: false, dnsNames: ["sign.example.org"] });
 * ```
 */
export function profileExtensions(
  profile: Profile,
  spki: Uint8Array,
  issuerSpki: Uint8Array,
  pointers: pkijs.Extension[],
  key: { rsa: boolean; dnsNames: string[] },
): pkijs.Extension[] {
  const uses = PROFILE_USES[profile];
  const keyUsage = profile === "tls-server" && key.rsa
    ? [...uses.keyUsage, KEY_USAGE.keyEncipherment]
    : uses.keyUsage;
  const names = key.dnsNames.length === 0 ? [] : [
    extension(
      OID.subjectAltName,
      false,
      new pkijs.AltName({
        altNames: key.dnsNames.map((value) => new pkijs.GeneralName({ type: 2, value })),
      }).toSchema(),
    ),
  ];
  return [
    ...endEntity(uses.purposes[0], spki, issuerSpki, pointers, { ...uses, keyUsage }),
    ...names,
  ];
}

/** A pkijs extension from an OID, criticality and DER value. */
export function pkijsExtension(e: ExtensionValue): pkijs.Extension {
  return new pkijs.Extension({ extnID: e.oid, critical: e.critical, extnValue: ab(e.value) });
}

/**
 * Where relying parties find the revocation data of the certificate with this serial: Authority
 * Information Access (OCSP, CA issuers) and CRL Distribution Points (its partition's CRL), for the
 * URLs the CA folder records; none when it records none.
 *
 * @example
 * ```ts
 * revocationPointers({ ocsp: "http://pki.example.org/ocsp" }, 0x1an).length; // 1 (AIA only)
 * ```
 */
export function revocationPointers(urls: CaUrls | undefined, serial: bigint): pkijs.Extension[] {
  if (!urls) return [];
  const out: ExtensionValue[] = [];
  const aia = authorityInfoAccess(urls);
  if (aia) out.push(aia);
  const cdp = distributionPointUrl(urls, serial);
  if (cdp) out.push(crlDistributionPoints(cdp));
  return out.map(pkijsExtension);
}

/**
 * CA extensions: basicConstraints CA (path length 0: it issues end-entity certificates only),
 * keyUsage keyCertSign + cRLSign + digitalSignature (so it can sign OCSP responses itself).
 */
export function caExtensions(spki: Uint8Array): pkijs.Extension[] {
  const constraints = new pkijs.BasicConstraints({ cA: true, pathLenConstraint: 0 });
  return [
    extension(OID.basicConstraints, true, constraints.toSchema()),
    extension(
      OID.keyUsage,
      true,
      keyUsage([KEY_USAGE.digitalSignature, KEY_USAGE.keyCertSign, KEY_USAGE.cRLSign]),
    ),
    subjectKeyId(spki),
  ];
}

/**
 * Client certificate extensions for the proxy's client authentication (EKU clientAuth).
 *
 * @example
 * ```ts
 * declare const clientSpki: Uint8Array, caSpki: Uint8Array;
 * clientExtensions(clientSpki, caSpki);
 * ```
 */
export function clientExtensions(
  spki: Uint8Array,
  issuerSpki: Uint8Array,
  pointers: pkijs.Extension[] = [],
): pkijs.Extension[] {
  return endEntity(OID.clientAuth, spki, issuerSpki, pointers);
}

/**
 * Delegated OCSP responder extensions: EKU id-kp-OCSPSigning and id-pkix-ocsp-nocheck (RFC 6960
 * §4.2.2.2.1: clients do not check the responder's own status).
 *
 * @example
 * ```ts
 * declare const responderSpki: Uint8Array, caSpki: Uint8Array;
 * responderExtensions(responderSpki, caSpki);
 * ```
 */
export function responderExtensions(
  spki: Uint8Array,
  issuerSpki: Uint8Array,
  pointers: pkijs.Extension[] = [],
): pkijs.Extension[] {
  return [
    ...endEntity(OID.ocspSigning, spki, issuerSpki, pointers),
    extension(OID.ocspNoCheck, false, new asn1js.Null()),
  ];
}
