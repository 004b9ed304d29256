/**
 * A daemon that keeps and serves a CA's CRLs (`svcd serve --ca-dir`), for the CRL tests: a test
 * token, a CA made by `svcd ca init` with a CRL URL and partitions recorded, certificates issued
 * (the first ones revoked before the daemon starts), and the daemon with its public and metrics
 * sockets; the served CRLs read over the public socket.
 *
 * @example
 * ```ts
 * const s = await startCrlDaemon({ partitions: 4, certificates: 6, revoked: 1 });
 * await waitForServed(s, "full.crl", (der) => lists(der, s.certs[0].serial), 5_000);
 * await s.stop();
 * ```
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./temp_dir.ts";
import { makeTestToken, type TestToken } from "./token.ts";
import type { TestModuleName } from "./modules.ts";
import { startDaemon, type TestDaemon } from "./daemon.ts";
import { type Issued, makeTestCa, opensslRequest, type TestCa } from "./ca.ts";
import { type ClientResponse, request } from "./http_client.ts";

/** The CRL URL the tests record (`URL/full.crl`, `URL/K.crl`). */
export const CRL_URL = "http://pki.example.org/crl";

/** What to make. */
export interface CrlDaemonOptions {
  /** The CA key's type (default ec-p256). */
  keyType?: string;
  /** CRL partitions recorded with the CRL URL (default 4). */
  partitions?: number;
  /** Certificates issued (default 6). */
  certificates?: number;
  /** How many of the first ones are revoked before the daemon starts (default 1). */
  revoked?: number;
  /** More `svcd serve` options (e.g. --crl-validity). */
  args?: string[];
  /** This module whatever SVCD_TEST_MODULE says (svcmod's fault hook). */
  module?: TestModuleName;
}

/** The running set-up. */
export interface CrlDaemon {
  token: TestToken;
  ca: TestCa;
  daemon: TestDaemon;
  publicSocket: string;
  metricsSocket: string;
  crlDir: string;
  partitions: number;
  certs: Issued[];
  /** A folder for the test's own files. */
  work: string;
  /** The partition of an issued certificate. */
  partitionOf(cert: Issued): number;
  /** Stops the daemon and starts it again with the same folders and options. */
  restart(): Promise<void>;
  /** Stops the daemon and removes the token. */
  stop(): Promise<void>;
}

/** Makes the token, the CA and its certificates, and starts the daemon. */
export async function startCrlDaemon(opts: CrlDaemonOptions = {}): Promise<CrlDaemon> {
  const partitions = opts.partitions ?? 4;
  const token = await makeTestToken({ keys: {}, module: opts.module });
  const work = moduleTempDir("svcd-crl-");
  const ca = await makeTestCa(token, {
    keyLabel: "ca",
    keyType: opts.keyType ?? "ec-p256",
    subject: "CN=CRL test CA",
    dir: `${work}/ca`,
  }).catch(async (err) => {
    await token.cleanup();
    throw err;
  });
  const urls = await ca.run("urls", [
    ...["--ocsp-url", "http://pki.example.org/ocsp", "--crl-url", CRL_URL],
    ...["--crl-partitions", String(partitions)],
  ]);
  assert.equal(urls.code, 0, urls.text);
  const certs: Issued[] = [];
  for (let i = 0; i < (opts.certificates ?? 6); i++) {
    const csr = await opensslRequest(ca.dir, `c${i}`, `/CN=c${i}`);
    certs.push(await ca.issue(["--csr", csr.request]));
  }
  for (const cert of certs.slice(0, opts.revoked ?? 1)) {
    const r = await ca.run("revoke", [cert.serial, "--reason", "keyCompromise"]);
    assert.equal(r.code, 0, r.text);
  }
  const publicSocket = `${work}/public.sock`;
  const metricsSocket = `${work}/metrics.sock`;
  const crlDir = `${work}/crl`;
  const daemonOptions = {
    token,
    policy: "",
    workDir: moduleTempDir("svcd-crl-daemon-"),
    args: [
      ...["--public-socket", publicSocket, "--ca-dir", ca.dir, "--ca-cert", ca.caPem],
      ...["--ocsp-label", "ca", "--crl-dir", crlDir, "--metrics-socket", metricsSocket],
      ...["--syslog-socket", "none", ...(opts.args ?? [])],
    ],
  };
  const s: CrlDaemon = {
    token,
    ca,
    daemon: await startDaemon(daemonOptions),
    publicSocket,
    metricsSocket,
    crlDir,
    partitions,
    certs,
    work,
    partitionOf: (cert) => Number(BigInt("0x" + cert.serial) % BigInt(partitions)),
    restart: async () => {
      await s.daemon.stop();
      s.daemon = await startDaemon(daemonOptions);
    },
    stop: async () => {
      await s.daemon.stop();
      await token.cleanup();
    },
  };
  return s;
}

/** GET (or HEAD…) /crl/NAME on the public socket. */
export async function getCrl(
  socket: string,
  name: string,
  method = "GET",
): Promise<ClientResponse> {
  return await request(socket, { method, path: `/crl/${name}` });
}

/**
 * Polls the served CRL NAME until `ok(der)` holds, or fails with the daemon's log once the
 * deadline has passed; resolves to the time it took (ms).
 */
export async function waitForServed(
  s: Pick<CrlDaemon, "publicSocket" | "daemon">,
  name: string,
  ok: (der: Uint8Array) => boolean,
  deadlineMs: number,
): Promise<number> {
  const start = performance.now();
  for (;;) {
    const res = await getCrl(s.publicSocket, name);
    if (res.status === 200 && ok(res.body)) return performance.now() - start;
    if (performance.now() - start > deadlineMs) {
      throw new Error(`CRL ${name} not as expected within ${deadlineMs} ms:\n${s.daemon.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether a DER CRL lists a serial (upper-case hex as index.txt has it) as an entry's INTEGER. */
export function lists(der: Uint8Array, serialHex: string): boolean {
  let hex = serialHex;
  if (parseInt(hex.slice(0, 2), 16) & 0x80) hex = "00" + hex;
  const entry = `02${(hex.length / 2).toString(16).padStart(2, "0")}${hex}`.toLowerCase();
  return der.toHex().includes(entry);
}

/** Resolves once the daemon's log shows `pattern`; fails with the log after `ms`. */
export async function logged(
  daemon: TestDaemon,
  pattern: RegExp | string,
  ms = 10_000,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${pattern} in:\n${daemon.stderr()}`)), ms);
  });
  try {
    await Promise.race([daemon.waitForLog(pattern), late]);
  } finally {
    clearTimeout(timer);
  }
}
