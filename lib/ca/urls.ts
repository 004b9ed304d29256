/**
 * Where relying parties find a CA's revocation data, as its folder records it (`ca.json`): the
 * OCSP URL (the public listener's POST /ocsp), the CRL URL (a folder URL: `full.crl` in it, and
 * `K.crl` for each partition) and the CA issuers URL (GET /certificates). Every certificate
 * `svcd ca` issues carries them: Authority Information Access (RFC 5280 §4.2.2.1) and CRL
 * Distribution Points (§4.2.1.13), the distribution point being the certificate's partition.
 *
 * A certificate's partition is its serial modulo the partition count, fixed when the CRL URL is
 * first recorded: a certificate never changes partition, and `svcd ca`'s serials, counted up from
 * a random start, fill the partitions in turn.
 *
 * @example
 * ```ts
 * const urls = { crl: "http://pki.example.org/crl", crlPartitions: 16 };
 * distributionPointUrl(urls, 0x4a1bn); // "http://pki.example.org/crl/11.crl"
 * ```
 */
import { oid, sequence, tlv } from "../der/mod.ts";

/** The URLs of a CA folder and the CRL partition count. */
export interface CaUrls {
  /** The OCSP responder (POST), for AIA id-ad-ocsp. */
  ocsp?: string;
  /** The folder URL of the CRLs: `full.crl`, and `K.crl` per partition. */
  crl?: string;
  /** Where the CA certificate is published (GET /certificates), for AIA id-ad-caIssuers. */
  caIssuers?: string;
  /** CRL partitions; 1 (the default) = one CRL, full.crl, for every certificate. */
  crlPartitions?: number;
}

/** Most CRL partitions a CA may have. */
export const MAX_CRL_PARTITIONS = 1024;

/** The file name of the full CRL (every revoked certificate of the CA), DER. */
export const FULL_CRL = "full.crl";
/** The full CRL again as PEM, for nginx's `ssl_crl` (which reads PEM only). */
export const FULL_CRL_PEM = "full.pem";

/**
 * The file name of partition `k`'s CRL, or of the full CRL.
 *
 * @example
 * ```ts
 * crlFileName(3); // "3.crl"
 * crlFileName("full"); // "full.crl"
 * ```
 */
export function crlFileName(k: number | "full"): string {
  return k === "full" ? FULL_CRL : `${k}.crl`;
}

/**
 * The CRL file names of a layout: `full.crl` first, then one per partition (none when there is one
 * partition).
 *
 * @example
 * ```ts
 * crlFileNames(2); // ["full.crl", "0.crl", "1.crl"]
 * ```
 */
export function crlFileNames(partitions: number): string[] {
  const names = [FULL_CRL];
  if (partitions > 1) { for (let k = 0; k < partitions; k++) names.push(crlFileName(k)); }
  return names;
}

/**
 * The partition of a serial (its unsigned big-endian bytes, or the number).
 *
 * @example
 * ```ts
 * partitionOf(Uint8Array.of(0x01, 0x00), 16); // 0 (0x100 mod 16)
 * ```
 */
export function partitionOf(serial: bigint | Uint8Array, partitions: number): number {
  if (partitions <= 1) return 0;
  if (typeof serial === "bigint") return Number(serial % BigInt(partitions));
  let r = 0;
  for (let i = 0; i < serial.length; i++) r = (r * 256 + serial[i]) % partitions;
  return r;
}

/**
 * The CRL Distribution Point of a certificate: its partition's CRL, or the full CRL when there is
 * one partition; undefined without a CRL URL.
 */
export function distributionPointUrl(urls: CaUrls, serial: bigint): string | undefined {
  if (!urls.crl) return undefined;
  const n = urls.crlPartitions ?? 1;
  return `${urls.crl}/${n > 1 ? crlFileName(partitionOf(serial, n)) : FULL_CRL}`;
}

/** A URL problem: the message names the option and what to give. */
export class UrlError extends Error {
  override name = "UrlError";
}

