/**
 * OCSP test fixtures: CAs and delegated responders made by `openssl` with software keys (ECDSA,
 * Ed25519, RSA-PSS), post-quantum CAs built here with @noble/post-quantum keys (OpenSSL 3.0 has
 * no ML-DSA), and signers over those keys that behave as a token does (raw signatures).
 *
 * @example
 * ```ts
 * import { type RevocationSource, Responder } from "../../lib/ocsp/mod.ts";
 * declare const dir: string, source: RevocationSource;
 * const ca = await opensslCa(dir, "ec-p256");
 * const responder = new Responder({ source, issuer: ca.der, signer: ca.signer });
 * ```
 */
import * as nodeCrypto from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import {
  SIGNATURE_ALGORITHMS,
  signatureFields,
  type Signer,
  spkiAlgorithmIdentifier,
} from "../../lib/ocsp/algorithms.ts";
import { readCertificates } from "../../lib/ocsp/certificate.ts";
import {
  bitString,
  boolean,
  explicit,
  integer,
  oid,
  sequence,
  TAG,
  tlv,
  x509Time,
} from "../../lib/der/mod.ts";
import { COMPOSITE_MLDSA65_ED25519_LABEL, type KeyTypeName } from "../../lib/token/mod.ts";
import { compositeMessage } from "../../lib/token_admin/independent_verify.ts";
import { pem } from "../../lib/der/mod.ts";
import { runCommand } from "./command.ts";
import { concat } from "../../lib/bytes/mod.ts";

/** Key types openssl 3.0 makes certificates for. */
export type OpensslKeyType = "ec-p256" | "ec-p384" | "ed25519" | "rsa-3072" | "rsa-3072-pkcs1v15";

/** A CA or responder certificate with its key. */
export interface TestCert {
  /** PEM certificate file. */
  certPath: string;
  /** PEM private key file (openssl-made ones only). */
  keyPath?: string;
  der: Uint8Array;
  signer: Signer;
  /** Raw public key (ML-DSA/composite), for verifiers. */
  publicKey?: Uint8Array;
}

const GENKEY: Record<OpensslKeyType, string[]> = {
  "ec-p256": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
  "ec-p384": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
  "ed25519": ["-algorithm", "ED25519"],
  "rsa-3072": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"],
  "rsa-3072-pkcs1v15": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:3072"],
};
const SIGOPT: Record<OpensslKeyType, string[]> = {
  "ec-p256": ["-sha256"],
  "ec-p384": ["-sha384"],
  "ed25519": [],
  "rsa-3072": ["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"],
  "rsa-3072-pkcs1v15": ["-sha256"],
};

async function openssl(args: string[]): Promise<void> {
  const r = await runCommand("openssl", args);
  if (r.code !== 0) throw new Error(`openssl ${args.join(" ")}: ${r.text}`);
}

/**
 * A signer over a node:crypto private key that returns what the token returns (r‖s for ECDSA).
 *
 * @example
 * ```ts
 * import type { KeyObject } from "node:crypto";
 * declare const privateKey: KeyObject;
 * const signer = nodeSigner("ec-p256", privateKey);
 * ```
 */
export function nodeSigner(keyType: OpensslKeyType, key: nodeCrypto.KeyObject): Signer {
  return {
    keyType,
    sign(tbs) {
      switch (keyType) {
        case "ec-p256":
          return nodeCrypto.sign("sha256", tbs, { key, dsaEncoding: "ieee-p1363" });
        case "ec-p384":
          return nodeCrypto.sign("sha384", tbs, { key, dsaEncoding: "ieee-p1363" });
        case "ed25519":
          return nodeCrypto.sign(null, tbs, key);
        case "rsa-3072":
          return nodeCrypto.sign("sha256", tbs, {
            key,
            padding: nodeCrypto.constants.RSA_PKCS1_PSS_PADDING,
            saltLength: 32,
          });
        case "rsa-3072-pkcs1v15":
          return nodeCrypto.sign("sha256", tbs, {
            key,
            padding: nodeCrypto.constants.RSA_PKCS1_PADDING,
          });
      }
    },
  };
}

