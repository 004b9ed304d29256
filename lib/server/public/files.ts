/**
 * The files the public listener serves from, read and checked the same way by `serve` and
 * `--check-config`: the CA chain (PEM; its first certificate is the CA whose certificates OCSP
 * answers for) and, optionally, a delegated OCSP responder certificate issued by that CA.
 *
 * @example
 * ```ts
 * import { loadPublicFiles } from "./files.ts";
 * const files = loadPublicFiles({ caCertificates: "/var/lib/svcd/ca/ca.pem" });
 * files.issuer.subject; // DER Name of the CA
 * ```
 */
import { bytesEqual } from "../../bytes/mod.ts";
import { pem } from "../../der/mod.ts";
import { type CertificateInfo, readCertificates } from "../../ocsp/mod.ts";

/** Where the files are (the options --ca-cert and --ocsp-cert). */
export interface PublicFilePaths {
  caCertificates: string;
  responderCertificate?: string;
}

/** The files, parsed. */
export interface PublicFiles {
  /**
   * What GET /certificates serves: the chain's certificates re-encoded as PEM, in file order, so a
   * DER file is served as PEM and nothing else in the file (a key, a comment) is ever published.
   */
  certificatesPem: Uint8Array;
  issuer: CertificateInfo;
  responder?: CertificateInfo;
}

/** A file of the public listener that cannot be used; the message names the option and the fix. */
export class PublicFileError extends Error {
  override name = "PublicFileError";
}

/**
 * Reads and checks the CA chain and the responder certificate. Throws {@link PublicFileError}.
 *
 * @example
 * ```ts
 * loadPublicFiles({ caCertificates: "ca.pem", responderCertificate: "ocsp.pem" });
 * ```
 */
export function loadPublicFiles(paths: PublicFilePaths, now = Date.now()): PublicFiles {
  const chain = parse(
    readFile(paths.caCertificates, "--ca-cert"),
    paths.caCertificates,
    "--ca-cert",
  );
  const certificatesPem = new TextEncoder().encode(
    chain.map((cert) => pem("CERTIFICATE", cert.der)).join(""),
  );
  const issuer = chain[0];
  checkValidity(
    issuer,
    now,
    `--ca-cert ${paths.caCertificates}`,
    "make a new CA with 'svcd ca init'",
  );
  if (!paths.responderCertificate) return { certificatesPem, issuer };
  const responderFile = readFile(paths.responderCertificate, "--ocsp-cert");
  const responder = parse(responderFile, paths.responderCertificate, "--ocsp-cert")[0];
  if (!bytesEqual(responder.issuer, issuer.subject)) {
    throw new PublicFileError(
      `--ocsp-cert ${paths.responderCertificate} was not issued by the CA in --ca-cert ` +
        `${paths.caCertificates}; issue it with 'svcd ca responder'`,
    );
  }
  checkValidity(
    responder,
    now,
    `--ocsp-cert ${paths.responderCertificate}`,
    "issue a new one with 'svcd ca responder'",
  );
  return { certificatesPem, issuer, responder };
}

/**
 * Answers signed under a certificate outside its validity fail every client's check, silently from
 * the daemon's side: refuse to start instead.
 */
function checkValidity(cert: CertificateInfo, now: number, what: string, fix: string): void {
  if (now < cert.notBefore) {
    throw new PublicFileError(
      `${what} is not valid before ${
        new Date(cert.notBefore).toISOString()
      }; check the clock or ${fix}`,
    );
  }
  if (now >= cert.notAfter) {
    throw new PublicFileError(
      `${what} expired at ${new Date(cert.notAfter).toISOString()}; ${fix}`,
    );
  }
}

/**
 * The OCSP key must be the key of the certificate that names the responder: the delegated
 * responder's when there is one, else the CA's own (RFC 6960 §4.2.2.2).
 */
export function checkResponderKey(
  files: PublicFiles,
  key: { label: string; publicKeyRaw: Uint8Array },
): void {
  const cert = files.responder ?? files.issuer;
  if (bytesEqual(cert.publicKey, key.publicKeyRaw)) return;
  const which = files.responder ? "--ocsp-cert" : "--ca-cert (no --ocsp-cert given)";
  throw new PublicFileError(
    `--ocsp-label '${key.label}' is not the key of the certificate in ${which}; ` +
      "give the label of the key that certificate was issued for",
  );
}

function readFile(path: string, option: string): Uint8Array {
  try {
    return Deno.readFileSync(path);
  } catch (err) {
    throw new PublicFileError(
      `${option} ${path} cannot be read: ${(err as Error).message}; ` +
        "make the CA with 'svcd ca init' or give the right path",
    );
  }
}

function parse(bytes: Uint8Array, path: string, option: string): CertificateInfo[] {
  try {
    return readCertificates(bytes);
  } catch (err) {
    throw new PublicFileError(
      `${option} ${path} holds no usable certificate (${(err as Error).message}); ` +
        "give a PEM or DER X.509 certificate",
    );
  }
}
