/**
 * X.509 v2 CRLs (RFC 5280 §5) of the CA folder's revocations, built with pkijs and signed by the
 * CA's token key with lib/ocsp/algorithms.ts's AlgorithmIdentifier and signature encoding — the
 * path certificates take. nginx cannot ask svcd's OCSP responder (it only sends GET, which svcd
 * does not serve), so its `ssl_crl` is how a revocation reaches the proxy.
 *
 * @example
 * ```ts
 * import type * as pkijs from "pkijs";
 * import type { Signer } from "../ocsp/algorithms.ts";
 * import type { IndexEntry } from "../ocsp/index_db.ts";
 * declare const issuer: pkijs.RelativeDistinguishedNames, issuerSpki: Uint8Array, signer: Signer;
 * declare const thisUpdate: Date, nextUpdate: Date, entries: IndexEntry[];
 * const der = await buildCrl({ issuer, issuerSpki, number: 1n, thisUpdate, nextUpdate,
 *   revoked: revokedFromIndex(entries) }, signer);
 * ```
 */
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { SIGNATURE_ALGORITHMS, type Signer } from "../ocsp/algorithms.ts";
import type { IndexEntry } from "../ocsp/index_db.ts";
import { authorityKeyId, extension, serialBytes, x509Time } from "./certificate.ts";

/** One revoked certificate as a CRL lists it. */
export interface CrlEntry {
  serial: bigint;
  revokedAt: Date;
  /** CRLReason code; undefined (or unspecified, 0) leaves the reasonCode extension out. */
  reason?: number;
}

/** What a CRL says. */
export interface CrlFields {
  /** The CA certificate's subject. */
  issuer: pkijs.RelativeDistinguishedNames;
  /** DER SubjectPublicKeyInfo of the CA key (for authorityKeyIdentifier). */
  issuerSpki: Uint8Array;
  /** cRLNumber: larger than every earlier CRL's of this CA. */
  number: bigint;
  thisUpdate: Date;
  nextUpdate: Date;
  revoked: CrlEntry[];
}

const OID = { cRLNumber: "2.5.29.20", reasonCode: "2.5.29.21" } as const;

const ab = (bytes: Uint8Array): ArrayBuffer => bytes.slice().buffer;

/**
 * The R lines of an index as CRL entries, in file order (V and E lines are not revoked).
 *
 * @example
 * ```ts
 * import { parseIndex } from "../ocsp/index_db.ts";
 * declare const text: string;
 * revokedFromIndex(parseIndex(text)); // [{ serial: 0x1An, revokedAt, reason: 1 }]
 * ```
 */
export function revokedFromIndex(entries: IndexEntry[]): CrlEntry[] {
  return entries.filter((e) => e.status === "R").map((e) => ({
    serial: BigInt("0x" + e.serial),
    revokedAt: new Date(e.revokedAt!),
    reason: e.reason,
  }));
}

function revokedCertificate(entry: CrlEntry): pkijs.RevokedCertificate {
  // RFC 5280 §5.3.1: the reason code unspecified SHOULD be absent rather than 0.
  const withReason = entry.reason !== undefined && entry.reason !== 0;
  return new pkijs.RevokedCertificate({
    userCertificate: new asn1js.Integer({ valueHex: ab(serialBytes(entry.serial)) }),
    revocationDate: x509Time(entry.revokedAt),
    ...(withReason
      ? {
        crlEntryExtensions: new pkijs.Extensions({
          extensions: [
            extension(OID.reasonCode, false, new asn1js.Enumerated({ value: entry.reason })),
          ],
        }),
      }
      : {}),
  });
}

/**
 * Builds and signs a CRL v2; returns its DER. No revokedCertificates field when nothing is revoked
 * (RFC 5280 §5.1.2.6: an empty list is absent).
 *
 * @example
 * ```ts
 * declare const fields: CrlFields;
 * declare const token: { sign(key: unknown, tbs: Uint8Array): Promise<Uint8Array> }, key: unknown;
 * const der = await buildCrl(fields, { keyType: "ec-p256", sign: (tbs) => token.sign(key, tbs) });
 * ```
 */
export async function buildCrl(fields: CrlFields, signer: Signer): Promise<Uint8Array> {
  if (fields.number < 0n) throw new RangeError("a cRLNumber is not negative");
  const { algorithmIdentifier, encodeSignature } = SIGNATURE_ALGORITHMS[signer.keyType];
  const crl = new pkijs.CertificateRevocationList({
    version: 1, // v2
    signature: pkijs.AlgorithmIdentifier.fromBER(ab(algorithmIdentifier)),
    signatureAlgorithm: pkijs.AlgorithmIdentifier.fromBER(ab(algorithmIdentifier)),
    issuer: fields.issuer,
    thisUpdate: x509Time(fields.thisUpdate),
    nextUpdate: x509Time(fields.nextUpdate),
    ...(fields.revoked.length > 0
      ? { revokedCertificates: fields.revoked.map(revokedCertificate) }
      : {}),
    crlExtensions: new pkijs.Extensions({
      extensions: [
        authorityKeyId(fields.issuerSpki),
        extension(
          OID.cRLNumber,
          false,
          new asn1js.Integer({ valueHex: ab(crlNumberBytes(fields.number)) }),
        ),
      ],
    }),
  });
  // toSchema(true) encodes the TBS from the fields (encodeTBS itself is protected in pkijs).
  const tbs = new Uint8Array(crl.toSchema(true).valueBlock.value[0].toBER());
  crl.tbsView = tbs;
  crl.signatureValue = new asn1js.BitString({
    valueHex: ab(encodeSignature(await signer.sign(tbs))),
  });
  return new Uint8Array(crl.toSchema().toBER());
}

/** DER INTEGER content of a non-negative number (0 is one zero byte). */
function crlNumberBytes(n: bigint): Uint8Array {
  return n === 0n ? Uint8Array.of(0) : serialBytes(n);
}
