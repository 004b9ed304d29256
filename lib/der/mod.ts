/**
 * DER and PEM, shared by the token layer (public keys), the OCSP responder (requests and
 * responses) and the CA tool (certificates, CSRs, CRLs): a strict reader, a writer, and PEM armour.
 *
 * @example
 * ```ts
 * import { DerReader, oid, pem, sequence, TAG } from "./mod.ts";
 * const der = sequence(oid("1.3.101.112"));
 * new DerReader(der).enter(TAG.SEQUENCE).readOid(); // the OID's content bytes
 * pem("ALGORITHM", der);
 * ```
 */
export * from "./tags.ts";
export * from "./read.ts";
export * from "./write.ts";
export * from "./pem.ts";
