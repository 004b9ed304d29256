/**
 * `svcd ca status CERT`: builds an OCSP request for the certificate and has it answered by
 * lib/ocsp's Responder — the daemon's own CertID matching and response assembly, so the tool and
 * the daemon cannot disagree —
 * over the CA folder's index.txt, signed by the CA key or a delegated responder key. The signed
 * response is then read back and its signature checked before the status is reported.
 *
 * @example
 * ```ts
 * import type { CaFolder } from "./store.ts";
 * declare const token: Parameters<typeof caStatus>[0], folder: CaFolder, certDer: Uint8Array;
 * console.log(await caStatus(token, folder, certDer)); // "good\t…"
 * ```
 */
import * as pkijs from "pkijs";
import {
  certIdFor,
  encodeOcspRequest,
  IndexFileSource,
  parseCertificate,
  parseOcspResponse,
  REASON_NAME,
  Responder,
} from "../ocsp/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import type { Token } from "../token/mod.ts";
import { derFromPem, verifySignature } from "./csr.ts";
import { nginxSubject } from "./name.ts";
import { CaFolder } from "./store.ts";

const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");

/**
 * The status line(s) for a certificate of this CA: first line `good`, `revoked` or `unknown`,
 * then serial, subject, times. Throws when the certificate is not this CA's, when the responder
 * refuses, or when its answer does not verify.
 *
 * @example
 * ```ts
 * import type { CaFolder } from "./store.ts";
 * declare const token: Parameters<typeof caStatus>[0], folder: CaFolder, der: Uint8Array;
 * await caStatus(token, folder, der, "ocsp"); // signed by the delegated responder key "ocsp"
 * ```
 */
export async function caStatus(
  token: Token,
  folder: CaFolder,
  certDer: Uint8Array,
  ocspLabel?: string,
): Promise<string> {
  const ca = parseCertificate(folder.caDer);
  const cert = parseCertificate(certDer);
  if (!bytesEqual(cert.issuer, ca.subject)) {
    throw new Error(`the certificate was not issued by the CA in ${folder.dir} (issuer differs)`);
  }
  const certPk = pkijs.Certificate.fromBER(certDer.slice().buffer);
  const signedByCa = await verifySignature(
    cert.tbs,
    certPk.signatureAlgorithm,
    ca.spki,
    cert.signature,
  );
  if (!signedByCa) {
    throw new Error(`the certificate's signature does not verify with ${folder.dir}'s CA key`);
  }

  const label = ocspLabel ?? folder.config.keyLabel;
  const key = await token.key(label);
  if (!key?.publicKeySpki) throw new Error(`no signing key labelled '${label}' on the token`);
  let responderCertificate: Uint8Array | undefined;
  let signerSpki = ca.spki;
  if (!bytesEqual(key.publicKeySpki, ca.spki)) {
    const path = CaFolder.paths(folder.dir).responder;
    const text = await Deno.readFile(path).catch(() => {
      throw new Error(
        `key '${label}' is not the CA key and ${path} is missing; run 'svcd ca responder --key-label ${label}'`,
      );
    });
    responderCertificate = derFromPem(text, "CERTIFICATE");
    signerSpki = parseCertificate(responderCertificate).spki;
    if (!bytesEqual(signerSpki, key.publicKeySpki)) {
      throw new Error(
        `${path} is not the certificate of key '${label}'; run 'svcd ca responder --key-label ${label}'`,
      );
    }
  }
  const responder = new Responder({
    source: new IndexFileSource(CaFolder.paths(folder.dir).index),
    issuer: folder.caDer,
    signer: { keyType: key.keyType, sign: async (tbs) => (await token.sign(key, tbs)).signature },
    responderCertificate,
    cacheEntries: 0,
  });
  const nonce = crypto.getRandomValues(new Uint8Array(16));
  const response = parseOcspResponse(
    await responder.answer(encodeOcspRequest({ certIds: [certIdFor(ca, cert.serial)], nonce })),
  );
  const basic = response.basic;
  if (response.status !== "successful" || !basic) {
    throw new Error(
      `the responder answered ${response.status} (see the daemon's rules in lib/ocsp)`,
    );
  }
  const ok = await verifySignature(
    basic.tbs,
    pkijs.AlgorithmIdentifier.fromBER(basic.signatureAlgorithm.slice().buffer),
    signerSpki,
    basic.signature,
  );
  if (!ok || !basic.nonce || !bytesEqual(basic.nonce, nonce) || basic.singles.length !== 1) {
    throw new Error("the responder's answer does not verify (signature, nonce or count)");
  }
  const single = basic.singles[0];
  const s = single.certStatus;
  const lines: string[] = [s.status];
  lines.push(
    `serial\t${
      (cert.serial[0] === 0 ? cert.serial.subarray(1) : cert.serial).toHex().toUpperCase()
    }`,
  );
  lines.push(`subject\t${nginxSubject(certPk.subject)}`);
  if (s.status === "revoked") {
    lines.push(`revoked\t${iso(s.revokedAt)}`);
    lines.push(
      `reason\t${s.reason === undefined ? "(none given)" : REASON_NAME[s.reason] ?? s.reason}`,
    );
  }
  lines.push(`thisUpdate\t${iso(single.thisUpdate)}`);
  if (single.nextUpdate !== null) lines.push(`nextUpdate\t${iso(single.nextUpdate)}`);
  lines.push(
    `signed by\t${label} (${key.keyType})${
      responderCertificate ? ", delegated responder" : ", the CA key"
    }`,
  );
  return lines.join("\n");
}
