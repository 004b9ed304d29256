/**
 * Reads the audit lines a test daemon wrote, oldest file first, as parsed JSON objects.
 *
 * @example
 * ```ts
 * const signs = (await readAuditLines(daemon.auditDir)).filter((l) => l.event === "sign");
 * ```
 */

/** One audit line: at least event and actor (spec §6). */
export interface AuditLine {
  event: string;
  actor: string;
  [field: string]: unknown;
}

/** Every complete line of every audit.log.NNNNNN in `dir`, in file then line order. */
export async function readAuditLines(dir: string): Promise<AuditLine[]> {
  const files: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (/^audit\.log\.\d{6}$/.test(e.name)) files.push(e.name);
  }
  files.sort();
  const lines: AuditLine[] = [];
  for (const f of files) {
    const text = await Deno.readTextFile(`${dir}/${f}`);
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      try {
        lines.push(JSON.parse(line));
      } catch { /* a torn final line */ }
    }
  }
  return lines;
}