/**
 * A self-signed CA made by `openssl req -x509` with a fresh software key of `keyType`.
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const ca = await opensslCa(dir, "ed25519");
 * ```
 */
export async function opensslCa(
  dir: string,
  keyType: OpensslKeyType,
  name = "ca",
): Promise<TestCert> {
  const keyPath = `${dir}/${name}.key`, certPath = `${dir}/${name}.pem`;
  await openssl(["genpkey", ...GENKEY[keyType], "-out", keyPath]);
  await openssl([
    "req",
    "-x509",
    "-new",
    "-key",
    keyPath,
    "-out",
    certPath,
    "-days",
    "3650",
    "-subj",
    `/C=DE/O=svcd test/CN=${name} ${keyType}`,
    ...SIGOPT[keyType],
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  return loadCert(keyType, keyPath, certPath);
}

/**
 * A delegated OCSP responder certificate (id-kp-OCSPSigning, id-pkix-ocsp-nocheck) issued by `ca`.
 */
export async function opensslResponder(
  dir: string,
  ca: TestCert,
  caKeyType: OpensslKeyType,
  keyType: OpensslKeyType,
): Promise<TestCert> {
  const keyPath = `${dir}/responder.key`, certPath = `${dir}/responder.pem`;
  await openssl(["genpkey", ...GENKEY[keyType], "-out", keyPath]);
  await Deno.writeTextFile(
    `${dir}/responder.ext`,
    "extendedKeyUsage=critical,OCSPSigning\nnoCheck=ignored\nkeyUsage=critical,digitalSignature\n",
  );
  await openssl([
    "req",
    "-new",
    "-key",
    keyPath,
    "-out",
    `${dir}/responder.csr`,
    "-subj",
    "/CN=responder",
  ]);
  await openssl([
    "x509",
    "-req",
    "-in",
    `${dir}/responder.csr`,
    "-CA",
    ca.certPath,
    "-CAkey",
    ca.keyPath!,
    "-set_serial",
    "0x7E57",
    "-days",
    "365",
    "-extfile",
    `${dir}/responder.ext`,
    "-out",
    certPath,
    ...SIGOPT[caKeyType],
  ]);
  return loadCert(keyType, keyPath, certPath);
}

async function loadCert(
  keyType: OpensslKeyType,
  keyPath: string,
  certPath: string,
): Promise<TestCert> {
  const [cert] = readCertificates(await Deno.readFile(certPath));
  const signer = await webCryptoSigner(keyType, await Deno.readTextFile(keyPath));
  return { certPath, keyPath, der: cert.der, signer };
}

const WEBCRYPTO: Record<
  OpensslKeyType,
  {
    key: EcKeyImportParams | Algorithm | RsaHashedImportParams;
    sign: Algorithm | EcdsaParams | RsaPssParams;
  }
> = {
  "ec-p256": {
    key: { name: "ECDSA", namedCurve: "P-256" },
    sign: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
  },
  "ec-p384": {
    key: { name: "ECDSA", namedCurve: "P-384" },
    sign: { name: "ECDSA", hash: "SHA-384" } as EcdsaParams,
  },
  "ed25519": { key: { name: "Ed25519" }, sign: { name: "Ed25519" } },
  "rsa-3072": {
    key: { name: "RSA-PSS", hash: "SHA-256" },
    sign: { name: "RSA-PSS", saltLength: 32 } as RsaPssParams,
  },
  "rsa-3072-pkcs1v15": {
    key: { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" },
    sign: { name: "RSASSA-PKCS1-v1_5" },
  },
};

/**
 * A signer over a PKCS#8 PEM key through Web Crypto, which returns what the token returns
 * (ECDSA as r‖s) and is much faster here than node:crypto's ECDSA (benches use it).
 *
 * @example
 * ```ts
 * const signer = await webCryptoSigner("ec-p256", await Deno.readTextFile("ca.key"));
 * ```
 */
export async function webCryptoSigner(keyType: OpensslKeyType, pkcs8Pem: string): Promise<Signer> {
  const b64 = pkcs8Pem.replace(/-----[A-Z ]+-----/g, "").replace(/\s+/g, "");
  const alg = WEBCRYPTO[keyType];
  const key = await crypto.subtle.importKey("pkcs8", Uint8Array.fromBase64(b64), alg.key, false, [
    "sign",
  ]);
  return {
    keyType,
    sign: async (tbs) => new Uint8Array(await crypto.subtle.sign(alg.sign, key, tbs.slice())),
  };
}

/** Post-quantum key types, signed in tests with @noble/post-quantum. */
export type PqKeyType = "ml-dsa-44" | "ml-dsa-65" | "ml-dsa-87" | "composite-mldsa65-ed25519";

const ML_DSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

/**
 * A software key of a post-quantum type: the raw public key and a token-like signer (the
 * composite per draft-ietf-lamps-pq-composite-sigs-19 from noble ML-DSA-65 and node Ed25519).
 *
 * @example
 * ```ts
 * const { publicKey, signer } = pqKey("ml-dsa-65");
 * ```
 */
export function pqKey(keyType: PqKeyType): { publicKey: Uint8Array; signer: Signer } {
  if (keyType !== "composite-mldsa65-ed25519") {
    const impl = ML_DSA[keyType];
    const keys = impl.keygen(nodeCrypto.randomBytes(32));
    return {
      publicKey: keys.publicKey,
      signer: { keyType, sign: (m) => impl.sign(m, keys.secretKey) },
    };
  }
  const ml = ml_dsa65.keygen(nodeCrypto.randomBytes(32));
  const ed = nodeCrypto.generateKeyPairSync("ed25519");
  const edRaw = ed.publicKey.export({ format: "der", type: "spki" }).subarray(12);
  const label = new TextEncoder().encode(COMPOSITE_MLDSA65_ED25519_LABEL);
  return {
    publicKey: concat([ml.publicKey, edRaw]),
    signer: {
      keyType,
      sign(m) {
        const mPrime = compositeMessage(m);
        return concat([
          ml_dsa65.sign(mPrime, ml.secretKey, { context: label }),
          nodeCrypto.sign(null, mPrime, ed.privateKey),
        ]);
      },
    },
  };
}

/**
 * A self-signed CA certificate over a post-quantum key, written in `dir` as PEM.
 *
 * @example
 * ```ts
 * declare const dir: string;
 * const ca = await pqCa(dir, "ml-dsa-65");
 * ```
 */
export async function pqCa(dir: string, keyType: PqKeyType): Promise<TestCert> {
  const { publicKey, signer } = pqKey(keyType);
  const name = sequence(
    tlv(
      TAG.SET,
      sequence(oid("2.5.4.3"), tlv(TAG.UTF8_STRING, new TextEncoder().encode(`ca ${keyType}`))),
    ),
  );
  const now = Date.now();
  const basicConstraints = sequence(
    oid("2.5.29.19"),
    boolean(true),
    tlv(TAG.OCTET_STRING, sequence(boolean(true))),
  );
  const tbs = sequence(
    explicit(0, integer(2)),
    integer(0x5eed),
    SIGNATURE_ALGORITHMS[keyType].algorithmIdentifier,
    name,
    sequence(x509Time(now - 3600_000), x509Time(now + 86400_000 * 365)),
    name,
    sequence(spkiAlgorithmIdentifier(keyType), bitString(publicKey)),
    explicit(3, sequence(basicConstraints)),
  );
  const der = sequence(tbs, ...(await signatureFields(signer, tbs)));
  const certPath = `${dir}/ca-${keyType}.pem`;
  await Deno.writeTextFile(certPath, pem("CERTIFICATE", der));
  return { certPath, der, signer, publicKey };
}

/** Type guard. Example: `isOpensslKeyType("ed25519")`. */
export function isOpensslKeyType(k: KeyTypeName): k is OpensslKeyType {
  return k in GENKEY;
}

/**
 * Runs `fn` in a fresh temporary directory, removed afterwards.
 *
 * @example
 * ```ts
 * await withTempDir("ocsp-", async (dir) => { await opensslCa(dir, "ed25519"); });
 * ```
 */
export async function withTempDir(
  prefix: string,
  fn: (dir: string) => Promise<void> | void,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