/**
 * An http(s) URL as a certificate may carry it: ASCII (an IA5String), no query or fragment, kept
 * without a trailing '/'. Throws {@link UrlError} naming `option`.
 *
 * @example
 * ```ts
 * checkUrl("http://pki.example.org/crl/", "--crl-url"); // "http://pki.example.org/crl"
 * ```
 */
export function checkUrl(text: string, option: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch { /* refused below */ }
  const ascii = /^[\x21-\x7e]+$/.test(text);
  if (!url || !/^https?:$/.test(url.protocol) || url.search || url.hash || !ascii) {
    throw new UrlError(
      `${option} ${JSON.stringify(text)} is not an http(s) URL without query or fragment; give ` +
        `e.g. http://pki.example.org${option === "--crl-url" ? "/crl" : "/ocsp"}`,
    );
  }
  return text.replace(/\/+$/, "");
}

const OID = {
  authorityInfoAccess: "1.3.6.1.5.5.7.1.1",
  ocsp: "1.3.6.1.5.5.7.48.1",
  caIssuers: "1.3.6.1.5.5.7.48.2",
  crlDistributionPoints: "2.5.29.31",
  issuingDistributionPoint: "2.5.29.28",
} as const;

/** GeneralName uniformResourceIdentifier: [6] IMPLICIT IA5String. */
function uriName(url: string): Uint8Array {
  return tlv(0x86, new TextEncoder().encode(url));
}

/** DistributionPointName fullName: [0] (a CHOICE, so explicit) over [0] IMPLICIT GeneralNames. */
function fullName(url: string): Uint8Array {
  return tlv(0xa0, tlv(0xa0, uriName(url)));
}

/** One extension's OID, criticality and DER value, for certificate and CRL builders. */
export interface ExtensionValue {
  oid: string;
  critical: boolean;
  value: Uint8Array;
}

/**
 * Authority Information Access with the OCSP and CA issuers URLs given (undefined when neither).
 *
 * @example
 * ```ts
 * authorityInfoAccess({ ocsp: "http://pki.example.org/ocsp" })?.oid; // "1.3.6.1.5.5.7.1.1"
 * ```
 */
export function authorityInfoAccess(urls: CaUrls): ExtensionValue | undefined {
  const descriptions: Uint8Array[] = [];
  if (urls.ocsp) descriptions.push(sequence(oid(OID.ocsp), uriName(urls.ocsp)));
  if (urls.caIssuers) descriptions.push(sequence(oid(OID.caIssuers), uriName(urls.caIssuers)));
  if (descriptions.length === 0) return undefined;
  return { oid: OID.authorityInfoAccess, critical: false, value: sequence(...descriptions) };
}

/**
 * CRL Distribution Points naming one URL (non-critical, RFC 5280 §4.2.1.13).
 *
 * @example
 * ```ts
 * crlDistributionPoints("http://pki.example.org/crl/3.crl").oid; // "2.5.29.31"
 * ```
 */
export function crlDistributionPoints(url: string): ExtensionValue {
  return {
    oid: OID.crlDistributionPoints,
    critical: false,
    value: sequence(sequence(fullName(url))),
  };
}

/**
 * issuingDistributionPoint naming one URL: critical (RFC 5280 §5.2.5); its name is the
 * distribution point the certificates of the partition carry.
 *
 * @example
 * ```ts
 * issuingDistributionPoint("http://pki.example.org/crl/3.crl").critical; // true
 * ```
 */
export function issuingDistributionPoint(url: string): ExtensionValue {
  return { oid: OID.issuingDistributionPoint, critical: true, value: sequence(fullName(url)) };
}

/**
 * What is not recorded, as the words `--check-config` and `svcd ca urls` print (empty when all is).
 *
 * @example
 * ```ts
 * missingUrls({ ocsp: "http://x/ocsp" }); // ["the CRL URL (--crl-url)", "the CA issuers URL (--ca-issuers-url)"]
 * ```
 */
export function missingUrls(urls: CaUrls): string[] {
  const missing: string[] = [];
  if (!urls.ocsp) missing.push("the OCSP URL (--ocsp-url)");
  if (!urls.crl) missing.push("the CRL URL (--crl-url)");
  if (!urls.caIssuers) missing.push("the CA issuers URL (--ca-issuers-url)");
  return missing;
}
