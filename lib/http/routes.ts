/**
 * Route tables of the listeners' handlers: method → handler per path, with HEAD served by a GET
 * route (RFC 9110 §9.3.2; the listener leaves the body out) and the Allow header of a 405.
 *
 * @example
 * ```ts
 * import { allowOf, routeFor } from "./routes.ts";
 * const methods = { GET: () => "certificates" };
 * routeFor(methods, "HEAD"); // the GET route
 * allowOf(methods); // "GET, HEAD"
 * ```
 */

/** The route for a method, HEAD falling back to GET; undefined → 405. Example above. */
export function routeFor<R>(methods: Readonly<Record<string, R>>, method: string): R | undefined {
  return methods[method] ?? (method === "HEAD" ? methods.GET : undefined);
}

/** The Allow header value for a path's routes. Example: `allowOf({ POST: f }) === "POST"`. */
export function allowOf(methods: Readonly<Record<string, unknown>>): string {
  const allowed = Object.keys(methods);
  return (methods.GET ? [...allowed, "HEAD"] : allowed).join(", ");
}
