/**
 * `svcd client verify --format cms`: a detached SignedData checked against the file and the CA
 * certificates the user trusts, here and without svcd — the messageDigest against the file's
 * digest (streamed), the signature over the signed attributes with the signer certificate's key
 * (node:crypto, @noble/curves, @noble/post-quantum), the signature algorithm against that key,
 * and the certificate's path to the CA file.
 *
 * @example
 * ```ts
 * import { verifyCms } from "./verify_cms.ts";
 * const outcome = await verifyCms("release.tar", "release.tar.p7s", "ca.pem");
 * if (!outcome.valid) console.error(outcome.reason);
 * ```
 */
import { ClientError } from "../errors.ts";
import { MalformedSignature } from "../format.ts";
import { createDigester } from "../digests.ts";
import { hashFile, progressFor } from "../hash.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { MAX_INPUT } from "../../der/mod.ts";
import {
  type CertificateInfo,
  keyTypeOfSignatureAlgorithm,
  parseCertificate,
  readCertificates,
  SIGNATURE_ALGORITHMS,
} from "../../ocsp/mod.ts";
import { type ParsedSignedData, parseSignedData } from "./cms_parse.ts";
import { certificateKey, checkPath, signatureValid } from "./chain.ts";

/** The answer: valid, or why not. */
export type CmsOutcome = { valid: true } | { valid: false; reason: string };

/** Checks `signaturePath` (DER SignedData) over `file` against the CAs in `caFile` (PEM). */
export async function verifyCms(
  file: string,
  signaturePath: string,
  caFile: string,
  now = Date.now(),
): Promise<CmsOutcome> {
  const anchors = await readAnchors(caFile);
  const bytes = await readSignature(signaturePath);
  let sd: ParsedSignedData;
  try {
    sd = parseSignedData(bytes);
  } catch (err) {
    throw new MalformedSignature(
      `${signaturePath} is not a detached CMS SignedData (--format cms): ${
        (err as Error).message
      }: the signature is not valid`,
    );
  }
  const signer = signerOf(sd);
  if (!signer) return invalid("the SignedData carries no certificate of its signer");
  const key = certificateKey(signer, keyTypeOfSignatureAlgorithm(sd.signatureAlgorithm));
  if (!key) {
    return invalid("the signature algorithm is not the one of the signer certificate's key");
  }
  const keyType = key.keyType;
  const size = (await Deno.stat(file).catch((err) => {
    throw new ClientError(`cannot read ${file}: ${err.message}`);
  })).size;
  const digest = await hashFile(
    file,
    createDigester(sd.digest, key.publicKeyRaw),
    progressFor(file, size),
  );
  if (!bytesEqual(digest, sd.messageDigest)) {
    return invalid(`the message digest is not the ${sd.digest} of ${file}`);
  }
  let raw: Uint8Array;
  try {
    raw = SIGNATURE_ALGORITHMS[keyType].decodeSignature(sd.signature);
  } catch {
    return invalid("the signature value is not in its algorithm's form");
  }
  if (!await signatureValid(key, sd.signedAttributes, raw)) {
    return invalid("the signature over the signed attributes does not verify");
  }
  const path = await checkPath(signer.der, sd.certificates, anchors, now);
  return path === undefined ? { valid: true } : invalid(`${path} (CA file ${caFile})`);
}

/** The SignedData's bytes; one larger than any DER the reader takes is not read at all. */
async function readSignature(path: string): Promise<Uint8Array> {
  const cannot = (err: Error) => {
    throw new ClientError(`cannot read ${path}: ${err.message}`);
  };
  const { size } = await Deno.stat(path).catch(cannot);
  if (size > MAX_INPUT) {
    throw new MalformedSignature(
      `${path} is ${size} bytes, larger than a CMS SignedData here can be (${MAX_INPUT}): the ` +
        "signature is not valid",
    );
  }
  return await Deno.readFile(path).catch(cannot);
}

function invalid(reason: string): CmsOutcome {
  return { valid: false, reason };
}

/** The carried certificate the SignerInfo names by issuer and serial number. */
function signerOf(sd: ParsedSignedData): CertificateInfo | undefined {
  for (const der of sd.certificates) {
    let cert: CertificateInfo;
    try {
      cert = parseCertificate(der);
    } catch {
      continue;
    }
    if (bytesEqual(cert.issuer, sd.signerIssuer) && bytesEqual(cert.serial, sd.signerSerial)) {
      return cert;
    }
  }
  return undefined;
}

async function readAnchors(caFile: string): Promise<CertificateInfo[]> {
  const bytes = await Deno.readFile(caFile).catch((err) => {
    throw new ClientError(`cannot read ${caFile} (--signer-ca-cert): ${err.message}`);
  });
  try {
    return readCertificates(bytes);
  } catch (err) {
    throw new ClientError(
      `${caFile} (--signer-ca-cert) holds no certificate: ${(err as Error).message}`,
    );
  }
}
