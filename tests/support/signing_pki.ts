/**
 * A small PKI for the containers' unit tests: a root CA and an intermediate (node:crypto EC P-256
 * keys) and document-signing certificates (keyUsage digitalSignature, EKU emailProtection, as
 * `openssl cms -verify`'s S/MIME signing purpose wants) for any public key, with a chosen validity.
 *
 * @example
 * ```ts
 * import { makeSigningPki } from "./signing_pki.ts";
 * declare const spki: Uint8Array;
 * const pki = await makeSigningPki();
 * const leaf = await pki.certify(spki, "CN=signer");
 * ```
 */
import { generateKeyPairSync, sign as nodeSign } from "node:crypto";
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { buildCertificate, extension } from "../../lib/ca/certificate.ts";
import { nameFromRfc4514 } from "../../lib/ca/name.ts";
import type { Signer } from "../../lib/ocsp/mod.ts";
import { keyIdWithPkcs11Tool, type TestToken, writeCertificateWithPkcs11Tool } from "./token.ts";
import { pem } from "../../lib/der/mod.ts";

const DAY = 86_400_000;

/** A CA key with its certificate. */
interface Issuer {
  der: Uint8Array;
  subject: string;
  signer: Signer;
}

/** The PKI: root, intermediate, and how to certify a key under the intermediate. */
export interface SigningPki {
  root: Uint8Array;
  intermediate: Uint8Array;
  /** The root as PEM (the trust anchor a verifier gets). */
  rootPem: string;
  /** A leaf certificate for `spki`, issued by the intermediate; `days` may be negative (expired). */
  certify(spki: Uint8Array, subject: string, opts?: { notAfterDays?: number }): Promise<Uint8Array>;
}

let serial = 1n;

function ecSigner(): { signer: Signer; spki: Uint8Array } {
  const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return {
    spki: new Uint8Array(pair.publicKey.export({ format: "der", type: "spki" })),
    signer: {
      keyType: "ec-p256",
      sign: (tbs) =>
        new Uint8Array(
          nodeSign("sha256", tbs, { key: pair.privateKey, dsaEncoding: "ieee-p1363" }),
        ),
    },
  };
}

const keyUsageBits = (byte: number, unused: number) =>
  new asn1js.BitString({ valueHex: Uint8Array.of(byte).buffer, unusedBits: unused });

async function issue(
  issuer: Issuer | undefined,
  subject: string,
  spki: Uint8Array,
  signer: Signer,
  extensions: pkijs.Extension[],
  notAfterDays = 30,
): Promise<Uint8Array> {
  const now = Date.now();
  return await buildCertificate({
    serial: serial++,
    issuer: nameFromRfc4514(issuer?.subject ?? subject),
    subject: nameFromRfc4514(subject),
    spki,
    notBefore: new Date(now - 2 * DAY + Math.min(0, notAfterDays) * DAY),
    notAfter: new Date(now + notAfterDays * DAY),
    extensions,
  }, issuer?.signer ?? signer);
}

function caExtensions(): pkijs.Extension[] {
  return [
    extension("2.5.29.19", true, new pkijs.BasicConstraints({ cA: true }).toSchema()),
    extension("2.5.29.15", true, keyUsageBits(0x06, 1)), // keyCertSign, cRLSign
  ];
}

/** A root and an intermediate, fresh keys each time. */
export async function makeSigningPki(): Promise<SigningPki> {
  const rootKey = ecSigner();
  const rootSubject = "CN=Signing Root,O=Example";
  const root = await issue(undefined, rootSubject, rootKey.spki, rootKey.signer, caExtensions());
  const rootIssuer = { der: root, subject: rootSubject, signer: rootKey.signer };
  const midKey = ecSigner();
  const midSubject = "CN=Signing Intermediate,O=Example";
  const intermediate = await issue(
    rootIssuer,
    midSubject,
    midKey.spki,
    midKey.signer,
    caExtensions(),
  );
  const mid = { der: intermediate, subject: midSubject, signer: midKey.signer };
  return {
    root,
    intermediate,
    rootPem: pem("CERTIFICATE", root),
    certify: (spki, subject, opts = {}) =>
      issue(mid, subject, spki, mid.signer, [
        extension("2.5.29.19", true, new pkijs.BasicConstraints({ cA: false }).toSchema()),
        extension("2.5.29.15", true, keyUsageBits(0xc0, 6)), // digitalSignature, nonRepudiation
        extension(
          "2.5.29.37",
          false,
          new pkijs.ExtKeyUsage({ keyPurposes: ["1.3.6.1.5.5.7.3.4"] }).toSchema(),
        ),
      ], opts.notAfterDays),
  };
}

/**
 * Certifies the token key `label` (public key `spki`) under the intermediate and stores the
 * certificate in the token with pkcs11-tool, as another application would (CKA_ID and label of
 * the key). SoftHSM2 only: svcmod's certificate objects are written by `svcd ca certify`.
 */
export async function certifyTokenKey(
  pki: SigningPki,
  token: TestToken,
  label: string,
  spki: Uint8Array,
  opts: { notAfterDays?: number } = {},
): Promise<Uint8Array> {
  const der = await pki.certify(spki, `CN=${label},O=Example`, opts);
  const path = `${token.dir}/${label}.crt.der`;
  await Deno.writeFile(path, der);
  await writeCertificateWithPkcs11Tool(token, path, await keyIdWithPkcs11Tool(token, label), label);
  return der;
}

/**
 * The PKI as files in `dir`: `root` (the CA file a verifier trusts) and `chain` (intermediate and
 * root, the daemon's --ca-cert: the chain of every certificate it serves).
 */
export async function writeSigningPkiFiles(
  pki: SigningPki,
  dir: string,
): Promise<{ root: string; chain: string }> {
  const root = `${dir}/signing-root.pem`;
  const chain = `${dir}/signing-chain.pem`;
  await Deno.writeTextFile(root, pki.rootPem);
  await Deno.writeTextFile(
    chain,
    pem("CERTIFICATE", pki.intermediate) + pem("CERTIFICATE", pki.root),
  );
  return { root, chain };
}
