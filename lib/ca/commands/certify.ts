/**
 * `svcd ca certify`: a certificate for a token key, for a signing purpose (a profile), issued by
 * the CA and stored in the token beside the key, where PKCS#11 consumers and GET /token find it.
 * Certifying a key again (a renewal, another profile) replaces its certificate.
 */
import { type Profile, profileExtensions, PROFILES } from "../certificate.ts";
import { nameFromRfc4514, nginxSubject } from "../name.ts";
import { CaFolder, serialHex } from "../store.ts";
import { parseCertificate } from "../../ocsp/mod.ts";
import type { SigningKey } from "../../token/mod.ts";
import { EXIT } from "../../cli/exit.ts";
import {
  type Context,
  days,
  DEFAULT_DAYS,
  keyByLabel,
  outCopies,
  required,
  UsageError,
} from "./context.ts";
import { issueEndEntity } from "./issue.ts";

/** A DNS name a certificate may carry: LDH labels, a leading `*.` wildcard allowed. */
const DNS_NAME =
  /^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;

export async function certify(ctx: Context): Promise<number> {
  const label = required(ctx, "key-label");
  const profile = profileOf(required(ctx, "profile"));
  const dnsNames = dnsNamesOf(ctx, profile);
  const lifetime = days(ctx, DEFAULT_DAYS.client);
  const folder = await CaFolder.open(ctx.dir);
  const subject = nameFromRfc4514(
    ctx.options.get("subject") ?? `CN=${escapeRdn(dnsNames[0] ?? label)}`,
  );
  if (nginxSubject(subject) === "") throw new UsageError("--subject must not be empty");
  let key: SigningKey | undefined;
  let earlier: Uint8Array[] = [];
  const done = await issueEndEntity(
    ctx,
    folder,
    subject,
    async (token) => (key = await keyByLabel(token, label, ctx)).publicKeySpki!,
    lifetime,
    (spki, caSpki, pointers) =>
      profileExtensions(profile, spki, caSpki, pointers, {
        rsa: key!.keyType === "rsa-3072",
        dnsNames,
      }),
    outCopies(ctx),
    async (admin, der) => {
      earlier = await admin.storeCertificate(key!, der);
    },
  );
  for (const old of earlier) ctx.say(`replaced ${describe(old)}`);
  ctx.say(
    `certificate ${done.serial} (${profile}) for key '${label}' (${key!.keyType}) stored on the ` +
      `token with the key's ID, and written to ${done.path}`,
  );
  console.log(
    `certificate ${done.serial} written to ${done.path} (valid until ${done.notAfter.toISOString()})`,
  );
  return EXIT.ok;
}

function profileOf(text: string): Profile {
  const found = PROFILES.find((p) => p === text);
  if (!found) throw new UsageError(`unknown profile '${text}'; one of: ${PROFILES.join(", ")}`);
  return found;
}

/** The --dns names: at least one for a TLS server (its subjectAltName), none for the others. */
function dnsNamesOf(ctx: Context, profile: Profile): string[] {
  const names = ctx.options.get("dns");
  if (profile !== "tls-server") {
    if (names.length > 0) throw new UsageError("--dns is for --profile tls-server only");
    return [];
  }
  if (names.length === 0) {
    throw new UsageError("--profile tls-server needs --dns NAME (the server's name; repeatable)");
  }
  const bad = names.find((n) => !DNS_NAME.test(n));
  if (bad !== undefined) throw new UsageError(`--dns '${bad}' is not a DNS name`);
  return names.map((n) => n.toLowerCase());
}

/** A value as an RFC 4514 attribute value: its special characters escaped. */
function escapeRdn(value: string): string {
  return value.replace(/[,+"\\<>;=]/g, "\\$&").replace(/^[ #]/, "\\$&").replace(/ $/, "\\ ");
}

/** An earlier certificate of the key as the operator reads it: serial, and expired or not. */
function describe(der: Uint8Array): string {
  try {
    const cert = parseCertificate(der);
    const serial = serialHex(BigInt(`0x${cert.serial.toHex()}`));
    const end = new Date(cert.notAfter).toISOString();
    const state = cert.notAfter <= Date.now() ? `expired at ${end}` : `valid until ${end}`;
    return `the key's earlier certificate ${serial} (${state})`;
  } catch {
    return "an earlier certificate object of the key that is not a DER X.509 certificate";
  }
}
