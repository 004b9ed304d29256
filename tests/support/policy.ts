/**
 * Test helpers for policy files: a valid policy of an exact size, for the size limit and for
 * reloads of the largest file.
 */

/**
 * A policy of exactly `size` bytes: `grants` first, then grants of made-up subjects (at most
 * `maxMadeUp` of them), padded by a comment line.
 *
 * @example
 * ```ts
 * policyOfSize(4096).length; // → 4096
 * ```
 */
export function policyOfSize(size: number, grants: string[] = [], maxMadeUp = Infinity): string {
  const lines = grants.map((g) => g + "\n");
  let length = lines.reduce((n, l) => n + l.length, 0);
  for (let i = 0; length + 200 < size && i < maxMadeUp; i++) {
    const line = `CN=client-${i},O=Example,C=DE\tk${i % 7}\n`;
    lines.push(line);
    length += line.length;
  }
  lines.push(`# ${"x".repeat(size - length - 3)}\n`);
  return lines.join("");
}

/**
 * A policy of `grants` first, then made-up grants (`CN=client-N,O=Example,C=DE`, label `label`)
 * up to `count` grants in all, as bytes built without a string per line, so a million grants take
 * a fraction of a second. Also returns the subject of the last grant.
 *
 * @example
 * ```ts
 * const { bytes, lastSubject } = policyOfGrants(1_000_000, "k-ed", ["CN=alice\tk-ed"]);
 * ```
 */
export function policyOfGrants(
  count: number,
  label: string,
  grants: string[] = [],
): { bytes: Uint8Array; lastSubject: string } {
  const head = grants.map((g) => g + "\n").join("");
  const madeUp = count - grants.length;
  const bytes = new Uint8Array(head.length * 3 + madeUp * (40 + label.length));
  let at = new TextEncoder().encodeInto(head, bytes).written;
  const put = (s: string) => {
    for (let i = 0; i < s.length; i++) bytes[at++] = s.charCodeAt(i);
  };
  for (let i = 0; i < madeUp; i++) {
    put("CN=client-");
    put(String(i));
    put(",O=Example,C=DE\t");
    put(label);
    bytes[at++] = 0x0a;
  }
  return { bytes: bytes.subarray(0, at), lastSubject: `CN=client-${madeUp - 1},O=Example,C=DE` };
}
