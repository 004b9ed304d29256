/**
 * `svcd ca init`, `issue` and `responder`: the certificates the CA signs with its token key.
 */
import * as pkijs from "pkijs";
import { isKeyTypeName, KEY_TYPE_NAMES, type SigningKey, type Token } from "../../token/mod.ts";
import {
  buildCertificate,
  caExtensions,
  clientExtensions,
  responderExtensions,
} from "../certificate.ts";
import { readPublicKey, readRequest } from "../csr.ts";
import { nameFromRfc4514, nginxSubject, slashSubject } from "../name.ts";
import { CaFolder, serialHex } from "../store.ts";
import { getpwnam } from "../../../ffi/libc.ts";
import { bytesEqual } from "../../bytes/mod.ts";
import { parseCertificate } from "../../ocsp/mod.ts";
import type { TokenAdmin } from "../../token_admin/mod.ts";
import { revocationPointers } from "../certificate.ts";
import { EXIT } from "../../cli/exit.ts";
import {
  caKey,
  type Context,
  days,
  DEFAULT_DAYS,
  keyByLabel,
  outCopies,
  randomSerial,
  required,
  signerOf,
  UsageError,
  validity,
  withToken,
} from "./context.ts";
import { urlOptions } from "./revocation.ts";

export async function init(ctx: Context): Promise<number> {
  const label = required(ctx, "key-label");
  const type = ctx.options.get("key-type");
  if (type !== undefined && !isKeyTypeName(type)) {
    throw new UsageError(`unknown key type '${type}'; one of: ${KEY_TYPE_NAMES.join(", ")}`);
  }
  const subject = nameFromRfc4514(ctx.options.get("subject") ?? "CN=svcd CA");
  const { notBefore, notAfter } = validity(days(ctx, DEFAULT_DAYS.ca));
  const urls = urlOptions(ctx);
  const caPath = CaFolder.paths(ctx.dir).caCert;
  if (await Deno.stat(caPath).then(() => true, () => false)) {
    throw new Error(`${ctx.dir} already holds a CA (${caPath}); choose another --ca-dir`);
  }
  const der = await withToken(ctx, async (token, admin) => {
    let key: SigningKey;
    if (type) {
      ctx.say(`generating ${type} key '${label}' on the token`);
      key = await admin.generateKeyPair(label, type);
    } else key = await keyByLabel(token, label, ctx);
    ctx.say(`signing the CA certificate with '${label}' (${key.keyType})`);
    const spki = key.publicKeySpki!;
    return await buildCertificate({
      serial: randomSerial(),
      issuer: subject,
      subject,
      spki,
      notBefore,
      notAfter,
      extensions: caExtensions(spki),
    }, signerOf(token, key));
  });
  const folder = await CaFolder.create(ctx.dir, { keyLabel: label }, der, randomSerial());
  if (urls) await folder.locked(() => folder.recordUrls(urls));
  const daemonUser = ctx.common.user ? getpwnam(ctx.common.user) : null;
  if (daemonUser) await folder.shareCrlCounter(daemonUser.gid);
  ctx.say(`CA '${nginxSubject(subject)}' valid until ${notAfter.toISOString()}`);
  ctx.say(`wrote ${caPath} and the CA folder ${ctx.dir}`);
  console.log(`nginx: ssl_client_certificate ${caPath};`);
  console.log(
    `svcd serve: --public-socket PATH --revocation-db ${CaFolder.paths(ctx.dir).index} ` +
      `--ca-cert ${caPath} --ocsp-label ${label}`,
  );
  return EXIT.ok;
}

/** What is certified: subject and SPKI, from --csr or --public-key. */
async function subjectAndKey(ctx: Context) {
  const csr = ctx.options.get("csr"), pubkey = ctx.options.get("public-key");
  const subjectText = ctx.options.get("subject");
  if (!csr === !pubkey) throw new UsageError("give exactly one of --csr FILE or --public-key FILE");
  if (pubkey && !subjectText) throw new UsageError("--public-key needs --subject DN");
  if (csr) {
    const request = await readRequest(await Deno.readFile(csr));
    ctx.say(`request ${csr}: self-signature verified`);
    return {
      subject: subjectText ? nameFromRfc4514(subjectText) : request.subject,
      spki: request.spki,
    };
  }
  return {
    subject: nameFromRfc4514(subjectText!),
    spki: readPublicKey(await Deno.readFile(pubkey!)),
  };
}

/**
 * Signs an end-entity certificate with the CA key and records it: an index line, certs/SERIAL.pem
 * and each of `copies`, then hands it to `stored` (still under the folder's lock). `subjectKey`
 * gives the SPKI once the token is open. A certificate that does not hold exactly that SPKI is
 * refused before anything is recorded.
 */
