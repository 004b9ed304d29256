/**
 * The public listener's start-up refusals (SoftHSM2): each stops `svcd serve` with exit 1 before
 * the socket exists, and the message names the option and what to do.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "./support/temp_dir.ts";
import { makeTestToken } from "./support/token.ts";
import { startDaemon } from "./support/daemon.ts";
import { makeTestCa } from "./support/ca.ts";

Deno.test({
  name: "public listener: an unusable key, certificate or socket stops the start with exit 1",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const token = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    try {
      const ca = await makeTestCa(token, { keyLabel: "ca", keyType: "ec-p256" });
      const other = await makeTestCa(token, {
        keyLabel: "other-ca",
        keyType: "ec-p256",
        subject: "CN=Other CA",
      });
      const refused = async (name: string, args: (work: string) => string[], message: RegExp) => {
        await t.step(name, async () => {
          const work = moduleTempDir("svcd-public-refused-");
          try {
            const base = {
              "--public-socket": `${work}/public.sock`,
              "--revocation-db": `${ca.dir}/index.txt`,
              "--ocsp-label": "ca",
              "--ca-cert": ca.caPem,
            };
            const extra = args(work);
            const merged = { ...base, ...Object.fromEntries(pairs(extra)) };
            await assert.rejects(
              startDaemon({
                token,
                workDir: work,
                policy: "",
                args: Object.entries(merged).flat(),
              }),
              (e: Error) => message.test(e.message) || assert.fail(e.message),
            );
            assert.throws(() => Deno.lstatSync(`${work}/public.sock`), Deno.errors.NotFound);
          } finally {
            await Deno.remove(work, { recursive: true });
          }
        });
      };
      await refused(
        "--ocsp-label naming no key",
        () => ["--ocsp-label", "nosuch"],
        /--ocsp-label 'nosuch': no such key on the token/,
      );
      await refused(
        "--ocsp-label naming a key that is not the certificate's",
        () => ["--ocsp-label", "k-ec"],
        /--ocsp-label 'k-ec' is not the key of the certificate in --ca-cert/,
      );
      await refused(
        "--ocsp-cert issued by another CA",
        () => ["--ocsp-cert", other.caPem],
        /--ocsp-cert .* was not issued by the CA in --ca-cert/,
      );
      await refused(
        "--ca-cert that is missing",
        (work) => ["--ca-cert", `${work}/none.pem`],
        /--ca-cert .*none\.pem cannot be read/,
      );
      await refused(
        "--public-socket the same as --socket",
        (work) => ["--public-socket", `${work}/auth.sock`],
        /--public-socket must differ from --socket/,
      );
    } finally {
      await token.cleanup();
    }
  },
});

function pairs(args: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < args.length; i += 2) out.push([args[i], args[i + 1]]);
  return out;
}
