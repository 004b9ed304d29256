/**
 * OCSPResponse (RFC 6960 §4.2): the unsigned status-only answers as constants, the assembly of a
 * signed BasicOCSPResponse, and a strict reader of responses (for `svcd ca status` and tests).
 *
 * What a successful response carries: responderID byKey (SHA-1 of the responder's key bits),
 * producedAt, one SingleResponse per CertID in request order with the CertID echoed byte for byte,
 * thisUpdate and nextUpdate always, the nonce echoed when the request had one, and the delegated
 * responder's certificate in `certs` when one signs.
 *
 * @example
 * ```ts
 * import type { Signer } from "./algorithms.ts";
 * declare const signer: Signer, responderKeyHash: Uint8Array, answers: SingleAnswer[];
 * declare const producedAt: number, nonce: Uint8Array;
 * MALFORMED_REQUEST; // 30 03 0a 01 01
 * const der = await signResponse(signer, { responderKeyHash, producedAt, answers, nonce });
 * ```
 */
import { createHash } from "node:crypto";
import { signatureFields, type Signer } from "./algorithms.ts";
import type { CertificateInfo } from "./certificate.ts";
import {
  ctx,
  ctxPrimitive,
  type DerPart,
  DerReader,
  encodeDer,
  enumerated,
  generalizedTime,
  node,
  oid,
  oidContent,
  sequence,
  TAG,
} from "../der/mod.ts";
import { bytesEqual } from "../bytes/mod.ts";
import { OCSP_NONCE_OID } from "./request.ts";

/** OCSPResponseStatus values. Example: `OCSP_STATUS.tryLater === 3`. */
export const OCSP_STATUS = {
  successful: 0,
  malformedRequest: 1,
  internalError: 2,
  tryLater: 3,
  sigRequired: 5,
  unauthorized: 6,
} as const;

/** Name of an OCSPResponseStatus. Example: `"unauthorized"`. */
export type OcspStatusName = keyof typeof OCSP_STATUS;

// Shared constants: callers send them as they are and must not write into them.
function unsigned(status: number): Uint8Array {
  return sequence(enumerated(status));
}

/** Unsigned malformedRequest: `30 03 0a 01 01`. Example: `body = MALFORMED_REQUEST`. */
export const MALFORMED_REQUEST: Uint8Array = unsigned(OCSP_STATUS.malformedRequest);
/** Unsigned internalError: `30 03 0a 01 02`. Example: `body = INTERNAL_ERROR`. */
export const INTERNAL_ERROR: Uint8Array = unsigned(OCSP_STATUS.internalError);
/** Unsigned tryLater: `30 03 0a 01 03`. Example: `body = TRY_LATER`. */
export const TRY_LATER: Uint8Array = unsigned(OCSP_STATUS.tryLater);
/** Unsigned unauthorized: `30 03 0a 01 06`. Example: `body = UNAUTHORIZED`. */
export const UNAUTHORIZED: Uint8Array = unsigned(OCSP_STATUS.unauthorized);

/** id-pkix-ocsp-basic. Example: `oid(OCSP_BASIC_OID)`. */
export const OCSP_BASIC_OID = "1.3.6.1.5.5.7.48.1.1";

/** The status of one certificate. */
export type CertStatus =
  | { status: "good" }
  | { status: "revoked"; revokedAt: number; reason?: number }
  | { status: "unknown" };

/** One SingleResponse's content. */
export interface SingleAnswer {
  /** The CertID exactly as the request had it (DER). */
  certId: Uint8Array;
  certStatus: CertStatus;
  /** ms since the epoch. */
  thisUpdate: number;
  nextUpdate: number;
}

/** Everything a signed response says. */
export interface ResponseFields {
  /** SHA-1 of the responder's public key bits (responderID byKey). */
  responderKeyHash: Uint8Array;
  producedAt: number;
  answers: SingleAnswer[];
  nonce?: Uint8Array | null;
  /** Certificates for `certs` (a delegated responder's), DER. */
  certs?: Uint8Array[];
}

/**
 * SHA-1 of a certificate's key bits: what responderID byKey and CertID's SHA-1 key hash hold.
 *
 * @example
 * ```ts
 * import { parseCertificate } from "./certificate.ts";
 * declare const der: Uint8Array;
 * const keyHash = responderKeyHash(parseCertificate(der));
 * ```
 */
export function responderKeyHash(cert: CertificateInfo): Uint8Array {
  return createHash("sha1").update(cert.publicKey).digest();
}

const GOOD = Uint8Array.of(ctxPrimitive(0), 0);
const UNKNOWN = Uint8Array.of(ctxPrimitive(2), 0);
const BASIC_OID_DER = oid(OCSP_BASIC_OID);
const NONCE_OID_DER = oid(OCSP_NONCE_OID);
const SUCCESSFUL = enumerated(OCSP_STATUS.successful);