export async function issueEndEntity(
  ctx: Context,
  folder: CaFolder,
  subject: pkijs.RelativeDistinguishedNames,
  subjectKey: (token: Token) => Promise<Uint8Array>,
  lifetime: number,
  extensions: (
    spki: Uint8Array,
    caSpki: Uint8Array,
    pointers: pkijs.Extension[],
  ) => pkijs.Extension[],
  copies: string[],
  stored?: (admin: TokenAdmin, der: Uint8Array) => Promise<void>,
): Promise<{ der: Uint8Array; serial: string; path: string; notAfter: Date }> {
  return await withToken(ctx, async (token, admin) => {
    const ca = await caKey(token, folder, ctx);
    const spki = await subjectKey(token);
    const { notBefore, notAfter } = validity(lifetime, ca.cert);
    return await folder.locked(async () => {
      const serialNumber = await folder.takeSerial();
      const serial = serialHex(serialNumber);
      ctx.say(`signing certificate ${serial} with the CA key '${folder.config.keyLabel}'`);
      const der = await buildCertificate({
        serial: serialNumber,
        issuer: ca.cert.subject,
        subject,
        spki,
        notBefore,
        notAfter,
        extensions: extensions(
          spki,
          ca.spki,
          revocationPointers(folder.config.urls, serialNumber),
        ),
      }, signerOf(token, ca.key));
      if (!bytesEqual(parseCertificate(der).spki, spki)) {
        throw new Error(
          `certificate ${serial} as built does not hold the public key it certifies; not recorded`,
        );
      }
      // The index line first: a certificate the index does not know would be "unknown" to OCSP.
      await folder.appendIndex({
        status: "V",
        expires: notAfter.getTime(),
        serial,
        subject: slashSubject(subject),
      });
      const path = await folder.storeCertificate(serial, der, copies);
      await stored?.(admin, der);
      return { der, serial, path, notAfter };
    });
  });
}

export async function issue(ctx: Context): Promise<number> {
  const lifetime = days(ctx, DEFAULT_DAYS.client);
  const folder = await CaFolder.open(ctx.dir);
  const { subject, spki } = await subjectAndKey(ctx);
  // Before any signing: a subject the tool cannot print as nginx does is refused here.
  const nginx = nginxSubject(subject);
  if (nginx === "") {
    throw new UsageError(
      "the certificate subject would be empty: the proxy would pass an empty identity, which the " +
        "daemon refuses; give --subject DN",
    );
  }
  const slash = slashSubject(subject);
  const grants = ctx.options.get("grant");
  const bad = grants.find((g) => g === "" || /[\t\n\r]/.test(g));
  if (bad !== undefined) throw new UsageError("--grant needs a key label without TAB or newline");
  const done = await issueEndEntity(
    ctx,
    folder,
    subject,
    () => Promise.resolve(spki),
    lifetime,
    clientExtensions,
    outCopies(ctx),
  );
  console.log(
    `certificate ${done.serial} written to ${done.path} (valid until ${done.notAfter.toISOString()})`,
  );
  console.log(`\nsubject as nginx passes it in $ssl_client_s_dn (RFC 4514):\n${nginx}`);
  console.log(
    `\npolicy line${
      grants.length === 1 ? "" : "s"
    } to add to the policy file (subject TAB key label):`,
  );
  for (const label of grants.length > 0 ? grants : ["KEY-LABEL"]) console.log(`${nginx}\t${label}`);
  if (grants.length === 0) {
    console.log("(replace KEY-LABEL with a key label, or pass --grant LABEL)");
  }
  console.log(
    `\nwarning: the slash form '${slash}' (what openssl and index.txt show) would never match: ` +
      `the daemon compares the subject byte for byte with what the proxy sends`,
  );
  return EXIT.ok;
}

export async function responder(ctx: Context): Promise<number> {
  const label = required(ctx, "key-label");
  const lifetime = days(ctx, DEFAULT_DAYS.responder);
  const folder = await CaFolder.open(ctx.dir);
  const subject = nameFromRfc4514(ctx.options.get("subject") ?? "CN=svcd OCSP responder");
  const path = CaFolder.paths(ctx.dir).responder;
  const done = await issueEndEntity(
    ctx,
    folder,
    subject,
    async (token) => (await keyByLabel(token, label, ctx)).publicKeySpki!,
    lifetime,
    responderExtensions,
    [path, ...outCopies(ctx)],
  );
  ctx.say(
    `responder certificate ${done.serial} for key '${label}' written to ${path} and ${done.path}`,
  );
  ctx.say(`valid until ${done.notAfter.toISOString()}`);
  console.log(`svcd serve: --ocsp-label ${label} --ocsp-cert ${path}`);
  return EXIT.ok;
}
