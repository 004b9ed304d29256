/**
 * A stand-in svcd for the client's tests: node:http on a UNIX socket, software keys, and the digest
 * mode of the wire contract (X-SVC-Digest, /token's "digests"; its body limit as "max_body" when
 * given one). It signs what the contract says a
 * real daemon signs — ECDSA over the digest sent, ML-DSA over the μ sent (externalMu), RSA-PSS over
 * the message whose SHA-256 was sent (the test registers its files) — so the signatures it returns
 * stand or fall with the client's hashing. Tests only; svcd itself never uses node:http.
 *
 * @example
 * ```ts
 * import { fakeKey, startFakeSvcd } from "./fake_svcd.ts";
 * declare const dir: string;
 * const fake = await startFakeSvcd(dir, [await fakeKey("k", "ec-p256", ["sha-256"])]);
 * // svcd client … --insecure-http --addr unix:${fake.socket}
 * await fake.close();
 * ```
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { constants, createHash, generateKeyPairSync, sign as nodeSign } from "node:crypto";
import { p256, p384 } from "@noble/curves/nist.js";
import { ed25519 } from "@noble/curves/ed25519.js";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { compositeRepresentative } from "../../lib/client/verify.ts";
import { COMPOSITE_MLDSA65_ED25519_LABEL } from "../../lib/token/mod.ts";

/** A software key and how it signs a message or a digest. */
export interface FakeKey {
  label: string;
  keyType: string;
  digests: string[] | undefined;
  publicKeyRaw: Uint8Array;
  publicKeySpki?: Uint8Array;
  signMessage(message: Uint8Array): Uint8Array;
  signDigest(name: string, digest: Uint8Array, messages: Uint8Array[]): Uint8Array;
  /** /token's `mechanism` (default: the one svcd uses for the type). */
  mechanism?: string;
  /** /token's `certificate` and `chain`, when a test gives the key a certificate (DER). */
  certificate?: Uint8Array;
  chain?: Uint8Array[];
}

/** The mechanism svcd lists for each key type on SoftHSM2 or svcmod. */
const MECHANISMS: Record<string, string> = {
  "ec-p256": "CKM_ECDSA",
  "ec-p384": "CKM_ECDSA",
  "rsa-3072": "CKM_SHA256_RSA_PKCS_PSS",
  "rsa-3072-pkcs1v15": "CKM_SHA256_RSA_PKCS",
  "ed25519": "CKM_EDDSA",
  "ml-dsa-44": "CKM_ML_DSA",
  "ml-dsa-65": "CKM_ML_DSA",
  "ml-dsa-87": "CKM_ML_DSA",
  "composite-mldsa65-ed25519": "CKM_COMPOSITE_MLDSA65_ED25519",
};

/** One request as the fake saw it. */
export interface SeenRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Uint8Array;
}

/** An answer a test puts in place of the fake's own, for one request. */
export type Override = (req: SeenRequest) =>
  | { status: number; headers?: Record<string, string>; body?: Uint8Array | string }
  | undefined;

/** A running fake. */
export interface FakeSvcd {
  socket: string;
  requests: SeenRequest[];
  /** Messages a digest may stand for (RSA is signed over the message it matches). */
  messages: Uint8Array[];
  /** Answers to put first; each is asked in turn, the first defined answer is sent. */
  overrides: Override[];
  /**
   * The largest body it takes (413 past it), stated as /token's max_body; undefined: no limit and
   * no max_body, as a daemon from before the field.
   */
  maxBody: number | undefined;
  close(): Promise<void>;
}

const MLDSA = { "ml-dsa-44": ml_dsa44, "ml-dsa-65": ml_dsa65, "ml-dsa-87": ml_dsa87 } as const;