function certStatusPart(s: CertStatus): DerPart {
  switch (s.status) {
    case "good":
      return GOOD;
    case "unknown":
      return UNKNOWN;
    case "revoked": {
      const time = generalizedTime(s.revokedAt);
      return s.reason === undefined
        ? node(ctx(1), time)
        : node(ctx(1), time, node(ctx(0), enumerated(s.reason)));
    }
  }
}

/**
 * The tbsResponseData (ResponseData DER) that the signature covers.
 *
 * @example
 * ```ts
 * declare const fields: ResponseFields;
 * const tbs = encodeResponseData(fields);
 * ```
 */
export function encodeResponseData(f: ResponseFields): Uint8Array {
  // thisUpdate, nextUpdate and producedAt repeat across singles: each distinct time encoded once.
  const times = new Map<number, Uint8Array>();
  const time = (ms: number) => {
    let der = times.get(ms);
    if (!der) times.set(ms, der = generalizedTime(ms));
    return der;
  };
  const singles = f.answers.map((a) =>
    node(
      TAG.SEQUENCE,
      a.certId,
      certStatusPart(a.certStatus),
      time(a.thisUpdate),
      node(ctx(0), time(a.nextUpdate)),
    )
  );
  const parts: DerPart[] = [
    node(ctx(2), node(TAG.OCTET_STRING, f.responderKeyHash)),
    time(f.producedAt),
    node(TAG.SEQUENCE, ...singles),
  ];
  if (f.nonce) {
    const ext = node(
      TAG.SEQUENCE,
      NONCE_OID_DER,
      node(TAG.OCTET_STRING, node(TAG.OCTET_STRING, f.nonce)),
    );
    parts.push(node(ctx(1), node(TAG.SEQUENCE, ext)));
  }
  return encodeDer(node(TAG.SEQUENCE, ...parts));
}

/**
 * A successful OCSPResponse around a BasicOCSPResponse signed by `signer`.
 *
 * @example
 * ```ts
 * import type { Signer } from "./algorithms.ts";
 * declare const signer: Signer, fields: ResponseFields;
 * const body = await signResponse(signer, fields);
 * ```
 */
export async function signResponse(signer: Signer, f: ResponseFields): Promise<Uint8Array> {
  const tbs = encodeResponseData(f);
  const [algId, sig] = await signatureFields(signer, tbs);
  const basic: DerPart[] = [tbs, algId, sig];
  if (f.certs && f.certs.length > 0) basic.push(node(ctx(0), node(TAG.SEQUENCE, ...f.certs)));
  return encodeDer(node(
    TAG.SEQUENCE,
    SUCCESSFUL,
    node(
      ctx(0),
      node(TAG.SEQUENCE, BASIC_OID_DER, node(TAG.OCTET_STRING, node(TAG.SEQUENCE, ...basic))),
    ),
  ));
}

// ---- reading responses ---------------------------------------------------------------------

/** One SingleResponse as read. */
export interface ParsedSingle {
  certId: Uint8Array;
  certStatus: CertStatus;
  thisUpdate: number;
  nextUpdate: number | null;
}

/** A response as read; `basic` is present only when the status is successful. */
export interface ParsedResponse {
  status: OcspStatusName | number;
  basic?: {
    /** tbsResponseData (what the signature covers). */
    tbs: Uint8Array;
    responderKeyHash: Uint8Array | null;
    /** responderID byName (DER Name), when used instead. */
    responderName: Uint8Array | null;
    producedAt: number;
    singles: ParsedSingle[];
    nonce: Uint8Array | null;
    signatureAlgorithm: Uint8Array;
    signature: Uint8Array;
    certs: Uint8Array[];
  };
}

const BASIC_OID = oidContent(OCSP_BASIC_OID);
const NONCE_OID = oidContent(OCSP_NONCE_OID);

/**
 * Reads an OCSPResponse strictly (DER); throws DerError or Error on anything else, including a
 * response type other than id-pkix-ocsp-basic.
 *
 * @example
 * ```ts
 * declare const body: Uint8Array;
 * const r = parseOcspResponse(body);
 * r.basic?.singles[0].certStatus.status; // "good" | "revoked" | "unknown"
 * ```
 */
