/**
 * A CA folder made with `svcd ca init` on a test token, and client key material made with the
 * openssl command line, for the CA tool's tests.
 *
 * @example
 * ```ts
 * import type { TestToken } from "./token.ts";
 * declare const token: TestToken;
 * const ca = await makeTestCa(token, { keyLabel: "ca", keyType: "ec-p256" });
 * const csr = await opensslRequest(ca.dir, "alice", "/C=DE/O=Example/CN=alice");
 * const issued = await ca.issue(["--csr", csr.request, "--grant", "web"]);
 * ```
 */
import assert from "node:assert/strict";
import { type CliResult, runCaCli, type TestToken } from "./token.ts";
import { runCommand } from "./command.ts";
import { type CertificateInfo, readCertificates } from "../../lib/ocsp/mod.ts";

/** A CA folder on a test token, and its CLI bound to that token. */
export interface TestCa {
  dir: string;
  caPem: string;
  /** Runs `svcd ca <command> --ca-dir DIR --module … --token …` with the token's environment. */
  run(command: string, args?: string[]): Promise<CliResult>;
  /** `svcd ca issue …`, asserted to succeed; the certificate path and what it printed. */
  issue(args: string[]): Promise<Issued>;
}

/** What `svcd ca issue` made and printed. */
export interface Issued {
  path: string;
  serial: string;
  /** The line printed under "subject as nginx passes it". */
  nginxSubject: string;
  /** The policy lines printed (subject TAB label). */
  policyLines: string[];
  output: string;
}

/**
 * Runs `svcd ca init` (with --key-type the key is generated, else the label must exist).
 */
export async function makeTestCa(
  token: TestToken,
  opts: { keyLabel: string; keyType?: string; subject?: string; dir?: string; days?: number },
): Promise<TestCa> {
  const dir = opts.dir ?? `${token.dir}/ca-${opts.keyLabel}`;
  const common = ["--ca-dir", dir, "--module", token.modulePath, "--token", token.tokenLabel];
  const run = (command: string, args: string[] = []) =>
    runCaCli([command, ...common, ...args], token.env);
  const init = await run("init", [
    "--key-label",
    opts.keyLabel,
    ...(opts.keyType ? ["--key-type", opts.keyType] : []),
    ...(opts.subject ? ["--subject", opts.subject] : []),
    ...(opts.days ? ["--days", String(opts.days)] : []),
  ]);
  assert.equal(init.code, 0, init.text);
  return {
    dir,
    caPem: `${dir}/ca.pem`,
    run,
    async issue(args) {
      const r = await run("issue", args);
      assert.equal(r.code, 0, r.text);
      return parseIssued(r.stdout);
    },
  };
}

/**
 * Reads what `svcd ca issue` printed.
 */
export function parseIssued(stdout: string): Issued {
  const lines = stdout.split("\n");
  const written = stdout.match(/certificate ([0-9A-F]+) written to (\S+)/);
  assert.ok(written, stdout);
  const at = lines.findIndex((l) => l.startsWith("subject as nginx passes it"));
  const policyAt = lines.findIndex((l) => l.startsWith("policy line"));
  assert.ok(at >= 0 && policyAt > at, stdout);
  const policyLines = [];
  for (let i = policyAt + 1; i < lines.length && lines[i].includes("\t"); i++) {
    policyLines.push(lines[i]);
  }
  return {
    serial: written[1],
    path: written[2],
    nginxSubject: lines[at + 1],
    policyLines,
    output: stdout,
  };
}

/**
 * Runs openssl and asserts success; returns its output.
 *
 * @example
 * ```ts
 * declare const ca: TestCa, cert: string;
 * await openssl(["verify", "-CAfile", ca.caPem, cert]);
 * ```
 */
export async function openssl(args: string[]): Promise<string> {
  const r = await runCommand("openssl", args);
  assert.equal(r.code, 0, `openssl ${args.join(" ")}\n${r.text}`);
  return r.stdout;
}

/**
 * A client key and PKCS#10 request made by openssl (`-subj` takes the slash form, and -utf8).
 */
export async function opensslRequest(
  dir: string,
  name: string,
  subj: string,
  algorithm: "ec" | "ed25519" | "rsa" = "ec",
): Promise<{ key: string; request: string }> {
  const key = `${dir}/${name}.key`, request = `${dir}/${name}.csr`;
  const genpkey = {
    ec: ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    ed25519: ["-algorithm", "ED25519"],
    rsa: ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
  }[algorithm];
  await openssl(["genpkey", ...genpkey, "-out", key]);
  await openssl(["req", "-new", "-utf8", "-key", key, "-subj", subj, "-out", request]);
  return { key, request };
}

/** A CA with one issued certificate and the options that serve OCSP for it on a public socket. */
export interface PublicListenerSetup {
  socket: string;
  /** `--public-socket …` and the OCSP options, for startDaemon's `args`. */
  args: string[];
  ca: TestCa;
  /** The CA certificate, parsed. */
  issuer: CertificateInfo;
  /** The serial (INTEGER content) of a certificate the CA issued. */
  issuedSerial: Uint8Array;
}

/**
 * `svcd serve` options for a public listener at `socket` answering OCSP for `ca` (its key `label`).
 *
 * @example
 * ```ts
 * import { startDaemon } from "./daemon.ts";
 * import type { TestToken } from "./token.ts";
 * declare const token: TestToken, policy: string, ca: TestCa, work: string;
 * const daemon = await startDaemon({ token, policy, args: publicListenerArgs(ca, `${work}/public.sock`) });
 * ```
 */
export function publicListenerArgs(ca: TestCa, socket: string, label = "ca"): string[] {
  return [
    "--public-socket",
    socket,
    "--revocation-db",
    `${ca.dir}/index.txt`,
    "--ocsp-label",
    label,
    "--ca-cert",
    ca.caPem,
  ];
}

/**
 * `svcd ca init` (key `ca`, ec-p256) on the token, one certificate issued to alice, and the daemon
 * options for a public listener at `workDir/public.sock` answering OCSP for that CA.
 *
 * @example
 * ```ts
 * import { startDaemon } from "./daemon.ts";
 * import type { TestToken } from "./token.ts";
 * declare const token: TestToken, policy: string, workDir: string;
 * const pub = await publicListenerSetup(token, workDir);
 * const daemon = await startDaemon({ token, policy, workDir, args: pub.args });
 * ```
 */
export async function publicListenerSetup(
  token: TestToken,
  workDir: string,
): Promise<PublicListenerSetup> {
  const ca = await makeTestCa(token, { keyLabel: "ca", keyType: "ec-p256", subject: "CN=Test CA" });
  const csr = await opensslRequest(ca.dir, "alice", "/C=DE/O=Example/CN=alice");
  const issued = await ca.issue(["--csr", csr.request]);
  const socket = `${workDir}/public.sock`;
  return {
    socket,
    args: publicListenerArgs(ca, socket),
    ca,
    issuer: readCertificates(Deno.readFileSync(ca.caPem))[0],
    issuedSerial: readCertificates(Deno.readFileSync(issued.path))[0].serial,
  };
}
