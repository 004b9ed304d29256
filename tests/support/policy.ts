/**
 * Test helpers for policy files: a valid policy of an exact size, for the size limit and for
 * reloads of the largest file.
 */

/**
 * A policy of exactly `size` bytes: `grants` first, then grants of made-up subjects, padded by a
 * comment line.
 *
 * @example
 * ```ts
 * policyOfSize(4096).length; // → 4096
 * ```
 */
export function policyOfSize(size: number, grants: string[] = []): string {
  const lines = grants.map((g) => g + "\n");
  let length = lines.reduce((n, l) => n + l.length, 0);
  for (let i = 0; length + 200 < size; i++) {
    const line = `CN=client-${i},O=Example,C=DE\tk${i % 7}\n`;
    lines.push(line);
    length += line.length;
  }
  lines.push(`# ${"x".repeat(size - length - 3)}\n`);
  return lines.join("");
}
