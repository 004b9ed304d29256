/**
 * What every `svcd ca` command shares: its context (the CA folder, the token options, the parsed
 * values), usage mistakes, the token login, the CA key checked against the CA certificate, and
 * validity periods.
 */
import * as pkijs from "pkijs";
import type { Signer } from "../../ocsp/mod.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { loadPin, type SigningKey, type Token } from "../../token/mod.ts";
import {
  asUser,
  callsAsUser,
  type Common,
  openLoggedIn,
  TokenAdmin,
} from "../../token_admin/mod.ts";
import { CaFolder } from "../store.ts";
import { EXIT } from "../../cli/exit.ts";
import type { CaOptions } from "./options.ts";

export const DAY_MS = 86_400_000;

/** Default lifetimes in days. */
export const DEFAULT_DAYS = { ca: 3650, client: 365, responder: 365, crl: 7 } as const;

/** A usage mistake: exit 2 with the command's help. */
export class UsageError extends Error {}

export interface Context {
  dir: string;
  common: Common;
  options: CaOptions;
  positionals: string[];
  say(line: string): void;
}

/** A usage mistake: the message, then where the help is; exit 2. */
export function usage(command: string | undefined, message: string): number {
  const where = command ? `svcd ca ${command}` : "svcd ca";
  console.error(`${where}: ${message}\nsee '${where} --help'`);
  return EXIT.usage;
}

/** The options that take one text value and have no fallback: those a command may require. */
type TextFlag = "key-label" | "profile" | "reason";

/** The value of an option the command cannot go without. */
export function required(ctx: Context, flag: TextFlag): string {
  const v = ctx.options.get(flag);
  if (!v) throw new UsageError(`--${flag} is required`);
  return v;
}

/** --days, or the command's own lifetime. */
export function days(ctx: Context, fallback: number): number {
  return ctx.options.get("days") ?? fallback;
}

/** 16 random bytes, top bit clear and second bit set: a positive serial of full length. */
export function randomSerial(): bigint {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] & 0x3f) | 0x40;
  return BigInt("0x" + bytes.toHex());
}

export function signerOf(token: Token, key: SigningKey): Signer {
  return { keyType: key.keyType, sign: async (tbs) => (await token.sign(key, tbs)).signature };
}

/**
 * Logs in and runs `fn`. The PIN is read first, as the caller (decrypting --credential needs
 * root); with --user every token call is made as that user, while the CA folder and --out files
 * are written as the caller.
 */
export async function withToken<T>(
  ctx: Context,
  fn: (token: Token, admin: TokenAdmin) => Promise<T>,
): Promise<T> {
  ctx.say(`logging in to token '${ctx.common.tokenLabel}' (${ctx.common.modulePath})`);
  const pin = await loadPin(ctx.common.pin ?? {});
  const { user } = ctx.common;
  try {
    const opened = await asUser(user, () => openLoggedIn(ctx.common, pin));
    const token = callsAsUser(opened, user);
    try {
      return await fn(token, callsAsUser(new TokenAdmin(opened), user));
    } finally {
      await token.close();
    }
  } finally {
    pin.fill(0);
  }
}

export async function keyByLabel(token: Token, label: string, ctx: Context): Promise<SigningKey> {
  const key = await token.key(label);
  if (!key) {
    throw new Error(
      `no signing key labelled '${label}' on token '${ctx.common.tokenLabel}'; 'svcd token list' ` +
        `shows the keys (or pass --key-type to generate one with svcd ca init)`,
    );
  }
  if (!key.publicKeySpki) throw new Error(`key '${label}' (${key.keyType}) has no SPKI encoding`);
  return key;
}

/** The CA certificate and its token key, checked to belong together. */
export async function caKey(token: Token, folder: CaFolder, ctx: Context) {
  const cert = pkijs.Certificate.fromBER(folder.caDer.slice().buffer);
  const spki = new Uint8Array(cert.subjectPublicKeyInfo.toSchema().toBER());
  const key = await keyByLabel(token, folder.config.keyLabel, ctx);
  if (!bytesEqual(spki, key.publicKeySpki!)) {
    throw new Error(
      `the token key '${folder.config.keyLabel}' is not the key of ${
        CaFolder.paths(ctx.dir).caCert
      } ` +
        `(another token, or the key was replaced); pass the --token that holds the CA key`,
    );
  }
  return { cert, spki, key };
}

/** notBefore now, notAfter after `n` days, never past the CA's own notAfter. */
export function validity(n: number, ca?: pkijs.Certificate): { notBefore: Date; notAfter: Date } {
  const notBefore = new Date(Math.floor(Date.now() / 1000) * 1000);
  const notAfter = new Date(notBefore.getTime() + n * DAY_MS);
  const caEnd = ca?.notAfter.value;
  if (caEnd && notAfter > caEnd) {
    const left = Math.floor((caEnd.getTime() - notBefore.getTime()) / DAY_MS);
    throw new UsageError(
      `the CA expires on ${caEnd.toISOString()}; a certificate cannot outlive it: use --days ${left} or less`,
    );
  }
  return { notBefore, notAfter };
}

/** Where `--out` asks for a copy of what a command writes (none without it). */
export function outCopies(ctx: Context): string[] {
  const out = ctx.options.get("out");
  return out ? [out] : [];
}
