/**
 * The routes of the public socket: CA certificates, OCSP and CRLs, with no client identity, no policy and
 * no refusal budget, since what they publish is public and there is no one to authorise
 * (docs/api.md, "The public socket"). Nothing here touches a signing key except through the OCSP
 * responder, and nothing is logged per request, so anonymous traffic cannot grow the audit log.
 */
import type { HttpRequest, HttpResponse } from "../../http/mod.ts";
import { allowOf, problem, routeFor } from "../../http/mod.ts";
import type { CrlFiles } from "./crl_files.ts";

/** What the public routes need: the PEM chain to publish and the one-method OCSP responder. */
export interface PublicDeps {
  /** The CA certificate chain, PEM, served as it is. */
  certificates: Uint8Array;
  responder: { answer(request: Uint8Array): Promise<Uint8Array> };
  /** The CA's CRLs (--ca-dir), served at /crl/NAME; undefined: no CRL route. */
  crls?: Pick<CrlFiles, "has" | "current">;
}

/** Media types of the public routes (RFC 8555 §9.1 for the chain, RFC 6960 Appendix A.1 for OCSP). */
export const PUBLIC_MEDIA_TYPES = {
  certificates: "application/pem-certificate-chain",
  ocspResponse: "application/ocsp-response",
  crl: "application/pkix-crl",
} as const;

/** Where the public socket serves CRLs: `/crl/full.crl`, `/crl/K.crl`. */
export const CRL_PATH_PREFIX = "/crl/";

type Route = (req: HttpRequest, deps: PublicDeps) => Promise<HttpResponse>;

/** Method → route per path; a path here with another method gets 405 and Allow. */
const ROUTES: Record<string, Record<string, Route>> = {
  "/certificates": { GET: certificatesRoute },
  "/ocsp": { POST: ocspRoute },
};

/**
 * Builds the handler of the public listener.
 */
export function publicHandler(deps: PublicDeps): (req: HttpRequest) => Promise<HttpResponse> {
  return (req) => handle(req, deps);
}

function handle(req: HttpRequest, deps: PublicDeps): Promise<HttpResponse> {
  // /sign and /verify are not here: 404 like any unknown path, no hint they exist.
  const crlName = req.path.startsWith(CRL_PATH_PREFIX)
    ? req.path.slice(CRL_PATH_PREFIX.length)
    : undefined;
  const methods = crlName !== undefined && deps.crls?.has(crlName)
    ? { GET: crlRoute(crlName) }
    : ROUTES[req.path];
  if (!methods) return Promise.resolve(notFound(req.path));
  const route = routeFor(methods, req.method);
  if (!route) {
    const allow = allowOf(methods);
    return Promise.resolve(
      problem(405, "Method Not Allowed", `${req.path} accepts ${allow}.`, [["Allow", allow]]),
    );
  }
  return route(req, deps);
}

function notFound(path: string): HttpResponse {
  return problem(404, "Not Found", `No route ${path} on the public socket.`);
}

function certificatesRoute(_req: HttpRequest, deps: PublicDeps): Promise<HttpResponse> {
  return Promise.resolve({
    status: 200,
    headers: [["Content-Type", PUBLIC_MEDIA_TYPES.certificates]],
    body: deps.certificates,
  });
}

/**
 * Every OCSP answer is a 200 whose body carries the OCSP status, with no Cache-Control: a client
 * or cache takes freshness from the response's signed nextUpdate, which a header could only
 * contradict. The request's Content-Type is not checked: the body is parsed strictly either way,
 * and an unparseable one is malformedRequest.
 */
async function ocspRoute(req: HttpRequest, deps: PublicDeps): Promise<HttpResponse> {
  const body = await deps.responder.answer(req.body);
  return { status: 200, headers: [["Content-Type", PUBLIC_MEDIA_TYPES.ocspResponse]], body };
}

/**
 * One CRL, DER (RFC 2585's application/pkix-crl). `Cache-Control: no-cache`: a CRL changes at any
 * moment (a revocation), and a cache that kept it until its nextUpdate would hide the revocation
 * for days; a cache may keep it but asks again before using it (a CDN mirrors the CRL folder or
 * sets a short time of its own). `Last-Modified` is its thisUpdate. A CRL that is not current
 * (none signed yet, or past its nextUpdate while signing fails) is never served: 503.
 */
function crlRoute(name: string): Route {
  return (_req, deps) => {
    const crl = deps.crls!.current(name);
    if (!crl) {
      return Promise.resolve(
        problem(
          503,
          "Service Unavailable",
          `No current CRL ${name}: none is signed yet, or signing has failed past its nextUpdate.`,
          [["Retry-After", "5"]],
        ),
      );
    }
    return Promise.resolve({
      status: 200,
      headers: [
        ["Content-Type", PUBLIC_MEDIA_TYPES.crl],
        ["Cache-Control", "no-cache"],
        ["Last-Modified", new Date(crl.thisUpdate).toUTCString()],
      ],
      body: crl.der,
    });
  };
}
