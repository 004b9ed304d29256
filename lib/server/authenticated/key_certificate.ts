/**
 * A key's certificate as GET /token states it: the certificate stored in the token for the key
 * (lib/token reads it by the key's CKA_ID) and its chain up to the CA, from the CA certificates
 * the daemon is given (--ca-cert). A certificate is stated only when its public key is the key's
 * own: one forced onto another key would make every verifier trust signatures it did not make.
 *
 * @example
 * ```ts
 * import { keyCertificate } from "./key_certificate.ts";
 * declare const stored: Uint8Array[], spki: Uint8Array, caPem: Uint8Array;
 * const found = keyCertificate("web", spki, stored, () => caPem);
 * if ("certificate" in found) console.log(found.certificate.toBase64(), found.chain.length);
 * else if (found.refused) console.error(found.refused);
 * ```
 */
import { bytesEqual } from "../../bytes/mod.ts";
import { type CertificateInfo, parseCertificate, readCertificates } from "../../ocsp/mod.ts";

/** The key's certificate and the chain above it (issuer first, up to the self-signed CA). */
export interface CertifiedKey {
  certificate: Uint8Array;
  chain: Uint8Array[];
}

/**
 * What was found for a key: its certificate and chain, or none; `refused` says why a stored
 * certificate was not used (operator text: names no client).
 */
export type KeyCertificateAnswer = CertifiedKey | { refused?: string };

/** Most issuers followed up from a certificate: a longer chain in --ca-cert is cut there. */
const MAX_CHAIN = 8;

/**
 * The certificate among `stored` whose public key is `spki` (the latest issued when several are,
 * as for a moment during a renewal) with its chain from `caCertificates()` (read only then; []
 * when it cannot be read or holds no issuer of the certificate).
 */
export function keyCertificate(
  label: string,
  spki: Uint8Array,
  stored: Uint8Array[],
  caCertificates: () => Uint8Array | undefined,
): KeyCertificateAnswer {
  if (stored.length === 0) return {};
  const parsed = stored.map(parseOrUndefined);
  const own = parsed.filter((c): c is CertificateInfo =>
    c !== undefined && bytesEqual(c.spki, spki)
  )
    .sort((a, b) => b.notBefore - a.notBefore);
  if (own.length === 0) {
    const why = parsed.some((c) => c === undefined)
      ? "is not a DER X.509 certificate"
      : "does not hold the key's public key";
    return {
      refused: `key '${label}': the certificate stored with its CKA_ID ${why}; it is not ` +
        "served: certify the key again with 'svcd ca certify'",
    };
  }
  const cert = own[0];
  return { certificate: cert.der, chain: chainAbove(cert, readCaCertificates(caCertificates)) };
}

/**
 * The issuers of `cert` among `known`, nearest first, up to a self-signed one; an issuer is the
 * certificate whose subject is the issuer name (byte for byte, as the CA writes both).
 */
export function chainAbove(cert: CertificateInfo, known: CertificateInfo[]): Uint8Array[] {
  const chain: Uint8Array[] = [];
  let current = cert;
  while (chain.length < MAX_CHAIN && !isSelfIssued(current)) {
    const issuer = known.find((c) => bytesEqual(c.subject, current.issuer));
    if (!issuer || chain.some((der) => bytesEqual(der, issuer.der))) break;
    chain.push(issuer.der);
    current = issuer;
  }
  return chain;
}

function isSelfIssued(cert: CertificateInfo): boolean {
  return bytesEqual(cert.subject, cert.issuer);
}

function readCaCertificates(read: () => Uint8Array | undefined): CertificateInfo[] {
  const bytes = read();
  if (!bytes) return [];
  try {
    return readCertificates(bytes);
  } catch {
    return [];
  }
}

function parseOrUndefined(der: Uint8Array): CertificateInfo | undefined {
  try {
    return parseCertificate(der);
  } catch {
    return undefined;
  }
}

/**
 * Says each refusal at most once per key label in `intervalMs`: GET /token is asked often, and a
 * wrong certificate stays wrong until the operator acts. Holds at most `maxLabels` labels.
 */
export class RefusalNotes {
  readonly #last = new Map<string, number>();
  readonly #intervalMs: number;
  readonly #maxLabels: number;

  constructor(intervalMs = 10 * 60_000, maxLabels = 1024) {
    this.#intervalMs = intervalMs;
    this.#maxLabels = maxLabels;
  }

  /** Whether the refusal for `label` is due to be said now (and notes that it is). */
  due(label: string, now = Date.now()): boolean {
    const last = this.#last.get(label);
    if (last !== undefined && now - last < this.#intervalMs) return false;
    if (this.#last.size >= this.#maxLabels) this.#last.clear();
    this.#last.set(label, now);
    return true;
  }
}