/** A fresh key of `keyType` whose /token entry lists `digests` (undefined: no field at all). */
export function fakeKey(label: string, keyType: string, digests: string[] | undefined): FakeKey {
  switch (keyType) {
    case "ec-p256":
    case "ec-p384": {
      const curve = keyType === "ec-p256" ? p256 : p384;
      const hash = keyType === "ec-p256" ? "sha256" : "sha384";
      const secretKey = curve.utils.randomSecretKey();
      const point = curve.getPublicKey(secretKey, false);
      return {
        label,
        keyType,
        digests,
        publicKeyRaw: point,
        publicKeySpki: ecSpki(keyType, point),
        signMessage: (m) =>
          curve.sign(createHash(hash).update(m).digest(), secretKey, { prehash: false }),
        signDigest: (_n, d) => curve.sign(d, secretKey, { prehash: false }),
      };
    }
    case "rsa-3072":
    case "rsa-3072-pkcs1v15": {
      const pair = generateKeyPairSync("rsa", { modulusLength: 3072 });
      const spki = new Uint8Array(pair.publicKey.export({ format: "der", type: "spki" }));
      const padding = keyType === "rsa-3072"
        ? { padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_DIGEST }
        : { padding: constants.RSA_PKCS1_PADDING };
      const rsa = (m: Uint8Array, hash: string) =>
        new Uint8Array(nodeSign(hash, m, { key: pair.privateKey, ...padding }));
      return {
        label,
        keyType,
        digests,
        publicKeyRaw: spki,
        publicKeySpki: spki,
        signMessage: (m) => rsa(m, "sha256"),
        signDigest: (name, d, messages) => {
          const hash = name.replace("-", "");
          const m = messages.find((m) => createHash(hash).update(m).digest().toHex() === d.toHex());
          if (!m) throw new Error("the fake has no registered message with that digest");
          return rsa(m, hash);
        },
      };
    }
    case "ml-dsa-44":
    case "ml-dsa-65":
    case "ml-dsa-87": {
      const dsa = MLDSA[keyType];
      const { secretKey, publicKey } = dsa.keygen();
      return {
        label,
        keyType,
        digests,
        publicKeyRaw: publicKey,
        publicKeySpki: undefined,
        signMessage: (m) => dsa.sign(m, secretKey),
        signDigest: (_n, mu) => dsa.internal.sign(mu, secretKey, { externalMu: true }),
      };
    }
    case "ed25519": {
      const { secretKey, publicKey } = ed25519.keygen();
      return {
        label,
        keyType,
        digests,
        publicKeyRaw: publicKey,
        publicKeySpki: Uint8Array.of(
          ...Uint8Array.fromHex("302a300506032b6570032100"),
          ...publicKey,
        ),
        signMessage: (m) => ed25519.sign(m, secretKey),
        signDigest: () => {
          throw new Error("Ed25519 has no digest mode");
        },
      };
    }
    case "composite-mldsa65-ed25519": {
      const ml = ml_dsa65.keygen();
      const ed = ed25519.keygen();
      const context = new TextEncoder().encode(COMPOSITE_MLDSA65_ED25519_LABEL);
      return {
        label,
        keyType,
        digests,
        publicKeyRaw: new Uint8Array([...ml.publicKey, ...ed.publicKey]),
        signMessage: (m) => {
          const mPrime = compositeRepresentative(createHash("sha512").update(m).digest());
          return new Uint8Array([
            ...ml_dsa65.sign(mPrime, ml.secretKey, { context }),
            ...ed25519.sign(mPrime, ed.secretKey),
          ]);
        },
        signDigest: () => {
          throw new Error("the composite has no digest mode");
        },
      };
    }
  }
  throw new Error(`no fake key of type ${keyType}`);
}

function ecSpki(keyType: string, point: Uint8Array): Uint8Array {
  // id-ecPublicKey with the curve's OID, then the uncompressed point as a BIT STRING.
  const curveOid = keyType === "ec-p256"
    ? Uint8Array.fromHex("06082a8648ce3d030107")
    : Uint8Array.fromHex("06052b81040022");
  const algorithm = Uint8Array.of(
    0x30,
    9 + curveOid.length,
    ...Uint8Array.fromHex("06072a8648ce3d0201"),
    ...curveOid,
  );
  const bits = Uint8Array.of(0x03, ...derLength(point.length + 1), 0, ...point);
  return Uint8Array.of(0x30, ...derLength(algorithm.length + bits.length), ...algorithm, ...bits);
}

