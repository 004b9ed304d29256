/**
 * The three jobs of `svcd client`: `keys` (list, and write public keys as PEM), `sign` (hash
 * locally, sign in digest mode where the key has one, check the signature locally before writing
 * it) and `verify` (locally, or by svcd's /verify with `remote`).
 *
 * @example
 * ```ts
 * import { type SignRequest, signFiles } from "./commands.ts";
 * import type { SvcdConnection } from "./http.ts";
 * declare const conn: SvcdConnection;
 * const req: SignRequest = { keyLabel: "web", files: ["a.tar"], format: "der" };
 * await signFiles(conn, req, (line) => console.log(line));
 * ```
 */
import { ClientError } from "./errors.ts";
import { answerError } from "./answers.ts";
import type { SvcdConnection } from "./http.ts";
import { type ClientKey, fetchKeys, findKey, type KeyList } from "./keys.ts";
import { type BodyLimit, bodyLimit, describeLimit } from "./settings.ts";
import {
  createDigester,
  digestModeName,
  type DigestName,
  digestOf,
  localDigestName,
} from "./digests.ts";
import { hashFile, progressFor } from "./hash.ts";
import { type Signed, verifyLocally } from "./verify.ts";
import {
  checkFormatFor,
  decodeSignature,
  encodeSignature,
  isContainerFormat,
  type RawFormat,
  type SignatureFormat,
} from "./format.ts";
import { certificateSummary, cmsSignature, type SignBody, writeJws } from "./containers/sign.ts";
import { pem } from "../der/mod.ts";

/** Where a command's lines go (stdout), so tests can collect them. */
export type Print = (line: string) => void;

/** What `sign` was asked. */
export interface SignRequest {
  keyLabel: string;
  files: string[];
  /** The signature file of a single FILE (default FILE.sig; cms: FILE.p7s, jws: FILE.jws). */
  out?: string;
  format: SignatureFormat;
  /** jws: the payload part left empty (RFC 7515 appendix F). */
  detached?: boolean;
  /** --max-body as given: it can only lower the server's limit ({@link bodyLimit}). */
  maxBody?: number;
  /** Where warnings go (stderr). */
  warn?: (line: string) => void;
}

/** What `verify` was asked. */
export interface VerifyRequest {
  keyLabel: string;
  file: string;
  signature: string;
  format: RawFormat;
  remote: boolean;
  /** --max-body as given (for --remote): it can only lower the server's limit. */
  maxBody?: number;
}

/** How one file goes to svcd: its digest, or the file itself. */
type Plan = { mode: "digest"; name: DigestName } | { mode: "message" };

/**
 * `svcd client keys`: one line per key (label, type, digest modes, certificate); with `outDir`,
 * each public key as LABEL.pem there, and a certified key's certificate and chain as
 * LABEL.crt.pem.
 */
export async function listKeys(
  conn: SvcdConnection,
  outDir: string | undefined,
  print: Print,
): Promise<void> {
  const list = await fetchKeys(conn);
  const rows = [["LABEL", "TYPE", "DIGEST MODES", "CERTIFICATE"]].concat(list.keys.map((k) => [
    k.label,
    k.keyType,
    k.digests.length ? k.digests.join(",") : "none (message mode)",
    certificateSummary(k),
  ]));
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows) print(r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join("  ").trimEnd());
  for (const u of list.unusable) print(`${u.label}: unusable: ${u.error}`);
  if (!list.digestModeKnown && list.keys.length > 0) {
    print(
      `(this svcd states no digest modes: every file is sent whole; ${
        describeLimit(bodyLimit(undefined, list.maxBody))
      })`,
    );
  }
  if (outDir !== undefined) {
    for (const key of list.keys) {
      print(
        key.publicKeySpki
          ? `wrote ${await writePem(outDir, key, "pem", pem("PUBLIC KEY", key.publicKeySpki))}`
          : `${key.label}: svcd lists no SubjectPublicKeyInfo for it; no PEM written`,
      );
      if (key.certificate) {
        const certificates = [key.certificate, ...key.chain].map((c) => pem("CERTIFICATE", c));
        print(`wrote ${await writePem(outDir, key, "crt.pem", certificates.join(""))}`);
      }
    }
  }
}

async function writePem(
  outDir: string,
  key: ClientKey,
  suffix: string,
  text: string,
): Promise<string> {
  // A label is any text; as a file name it must not leave the folder.
  const path = `${outDir}/${key.label.replace(/[^\w.@+=-]/g, "_").replace(/^\./, "_")}.${suffix}`;
  try {
    await Deno.writeTextFile(path, text);
  } catch (err) {
    throw new ClientError(`cannot write ${path}: ${(err as Error).message} (check --out-dir)`);
  }
  return path;
}