export function parseOcspResponse(der: Uint8Array): ParsedResponse {
  const top = new DerReader(der);
  const resp = top.enter(TAG.SEQUENCE, "OCSPResponse");
  top.finish("OCSPResponse");
  const code = resp.readEnumerated();
  const name = (Object.keys(OCSP_STATUS) as OcspStatusName[]).find((k) => OCSP_STATUS[k] === code);
  const status = name ?? code;
  const bytesField = resp.enterOptional(ctx(0));
  resp.finish("OCSPResponse field");
  if (!bytesField) {
    if (code === OCSP_STATUS.successful) {
      throw new Error("successful response without responseBytes");
    }
    return { status };
  }
  if (code !== OCSP_STATUS.successful) throw new Error(`status ${status} with responseBytes`);
  const rb = bytesField.enter(TAG.SEQUENCE, "ResponseBytes");
  bytesField.finish();
  if (!bytesEqual(rb.readOid(), BASIC_OID)) {
    throw new Error("response type is not id-pkix-ocsp-basic");
  }
  const basicDer = rb.readOctetString();
  rb.finish();
  return { status, basic: readBasic(basicDer) };
}

function readBasic(der: Uint8Array): NonNullable<ParsedResponse["basic"]> {
  const top = new DerReader(der);
  const basic = top.enter(TAG.SEQUENCE, "BasicOCSPResponse");
  top.finish();
  const tbsTlv = basic.expect(TAG.SEQUENCE, "ResponseData");
  const tbs = new DerReader(der, tbsTlv.contentStart, tbsTlv.end, basic.depth + 1);
  const version = tbs.enterOptional(ctx(0));
  if (version) throw new Error("explicit ResponseData version");
  let responderKeyHash: Uint8Array | null = null, responderName: Uint8Array | null = null;
  const byName = tbs.enterOptional(ctx(1));
  if (byName) {
    responderName = byName.raw(byName.expect(TAG.SEQUENCE, "Name"));
    byName.finish();
  } else {
    const byKey = tbs.enter(ctx(2), "responderID");
    responderKeyHash = byKey.readOctetString();
    byKey.finish();
  }
  const producedAt = tbs.readTime();
  const list = tbs.enter(TAG.SEQUENCE, "responses");
  const singles: ParsedSingle[] = [];
  while (!list.done) singles.push(readSingle(list));
  let nonce: Uint8Array | null = null;
  const exts = tbs.enterOptional(ctx(1));
  if (exts) {
    const seq = exts.enter(TAG.SEQUENCE, "Extensions");
    exts.finish();
    while (!seq.done) {
      const ext = seq.enter(TAG.SEQUENCE, "Extension");
      const id = ext.readOid();
      if (ext.peekTag() === TAG.BOOLEAN) ext.readBoolean();
      const value = ext.readOctetString();
      ext.finish();
      if (bytesEqual(id, NONCE_OID)) {
        const r = new DerReader(value);
        nonce = r.readOctetString();
        r.finish();
      }
    }
  }
  tbs.finish("ResponseData field");
  const signatureAlgorithm = basic.raw(basic.expect(TAG.SEQUENCE, "signatureAlgorithm"));
  const signature = basic.readBitStringBytes();
  const certs: Uint8Array[] = [];
  const certsField = basic.enterOptional(ctx(0));
  if (certsField) {
    const seq = certsField.enter(TAG.SEQUENCE, "certs");
    certsField.finish();
    while (!seq.done) certs.push(seq.raw(seq.expect(TAG.SEQUENCE, "Certificate")));
  }
  basic.finish("BasicOCSPResponse field");
  return {
    tbs: tbs.bytes.subarray(tbsTlv.start, tbsTlv.end),
    responderKeyHash,
    responderName,
    producedAt,
    singles,
    nonce,
    signatureAlgorithm,
    signature,
    certs,
  };
}

function readSingle(list: DerReader): ParsedSingle {
  const s = list.enter(TAG.SEQUENCE, "SingleResponse");
  const certId = s.raw(s.expect(TAG.SEQUENCE, "CertID"));
  let certStatus: CertStatus;
  const tag = s.peekTag();
  if (tag === ctxPrimitive(0) || tag === ctxPrimitive(2)) {
    const t = s.next();
    if (t.end !== t.contentStart) throw new Error("certStatus NULL with content");
    certStatus = { status: tag === ctxPrimitive(0) ? "good" : "unknown" };
  } else {
    const rev = s.enter(ctx(1), "certStatus");
    const revokedAt = rev.readTime();
    const reasonField = rev.enterOptional(ctx(0));
    let reason: number | undefined;
    if (reasonField) {
      reason = reasonField.readEnumerated();
      reasonField.finish();
    }
    rev.finish();
    certStatus = reason === undefined
      ? { status: "revoked", revokedAt }
      : { status: "revoked", revokedAt, reason };
  }
  const thisUpdate = s.readTime();
  let nextUpdate: number | null = null;
  const next = s.enterOptional(ctx(0));
  if (next) {
    nextUpdate = next.readTime();
    next.finish();
  }
  if (s.peekTag() === ctx(1)) s.next(); // singleExtensions: not interpreted
  s.finish("SingleResponse field");
  return { certId, certStatus, thisUpdate, nextUpdate };
}
