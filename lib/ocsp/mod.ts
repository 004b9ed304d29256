/**
 * The OCSP core: strict DER, the signature algorithm table, the revocation database, request and
 * response codecs, and the Responder that the daemon's /ocsp and `svcd ca status` share.
 *
 * @example
 * ```ts
 * import { IndexFileSource, Responder, type Signer } from "./mod.ts";
 * declare const path: string, issuer: Uint8Array, signer: Signer, requestBytes: Uint8Array;
 * const responder = new Responder({ source: new IndexFileSource(path), issuer, signer });
 * const body = await responder.answer(requestBytes);
 * ```
 */
export * from "./algorithms.ts";
export * from "./certificate.ts";
export * from "./index_db.ts";
export {
  createIndexMemory,
  IndexLimitError,
  type IndexMemory,
  MAX_INDEX_ENTRIES,
  type RevokedVisitor,
} from "./index_compact.ts";
export * from "./index_source.ts";
export * from "./request.ts";
export * from "./response.ts";
export * from "./responder.ts";