/**
 * `svcd client sign`: every file is checked first (readable; small enough when it must be sent
 * whole), then signed one by one; a signature is written only when it verifies locally.
 */
export async function signFiles(
  conn: SvcdConnection,
  req: SignRequest,
  print: Print,
): Promise<void> {
  if (req.out !== undefined && req.files.length !== 1) {
    throw new ClientError("--out names the signature of one FILE: give one FILE, or no --out", {
      usage: true,
    });
  }
  const list = await fetchKeys(conn);
  const key = findKey(list, req.keyLabel);
  const format = req.format;
  if (!isContainerFormat(format)) checkFormatFor(format, key.keyType);
  const plan = planFor(key);
  const limit = bodyLimit(req.maxBody, list.maxBody);
  // The containers send a digest or a small signing input, never the file as it is.
  const sent: Plan = isContainerFormat(format) ? { mode: "digest", name: "sha-256" } : plan;
  const sizes = [];
  for (const file of req.files) sizes.push(await sizeOf(file, sent, key, limit, "sign"));
  const warn = req.warn ?? ((line: string) => console.error(`svcd client sign: ${line}`));
  for (const [i, file] of req.files.entries()) {
    const sign = (body: SignBody) => signatureOf(conn, key, body, limit, file);
    const out = req.out ?? `${file}.${SUFFIX[format]}`;
    let how: string;
    if (format === "cms") {
      await writeAtomically(out, await cmsSignature(key, file, sign, warn));
      how = "CMS SignedData, signed attributes sent";
    } else if (format === "jws") {
      const digest = plan.mode === "digest" ? plan.name : undefined;
      await writeJws(
        { key, file, out, detached: req.detached ?? false, digest, limit },
        sign,
        warn,
      );
      how = `JWS${req.detached ? " (detached)" : ""}, ${digest ? `digest ${digest}` : "message"}`;
    } else {
      const signed = await signOne(conn, key, plan, file, sizes[i], limit);
      await writeAtomically(out, encodeSignature(signed, format, key.keyType));
      how = describePlan(plan);
    }
    print(`${file}: signed with '${key.label}' (${key.keyType}, ${how}) -> ${out}`);
  }
}

/** The signature file's default suffix by format. */
const SUFFIX: Record<SignatureFormat, string> = {
  raw: "sig",
  der: "sig",
  base64: "sig",
  cms: "p7s",
  jws: "jws",
};

function planFor(key: ClientKey): Plan {
  const name = digestModeName(key);
  return name ? { mode: "digest", name } : { mode: "message" };
}

function describePlan(plan: Plan): string {
  return plan.mode === "digest" ? `digest ${plan.name}` : "message";
}

/**
 * The file's size, once it is known to be a regular file that fits the body when it is sent whole;
 * `alongside` is what travels in the same body (/verify's signature).
 */
async function sizeOf(
  file: string,
  plan: Plan,
  key: ClientKey,
  limit: BodyLimit,
  job: "sign" | "verify",
  alongside = 0,
): Promise<number> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(file);
  } catch (err) {
    throw new ClientError(`cannot read ${file}: ${(err as Error).message}`);
  }
  if (!info.isFile) throw new ClientError(`${file} is not a regular file: give files to sign`);
  if (plan.mode === "message" && info.size + alongside > limit.bytes) {
    const withSignature = alongside ? ` (${info.size + alongside} with the signature)` : "";
    throw new ClientError(
      `${file} is ${info.size} bytes${withSignature}; ${describeLimit(limit)}: key ` +
        `'${key.label}' (${key.keyType}) has no digest mode, so the file itself is sent; ` +
        `nothing was ${job === "sign" ? "signed" : "sent"}. ${
          job === "sign"
            ? "Sign a smaller file or a digest list of it"
            : "Verify it here instead (without --remote)"
        }, or ${raiseLimit(limit)}`,
    );
  }
  return info.size;
}

/** What raises the limit, by where it came from. */
function raiseLimit(limit: BodyLimit): string {
  switch (limit.from) {
    case "server":
      return "ask the operator to raise svcd's --max-body";
    case "flag":
      return limit.served === undefined
        ? "raise --max-body to the operator's limit"
        : `raise --max-body (the server takes up to ${limit.served} bytes)`;
    case "default":
      return "set --max-body to the operator's larger limit";
  }
}

async function signOne(
  conn: SvcdConnection,
  key: ClientKey,
  plan: Plan,
  file: string,
  size: number,
  limit: BodyLimit,
): Promise<Uint8Array> {
  const body: SignBody = plan.mode === "digest"
    ? {
      mode: "digest",
      name: plan.name,
      digest: await hashFile(
        file,
        createDigester(plan.name, key.publicKeyRaw),
        progressFor(file, size),
      ),
    }
    : { mode: "message", bytes: await readWhole(file, limit) };
  return await signatureOf(conn, key, body, limit, file);
}

