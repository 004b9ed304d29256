/**
 * `svcd client sign --format cms | jws`: the containers around a signature svcd makes.
 *
 * CMS: the file is hashed here (streamed) and only the DER of the signed attributes travels to
 * /sign, so a file of any size costs one small request. The key must have a certificate (GET
 * /token's `certificate` and `chain`): a SignedData names its signer by certificate.
 *
 * JWS: the signature covers BASE64URL(header) "." BASE64URL(file). Where the key has a digest mode
 * the digest of that signing input is computed here as the file is encoded and only it is sent;
 * otherwise (EdDSA) the signing input itself is sent, within the server's body limit.
 *
 * A certificate outside its validity period still signs, with a warning on stderr: the signature
 * is the key's, and whether a verifier takes it at another time is the verifier's policy
 * (`openssl cms -verify` refuses it by default).
 *
 * @example
 * ```ts
 * import { cmsSignature, type SignOver } from "./sign.ts";
 * import type { ClientKey } from "../keys.ts";
 * declare const key: ClientKey, sign: SignOver;
 * const p7s = await cmsSignature(key, "release.tar", sign, (w) => console.error(w));
 * ```
 */
import { ClientError } from "../errors.ts";
import type { ClientKey } from "../keys.ts";
import { createDigester, type DigestName } from "../digests.ts";
import { hashFile, progressFor } from "../hash.ts";
import { type BodyLimit, describeLimit } from "../settings.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { type CertificateInfo, parseCertificate } from "../../ocsp/mod.ts";
import { containerAlgorithm } from "./algorithms.ts";
import { signedAttributes, signedData } from "./cms.ts";
import { validityAt } from "./chain.ts";
import { base64url, base64urlLength, jwsHeader, type JwsSigner, payloadSlices } from "./jws.ts";

/** What goes to /sign: bytes signed as they are, or a digest in digest mode. */
export type SignBody =
  | { mode: "message"; bytes: Uint8Array }
  | { mode: "digest"; name: DigestName; digest: Uint8Array };

/** Has svcd sign `body` with the key and checks the signature here; returns it (raw). */
export type SignOver = (body: SignBody) => Promise<Uint8Array>;

/** Where a warning goes (stderr). */
export type Warn = (line: string) => void;

/** The command that gives a key a certificate, as messages name it. */
export function certifyCommand(label: string): string {
  return `svcd ca certify --key-label ${label} --profile document-signing`;
}

/**
 * The key's certificate, once it is known to hold the key's public key; a warning when it is
 * outside its validity period.
 */
function signerCertificate(key: ClientKey, warn: Warn): Uint8Array {
  const der = key.certificate;
  if (der === undefined) {
    throw new ClientError(
      `key '${key.label}' has no certificate, and a CMS signature names its signer by one: ask ` +
        `the operator to run '${certifyCommand(key.label)}' (or another --profile)`,
    );
  }
  const cert = readCertificate(key);
  const same = key.publicKeySpki
    ? bytesEqual(cert.spki, key.publicKeySpki)
    : bytesEqual(cert.publicKey, key.publicKeyRaw);
  if (!same) {
    throw new ClientError(
      `the certificate svcd lists for '${key.label}' is not of its public key: nothing was ` +
        `signed (tell the operator; '${certifyCommand(key.label)}' issues a new one)`,
    );
  }
  const validity = validityAt(cert, Date.now());
  if (validity.state !== "valid") {
    const when = validity.state === "expired"
      ? `expired on ${validity.date}`
      : `is not valid before ${validity.date}`;
    warn(
      `warning: the certificate of '${key.label}' ${when}; the signature is made, but verifiers ` +
        `that check the certificate's time (as openssl cms -verify does) refuse it: renew it with ` +
        `'${certifyCommand(key.label)}'`,
    );
  }
  return der;
}

/** The DER of a detached CMS SignedData of `file` by `key`. */
export async function cmsSignature(
  key: ClientKey,
  file: string,
  sign: SignOver,
  warn: Warn,
): Promise<Uint8Array> {
  const alg = containerAlgorithm(key, "cms");
  const certificate = signerCertificate(key, warn);
  const size = (await Deno.stat(file)).size;
  const digest = await hashFile(
    file,
    createDigester(alg.cmsDigest, key.publicKeyRaw),
    progressFor(file, size),
  );
  const attributes = signedAttributes(digest, Date.now());
  const signature = await sign({ mode: "message", bytes: attributes });
  return signedData({ alg, attributes, signature, certificate, chain: key.chain });
}

