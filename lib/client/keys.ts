/**
 * The caller's keys as GET /token lists them: label, type, public key and the digest modes svcd
 * takes for it (the `digests` list; a daemon without digest mode lists none, and every key is then
 * signed in message mode), its certificate and chain where it has them; and the largest body the
 * daemon takes (`max_body`, where it says).
 *
 * @example
 * ```ts
 * import { fetchKeys, findKey } from "./keys.ts";
 * import type { SvcdConnection } from "./http.ts";
 * declare const conn: SvcdConnection;
 * const keys = await fetchKeys(conn);
 * const key = findKey(keys, "web");
 * ```
 */
import { ClientError } from "./errors.ts";
import { answerError } from "./answers.ts";
import type { SvcdConnection } from "./http.ts";

/** One key the caller may use. */
export interface ClientKey {
  label: string;
  keyType: string;
  mechanism?: string;
  /** SubjectPublicKeyInfo (DER), where the type has one. */
  publicKeySpki?: Uint8Array;
  publicKeyRaw: Uint8Array;
  /** The digest names svcd takes for this key, in its order; empty: message mode only. */
  digests: string[];
  /** The key's X.509 certificate (DER), where the operator certified the key. */
  certificate?: Uint8Array;
  /** The certificate's issuers up to the CA (DER), nearest first; empty without a certificate. */
  chain: Uint8Array[];
}

/** A listed key svcd cannot use (a type or mechanism the module lacks), with svcd's reason. */
export interface UnusableKey {
  label: string;
  error: string;
}

/** What GET /token says. */
export interface KeyList {
  keys: ClientKey[];
  unusable: UnusableKey[];
  /** Whether the daemon states digest modes at all (the `digests` field). */
  digestModeKnown: boolean;
  /** The largest /sign or /verify body the daemon takes (`max_body`); undefined: not stated. */
  maxBody?: number;
}

/** GET /token, parsed. */
export async function fetchKeys(conn: SvcdConnection): Promise<KeyList> {
  const answer = await conn.request("GET", "/token");
  if (answer.status !== 200) throw answerError(answer);
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder().decode(answer.body));
  } catch {
    throw notTokenAnswer(conn);
  }
  return parseKeyList(doc, conn);
}

/** The key called `label`, or a ClientError naming the labels there are. */
export function findKey(list: KeyList, label: string): ClientKey {
  const key = list.keys.find((k) => k.label === label);
  if (key) return key;
  const unusable = list.unusable.find((k) => k.label === label);
  if (unusable) {
    throw new ClientError(`svcd cannot use key '${label}': ${unusable.error}; tell the operator`);
  }
  const labels = list.keys.map((k) => k.label);
  throw new ClientError(
    `no key '${label}' is granted to you; ${
      labels.length ? `yours: ${labels.join(", ")}` : "you have none"
    } (svcd client keys)`,
    { usage: true },
  );
}

function parseKeyList(doc: unknown, conn: SvcdConnection): KeyList {
  const entries = (doc as { keys?: unknown })?.keys;
  if (!Array.isArray(entries)) throw notTokenAnswer(conn);
  const list: KeyList = { keys: [], unusable: [], digestModeKnown: false };
  const maxBody = (doc as { max_body?: unknown }).max_body;
  // Anything but a positive whole number is not a limit: treated as not stated.
  if (Number.isSafeInteger(maxBody) && (maxBody as number) > 0) list.maxBody = maxBody as number;
  for (const e of entries) {
    if (typeof e?.label !== "string") throw notTokenAnswer(conn);
    if (typeof e.error === "string") {
      list.unusable.push({ label: e.label, error: e.error });
      continue;
    }
    if (typeof e.key_type !== "string" || typeof e.public_key_raw !== "string") {
      throw notTokenAnswer(conn);
    }
    if (Array.isArray(e.digests)) list.digestModeKnown = true;
    list.keys.push({
      label: e.label,
      keyType: e.key_type,
      mechanism: typeof e.mechanism === "string" ? e.mechanism : undefined,
      publicKeySpki: typeof e.public_key === "string"
        ? Uint8Array.fromBase64(e.public_key)
        : undefined,
      publicKeyRaw: Uint8Array.fromBase64(e.public_key_raw),
      digests: Array.isArray(e.digests)
        ? e.digests.filter((d: unknown): d is string => typeof d === "string")
          .map((d: string) => d.toLowerCase())
        : [],
      ...certificateOf(e, conn),
    });
  }
  return list;
}

/** The entry's `certificate` and `chain` (standard base64 DER), where it has them. */
function certificateOf(
  e: { certificate?: unknown; chain?: unknown },
  conn: SvcdConnection,
): Pick<ClientKey, "certificate" | "chain"> {
  if (e.certificate === undefined) return { chain: [] };
  const chain = e.chain ?? [];
  if (
    typeof e.certificate !== "string" || !Array.isArray(chain) ||
    !chain.every((c) => typeof c === "string")
  ) {
    throw notTokenAnswer(conn);
  }
  try {
    return {
      certificate: Uint8Array.fromBase64(e.certificate),
      chain: chain.map((c: string) => Uint8Array.fromBase64(c)),
    };
  } catch {
    throw notTokenAnswer(conn);
  }
}

function notTokenAnswer(conn: SvcdConnection): ClientError {
  return new ClientError(
    `${conn.address} answered GET /token with something other than svcd's key list: check that ` +
      "--addr (SVCD_ADDR) is svcd's proxy",
  );
}