/**
 * svcd's signature over `body` (its message, or the digest in digest mode), once it verifies here
 * with the key's public key; `what` names the signed file in the refusal.
 */
async function signatureOf(
  conn: SvcdConnection,
  key: ClientKey,
  body: SignBody,
  limit: BodyLimit,
  what: string,
): Promise<Uint8Array> {
  const headers: Array<[string, string]> = [["X-SVC-Key", key.label]];
  if (body.mode === "digest") headers.push(["X-SVC-Digest", body.name]);
  const bytes = body.mode === "digest" ? body.digest : body.bytes;
  const answer = await conn.request("POST", "/sign", headers, bytes);
  if (answer.status !== 200) throw answerError(answer, { key: key.label, limit });
  const signed: Signed = body.mode === "digest"
    ? { digest: body.digest }
    : checkedOver(key, body.bytes);
  if (!await verifyLocally(key, answer.body, signed)) {
    throw new ClientError(
      `svcd's signature of ${what} does not verify with the public key of '${key.label}': ` +
        "nothing was written; run again, and tell the operator if it repeats",
    );
  }
  return answer.body;
}

/** What a message is checked over locally: its digest for the key type, or itself (Ed25519). */
function checkedOver(key: ClientKey, message: Uint8Array): Signed {
  const name = localDigestName(key.keyType);
  return name ? { digest: digestOf(name, key.publicKeyRaw, message) } : { message };
}

async function readWhole(file: string, limit: BodyLimit, alongside = 0): Promise<Uint8Array> {
  const bytes = await Deno.readFile(file).catch((err) => {
    throw new ClientError(`cannot read ${file}: ${err.message}`);
  });
  if (bytes.length + alongside > limit.bytes) {
    throw new ClientError(
      `${file} grew to ${bytes.length} bytes while being read; ${describeLimit(limit)}: ` +
        "nothing was sent",
    );
  }
  return bytes;
}

async function writeAtomically(path: string, bytes: Uint8Array): Promise<void> {
  const temp = `${path}.${Deno.pid}.tmp`;
  try {
    await Deno.writeFile(temp, bytes);
    await Deno.rename(temp, path);
  } catch (err) {
    await Deno.remove(temp).catch(() => {});
    throw new ClientError(`cannot write ${path}: ${(err as Error).message} (check --out)`);
  }
}

/** `svcd client verify`: true when valid. Locally with the key's public key, or svcd's /verify. */
export async function verifyFile(conn: SvcdConnection, req: VerifyRequest): Promise<boolean> {
  const list: KeyList = await fetchKeys(conn);
  const key = findKey(list, req.keyLabel);
  const signature = decodeSignature(
    await Deno.readFile(req.signature).catch((err) => {
      throw new ClientError(`cannot read ${req.signature}: ${err.message}`);
    }),
    req.format,
    key.keyType,
    req.signature,
  );
  if (req.remote) {
    return await verifyRemotely(conn, key, req, signature, bodyLimit(req.maxBody, list.maxBody));
  }
  const name = localDigestName(key.keyType);
  if (name === undefined) {
    const message = await Deno.readFile(req.file).catch((err) => {
      throw new ClientError(`cannot read ${req.file}: ${err.message}`);
    });
    return await verifyLocally(key, signature, { message });
  }
  const size = (await Deno.stat(req.file).catch((err) => {
    throw new ClientError(`cannot read ${req.file}: ${err.message}`);
  })).size;
  const digest = await hashFile(
    req.file,
    createDigester(name, key.publicKeyRaw),
    progressFor(req.file, size),
  );
  return await verifyLocally(key, signature, { digest });
}

async function verifyRemotely(
  conn: SvcdConnection,
  key: ClientKey,
  req: VerifyRequest,
  signature: Uint8Array,
  limit: BodyLimit,
): Promise<boolean> {
  const plan = planFor(key);
  const size = await sizeOf(req.file, plan, key, limit, "verify", signature.length);
  const headers: Array<[string, string]> = [
    ["X-SVC-Key", key.label],
    ["X-SVC-Signature-Length", String(signature.length)],
  ];
  let tail: Uint8Array;
  if (plan.mode === "digest") {
    tail = await hashFile(
      req.file,
      createDigester(plan.name, key.publicKeyRaw),
      progressFor(req.file, size),
    );
    headers.push(["X-SVC-Digest", plan.name]);
  } else {
    tail = await readWhole(req.file, limit, signature.length);
  }
  const body = new Uint8Array(signature.length + tail.length);
  body.set(signature);
  body.set(tail, signature.length);
  const answer = await conn.request("POST", "/verify", headers, body);
  if (answer.status === 200) return true;
  if (answer.status === 422) return false;
  throw answerError(answer, { key: key.label, limit });
}