/** What `writeJws` was asked. */
export interface JwsRequest {
  key: ClientKey;
  file: string;
  /** Where the JWS goes (written through a temporary file beside it). */
  out: string;
  /** RFC 7515 appendix F: the payload part left empty. */
  detached: boolean;
  /** The key's digest mode, if it has one; else the signing input is sent. */
  digest?: DigestName;
  limit: BodyLimit;
}

/** Writes the compact JWS of `req.file` to `req.out`. */
export async function writeJws(req: JwsRequest, sign: SignOver, warn: Warn): Promise<void> {
  const alg = containerAlgorithm(req.key, "jws");
  const signer: JwsSigner = req.key.certificate
    ? { x5c: [signerCertificate(req.key, warn), ...req.key.chain] }
    : { kid: req.key.label };
  const prefix = new TextEncoder().encode(jwsHeader(alg.jws!, signer) + ".");
  const size = (await Deno.stat(req.file)).size;
  const temp = `${req.out}.${Deno.pid}.tmp`;
  try {
    const out = await Deno.open(temp, { write: true, create: true, truncate: true });
    try {
      await writeAll(out, prefix);
      const payload = req.detached ? undefined : out;
      const signature = req.digest
        ? await sign({
          mode: "digest",
          name: req.digest,
          digest: await digestSigningInput(req, prefix, payload),
        })
        : await sign({ mode: "message", bytes: await signingInput(req, prefix, size, payload) });
      await writeAll(out, new TextEncoder().encode("." + base64url(signature)));
    } finally {
      out.close();
    }
    await Deno.rename(temp, req.out);
  } catch (err) {
    await Deno.remove(temp).catch(() => {});
    if (err instanceof ClientError) throw err;
    throw new ClientError(`cannot write ${req.out}: ${(err as Error).message} (check --out)`);
  }
}

/** The digest of the signing input, the payload written to `out` on the way when attached. */
async function digestSigningInput(
  req: JwsRequest,
  prefix: Uint8Array,
  out: Deno.FsFile | undefined,
): Promise<Uint8Array> {
  const digester = createDigester(req.digest!, req.key.publicKeyRaw);
  digester.update(prefix);
  for await (const slice of payloadSlices(req.file)) {
    digester.update(slice);
    if (out) await writeAll(out, slice);
  }
  return digester.digest();
}

/** The signing input in memory, when it fits the body svcd takes. */
async function signingInput(
  req: JwsRequest,
  prefix: Uint8Array,
  size: number,
  out: Deno.FsFile | undefined,
): Promise<Uint8Array> {
  const length = prefix.length + base64urlLength(size);
  if (length > req.limit.bytes) {
    throw new ClientError(
      `the JWS signing input of ${req.file} is ${length} bytes; ${describeLimit(req.limit)}: key ` +
        `'${req.key.label}' (${req.key.keyType}) has no digest mode, so the signing input itself ` +
        "is sent; nothing was signed. Sign a smaller file, or use --format cms",
    );
  }
  const parts = [prefix];
  for await (const slice of payloadSlices(req.file)) {
    parts.push(slice);
    if (out) await writeAll(out, slice);
  }
  const input = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    input.set(p, at);
    at += p.length;
  }
  if (input.length > req.limit.bytes) {
    throw new ClientError(`${req.file} grew while being read; nothing was signed`);
  }
  return input;
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await file.write(bytes.subarray(at));
}

/** The key's certificate as parsed; a ClientError when svcd lists one that is not X.509 DER. */
function readCertificate(key: ClientKey): CertificateInfo {
  try {
    return parseCertificate(key.certificate!);
  } catch (err) {
    throw new ClientError(
      `the certificate svcd lists for '${key.label}' is not a DER X.509 certificate ` +
        `(${(err as Error).message}): nothing was signed; tell the operator`,
    );
  }
}

/** The key's certificate in a word for `svcd client keys`: none, valid until, expired on. */
export function certificateSummary(key: ClientKey): string {
  if (key.certificate === undefined) return "none";
  let cert: CertificateInfo;
  try {
    cert = readCertificate(key);
  } catch {
    return "unreadable";
  }
  const validity = validityAt(cert, Date.now());
  const date = validity.date.slice(0, 10);
  return validity.state === "valid" ? `until ${date}` : `${validity.state} (${date})`;
}
