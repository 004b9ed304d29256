/**
 * Python cryptography (Debian python3-cryptography) as an independent, strict OCSP request
 * parser: one `python3` process reads a batch of requests and says which it accepts. A request
 * with several single requests raises NotImplementedError only after the whole structure parsed,
 * so that counts as accepted; ValueError (the parse failed) is refused.
 *
 * @example
 * ```ts
 * declare const der: Uint8Array;
 * pycaAcceptsOcspRequests([der]); // [true]
 * ```
 */

const SCRIPT = `
import sys
from cryptography.x509 import ocsp
for line in open(sys.argv[1]):
    try:
        ocsp.load_der_ocsp_request(bytes.fromhex(line.strip()))
        print("ok")
    except NotImplementedError:
        print("ok")
    except ValueError as e:
        print("refused " + str(e).replace("\\n", " "))
`;

/**
 * For each DER OCSPRequest: "ok", or "refused" and Python's reason. Synchronous (one process for
 * the whole batch) so the fuzz oracle can call it after a run.
 *
 * @example
 * ```ts
 * pycaOcspRequestVerdicts([Uint8Array.of(0x30, 0x00)]); // ["refused error parsing asn1 value: …"]
 * ```
 */
export function pycaOcspRequestVerdicts(ders: readonly Uint8Array[]): string[] {
  if (ders.length === 0) return [];
  const file = Deno.makeTempFileSync({ prefix: "pyca-ocsp-", suffix: ".hex" });
  try {
    Deno.writeTextFileSync(file, ders.map((d) => d.toHex()).join("\n") + "\n");
    const out = new Deno.Command("/usr/bin/python3", { args: ["-c", SCRIPT, file] }).outputSync();
    const text = new TextDecoder().decode(out.stdout);
    const lines = text.split("\n").slice(0, -1);
    if (!out.success || lines.length !== ders.length) {
      throw new Error(`python3 cryptography failed: ${new TextDecoder().decode(out.stderr)}`);
    }
    return lines;
  } finally {
    Deno.removeSync(file);
  }
}

/**
 * Whether Python cryptography accepts each request. Example: `pycaAcceptsOcspRequests([der])`.
 *
 * @example
 * ```ts
 * declare const der: Uint8Array;
 * pycaAcceptsOcspRequests([der]); // [true]
 * ```
 */
export function pycaAcceptsOcspRequests(ders: readonly Uint8Array[]): boolean[] {
  return pycaOcspRequestVerdicts(ders).map((v) => v === "ok");
}