function derLength(n: number): number[] {
  return n < 0x80 ? [n] : [0x81, n];
}

const DIGEST_LENGTHS: Record<string, number> = {
  "sha-256": 32,
  "sha-384": 48,
  "sha-512": 64,
  "ml-dsa-mu": 64,
};

/** Starts the fake on `dir`/fake.sock. */
export async function startFakeSvcd(
  dir: string,
  keys: FakeKey[],
  opts: { maxBody?: number } = {},
): Promise<FakeSvcd> {
  const socket = `${dir}/fake.sock`;
  const fake: FakeSvcd = {
    socket,
    requests: [],
    messages: [],
    overrides: [],
    maxBody: opts.maxBody,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Uint8Array[] = [];
    for await (const chunk of req) chunks.push(chunk as Uint8Array);
    const seen: SeenRequest = {
      method: req.method ?? "",
      path: req.url ?? "",
      headers: req.headers,
      body: new Uint8Array(Buffer.concat(chunks)),
    };
    fake.requests.push(seen);
    for (const o of fake.overrides) {
      const answer = o(seen);
      if (answer) return send(res, answer.status, answer.headers ?? {}, answer.body ?? "");
    }
    const a = answerFor(seen, keys, fake.messages, fake.maxBody);
    send(res, a.status, a.headers, a.body);
  });
  await new Promise<void>((resolve) => server.listen(socket, resolve));
  return fake;
}

/** svcd's way: a Content-Length, and the connection closed after the answer. */
function send(
  res: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: Uint8Array | string,
): void {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  res.writeHead(status, {
    ...headers,
    "Content-Length": String(bytes.length),
    Connection: "close",
  });
  res.end(bytes);
}

function answerFor(
  req: SeenRequest,
  keys: FakeKey[],
  messages: Uint8Array[],
  maxBody: number | undefined,
): { status: number; headers: Record<string, string>; body: Uint8Array | string } {
  const problem = (status: number, detail: string) => ({
    status,
    headers: { "Content-Type": "application/problem+json" },
    body: JSON.stringify({ type: "about:blank", title: "refused", status, detail }),
  });
  if (req.path === "/token") {
    const body = JSON.stringify({
      token: { label: "fake" },
      ...(maxBody === undefined ? {} : { max_body: maxBody }),
      keys: keys.map((k) => ({
        label: k.label,
        key_type: k.keyType,
        mechanism: k.mechanism ?? MECHANISMS[k.keyType],
        public_key: k.publicKeySpki ? k.publicKeySpki.toBase64() : null,
        public_key_raw: k.publicKeyRaw.toBase64(),
        ...(k.digests ? { digests: k.digests } : {}),
        ...(k.certificate
          ? {
            certificate: k.certificate.toBase64(),
            chain: (k.chain ?? []).map((c) => c.toBase64()),
          }
          : {}),
      })),
    });
    return { status: 200, headers: { "Content-Type": "application/json" }, body };
  }
  if (maxBody !== undefined && req.body.length > maxBody) return problem(413, "too large");
  const key = keys.find((k) => k.label === req.headers["x-svc-key"]);
  if (!key) return problem(403, "no");
  const digest = req.headers["x-svc-digest"] as string | undefined;
  if (digest !== undefined) {
    if (!key.digests?.includes(digest.toLowerCase())) return problem(400, "digest-unsupported");
  }
  if (req.path === "/sign") {
    if (digest === undefined) {
      return { status: 200, headers: {}, body: key.signMessage(req.body) };
    }
    if (req.body.length !== DIGEST_LENGTHS[digest]) return problem(400, "digest-length");
    return { status: 200, headers: {}, body: key.signDigest(digest, req.body, messages) };
  }
  return problem(404, "the fake serves /token and /sign; tests override /verify");
}
