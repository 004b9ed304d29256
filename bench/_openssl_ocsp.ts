/**
 * `openssl ocsp` as a responder, the anchor the OCSP benches compare svcd with: over `index` (an
 * index.txt), signing with the CA of `dir` (ca.pem, ca.key), on 127.0.0.1:`port`. Its stderr is
 * piped: the caller reads it (the responder logs there, and says there when it is ready).
 *
 * @example
 * ```ts
 * import { spawnOpensslResponder } from "./_openssl_ocsp.ts";
 * const proc = spawnOpensslResponder("/tmp/ca", "/tmp/ca/index.txt", 8888);
 * proc.kill();
 * ```
 */
export function spawnOpensslResponder(dir: string, index: string, port: number): Deno.ChildProcess {
  return new Deno.Command("openssl", {
    args: [
      ...["ocsp", "-index", index, "-CA", `${dir}/ca.pem`],
      ...["-rsigner", `${dir}/ca.pem`, "-rkey", `${dir}/ca.key`],
      ...["-port", String(port), "-nmin", "60"],
    ],
    stdout: "null",
    stderr: "piped",
  }).spawn();
}
