/**
 * Just enough of an X.509 certificate for OCSP: the subject and issuer Names (DER), the
 * SubjectPublicKeyInfo and its key bits (what CertID and responderID hash), the serial and the
 * validity. Strict DER through lib/der; extensions are not interpreted.
 *
 * @example
 * ```ts
 * import { parseCertificate, readCertificates } from "./certificate.ts";
 * const [ca] = readCertificates(await Deno.readFile("ca.pem"));
 * ca.subject; // DER Name
 * ```
 */
import { ctx, DerReader, TAG } from "../der/mod.ts";

/** The parts of a certificate OCSP uses (subarrays of `der`). */
export interface CertificateInfo {
  /** The whole certificate. */
  der: Uint8Array;
  /** tbsCertificate, header included (what the signature covers). */
  tbs: Uint8Array;
  /** Serial INTEGER content (two's complement). */
  serial: Uint8Array;
  /** The signature AlgorithmIdentifier inside tbsCertificate (DER). */
  signatureAlgorithm: Uint8Array;
  issuer: Uint8Array;
  subject: Uint8Array;
  notBefore: number;
  notAfter: number;
  /** SubjectPublicKeyInfo (DER). */
  spki: Uint8Array;
  /** Its AlgorithmIdentifier (DER). */
  spkiAlgorithm: Uint8Array;
  /** The subjectPublicKey BIT STRING's bytes (no unused-bits octet): what key hashes cover. */
  publicKey: Uint8Array;
  /** The outer signature BIT STRING's bytes. */
  signature: Uint8Array;
}

/**
 * Parses one DER certificate. Throws DerError on anything that is not a strict DER certificate.
 *
 * @example
 * ```ts
 * declare const der: Uint8Array;
 * parseCertificate(der).publicKey; // key bits
 * ```
 */
export function parseCertificate(der: Uint8Array): CertificateInfo {
  const outer = new DerReader(der);
  const cert = outer.enter(TAG.SEQUENCE, "Certificate");
  outer.finish("certificate");
  const tbsTlv = cert.expect(TAG.SEQUENCE, "tbsCertificate");
  const tbs = new DerReader(der, tbsTlv.contentStart, tbsTlv.end, cert.depth + 1);
  const version = tbs.enterOptional(ctx(0));
  if (version) {
    version.readSmallInteger();
    version.finish();
  }
  const serial = tbs.readIntegerBytes(64);
  const signatureAlgorithm = tbs.raw(tbs.expect(TAG.SEQUENCE, "signature AlgorithmIdentifier"));
  const issuer = tbs.raw(tbs.expect(TAG.SEQUENCE, "issuer Name"));
  const validity = tbs.enter(TAG.SEQUENCE, "Validity");
  const notBefore = validity.readTime();
  const notAfter = validity.readTime();
  validity.finish("time");
  const subject = tbs.raw(tbs.expect(TAG.SEQUENCE, "subject Name"));
  const spkiTlv = tbs.expect(TAG.SEQUENCE, "SubjectPublicKeyInfo");
  const spki = new DerReader(der, spkiTlv.contentStart, spkiTlv.end, tbs.depth + 1);
  const spkiAlgorithm = spki.raw(spki.expect(TAG.SEQUENCE, "key AlgorithmIdentifier"));
  const publicKey = spki.readBitStringBytes();
  spki.finish();
  // issuerUniqueID, subjectUniqueID, extensions: skipped, but each must be a well-formed element.
  while (!tbs.done) tbs.next();
  cert.expect(TAG.SEQUENCE, "signatureAlgorithm");
  const signature = cert.readBitStringBytes();
  cert.finish();
  return {
    der,
    tbs: tbs.raw(tbsTlv),
    serial,
    signatureAlgorithm,
    issuer,
    subject,
    notBefore,
    notAfter,
    spki: tbs.raw(spkiTlv),
    spkiAlgorithm,
    publicKey,
    signature,
  };
}

/**
 * The certificates in PEM text (every CERTIFICATE block, in order) or one DER certificate.
 * Throws when there is none or a block is not strict base64/DER.
 *
 * @example
 * ```ts
 * const chain = readCertificates(await Deno.readFile("chain.pem"));
 * ```
 */
export function readCertificates(bytes: Uint8Array): CertificateInfo[] {
  if (bytes[0] === TAG.SEQUENCE) return [parseCertificate(bytes)];
  const text = new TextDecoder().decode(bytes);
  const blocks = [
    ...text.matchAll(
      /-----BEGIN CERTIFICATE-----\r?\n([A-Za-z0-9+/=\r\n]*?)-----END CERTIFICATE-----/g,
    ),
  ];
  if (blocks.length === 0) {
    throw new Error("no certificate: expected PEM CERTIFICATE blocks or DER");
  }
  return blocks.map((m) => {
    const der = Uint8Array.fromBase64(m[1].replace(/\r?\n/g, ""));
    return parseCertificate(der);
  });
}
