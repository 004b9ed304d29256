/**
 * The one factory of the authenticated routes' dependencies ({@link AuthenticatedDeps}), for both
 * thread modes: the main isolate with `--threads 0` (../daemon/daemon.ts) and each request thread
 * with `--threads N` (../threads/request_thread.ts) give it their own token and policy, and the
 * main isolate's services their way (./main_services.ts).
 */
import type { AuthenticatedDeps, RouteKey } from "./routes.ts";
import type { MainServices } from "./main_services.ts";

/**
 * The token as the routes use it, over its own key type `K` (lib/token's `Token` is one): the key
 * `key` resolves with is the one `sign` and `verify` take.
 */
export type RouteToken<K extends RouteKey> = Omit<AuthenticatedDeps<K>["token"], "dropRemovedKeys">;

/** What the authenticated side states about itself (links, GET /token, /health) and where it logs. */
export type SideSettings =
  & Pick<AuthenticatedDeps, "publicUrl" | "maxBody" | "log" | "startedAt">
  & {
    /** The CA certificate file (`--ca-cert`) GET /token builds a key's chain from, read each time. */
    caCertificates?: string;
  };

/**
 * The routes' dependencies: this isolate's `token` and `policy`, the main isolate's `services`.
 *
 * @example
 * ```ts
 * import type { Token } from "../../token/mod.ts";
 * import type { Policy } from "../../policy/mod.ts";
 * import type { MainServices } from "./main_services.ts";
 * import { authenticatedDeps } from "./deps.ts";
 * import { authenticatedHandler } from "./routes.ts";
 * declare const token: Token, policy: Policy, services: MainServices;
 * const deps = authenticatedDeps(token, () => policy, services, { log: console.log, startedAt: 0 });
 * const handler = authenticatedHandler(deps);
 * ```
 */
export function authenticatedDeps<K extends RouteKey>(
  token: RouteToken<K>,
  policy: AuthenticatedDeps["policy"],
  services: MainServices,
  settings: SideSettings,
): AuthenticatedDeps<K> {
  return {
    token: {
      key: (label) => token.key(label),
      sign: (key, message, digest) => token.sign(key, message, digest),
      verify: (key, message, signature, digest) => token.verify(key, message, signature, digest),
      certificates: token.certificates && ((key) => token.certificates!(key)),
      info: () => token.info(),
      loggedIn: () => token.loggedIn(),
      poolStats: () => token.poolStats(),
      dropRemovedKeys: () => services.keys.dropRemoved(),
    },
    policy,
    audit: services.audit,
    admission: services.admission,
    budget: services.budget,
    publicUrl: settings.publicUrl,
    maxBody: settings.maxBody,
    log: settings.log,
    startedAt: settings.startedAt,
    readCaCertificates: () => readOptionalFile(settings.caCertificates),
  };
}

/** The file's bytes; undefined when there is no file to read (none given, or unreadable). */
function readOptionalFile(path: string | undefined): Uint8Array | undefined {
  if (path === undefined) return undefined;
  try {
    return Deno.readFileSync(path);
  } catch {
    return undefined;
  }
}
