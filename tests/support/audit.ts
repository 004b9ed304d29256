/**
 * Reads the audit lines a test daemon wrote, oldest file first, as parsed JSON objects.
 *
 * @example
 * ```ts
 * import type { TestDaemon } from "./daemon.ts";
 * declare const daemon: TestDaemon;
 * const signs = (await readAuditLines(daemon.auditDir)).filter((l) => l.event === "sign");
 * ```
 */

import assert from "node:assert/strict";
import { type CommandResult, runDeno } from "./command.ts";

/** One audit line: a JSON object with at least event and actor (the certificate subject). */
export interface AuditLine {
  event: string;
  actor: string;
  [field: string]: unknown;
}

/**
 * SHA-256 in hex, as a `sign` line names the message and the signature (`message_sha256`,
 * `signature_sha256`): how a test finds the line of a signature it received.
 *
 * @example
 * ```ts
 * const hex = await sha256Hex(new TextEncoder().encode("m")); // 64 hex digits
 * ```
 */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource)).toHex();
}

/** Every complete line of every audit.log.NNNNNN in `dir`, in file then line order. */
export async function readAuditLines(dir: string): Promise<AuditLine[]> {
  const lines: AuditLine[] = [];
  for await (const line of auditLines(dir)) lines.push(line);
  return lines;
}

/**
 * The same lines one at a time, read as a stream: a soak's log (a gigabyte) is never one string.
 *
 * @example
 * ```ts
 * declare const dir: string, seen: Set<unknown>;
 * for await (const l of auditLines(dir)) if (l.event === "sign") seen.add(l.signature_sha256);
 * ```
 */
export async function* auditLines(dir: string): AsyncGenerator<AuditLine> {
  const files: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (/^audit\.log\.\d{6}$/.test(e.name)) files.push(e.name);
  }
  files.sort();
  for (const f of files) {
    const file = await Deno.open(`${dir}/${f}`);
    let rest = "";
    for await (const chunk of file.readable.pipeThrough(new TextDecoderStream())) {
      const parts = (rest + chunk).split("\n");
      rest = parts.pop()!;
      for (const line of parts) {
        const parsed = parseLine(line);
        if (parsed) yield parsed;
      }
    }
    const last = parseLine(rest);
    if (last) yield last;
  }
}

/** One line as JSON; undefined for a blank or torn one. */
function parseLine(line: string): AuditLine | undefined {
  if (line.trim() === "") return undefined;
  try {
    return JSON.parse(line);
  } catch {
    return undefined; // a torn final line
  }
}

const MAIN = new URL("../../main.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

/**
 * Runs `svcd audit verify --audit-dir DIR` (one `--audit-dir` per folder given) against a test token (logging
 * in through its credential).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import type { TestDaemon } from "./daemon.ts";
 * import type { TestToken } from "./token.ts";
 * declare const token: TestToken, daemon: TestDaemon;
 * const r = await runAuditVerify(token, daemon.auditDir);
 * assert.equal(r.code, 0, r.text);
 * ```
 */
export function runAuditVerify(
  token: { env: Record<string, string>; modulePath: string; tokenLabel: string },
  dir: string | string[],
): Promise<CommandResult> {
  return runDeno(
    [
      "--config",
      CONFIG,
      MAIN,
      "audit",
      "verify",
      ...[dir].flat().flatMap((d) => ["--audit-dir", d]),
      "--module",
      token.modulePath,
      "--token",
      token.tokenLabel,
    ],
    { env: { ...token.env, NO_COLOR: "1" } },
  );
}

/**
 * The closing check after an audit outage: the log holds exactly the `served` signatures (SHA-256
 * hex, in order), says it resumed, and `svcd audit verify` passes over it.
 */
export async function assertLoggedAfterOutage(
  token: { env: Record<string, string>; modulePath: string; tokenLabel: string },
  dir: string,
  served: string[],
): Promise<void> {
  const lines = await readAuditLines(dir);
  const signs = lines.filter((l) => l.event === "sign").map((l) => l.signature_sha256);
  assert.deepEqual(signs, served, "exactly the served signatures are logged, in order");
  assert.ok(lines.some((l) => l.event === "audit_resumed"), "the log says it resumed");
  const v = await runAuditVerify(token, dir);
  assert.equal(v.code, 0, v.text);
}
