/**
 * `svcd client sign --format cms | jws` and `verify --format cms` end to end: the client with the
 * `client` task's permissions, through Debian's nginx with a client certificate, to a daemon on
 * this run's module whose keys carry certificates in the token (GET /token's `certificate` and
 * `chain`, the chain from the daemon's --ca-cert). Each container is checked by a verifier the
 * project did not write:
 * - CMS, EC P-256 and RSA-3072 (PSS and PKCS #1 v1.5): `openssl cms -verify -binary -inform DER -content FILE
 *   -CAfile ca.pem`; Ed25519: GnuTLS `certtool --p7-verify`, and openssl too where it has
 *   Ed25519 in CMS (3.0 has not);
 *   for a 1 KiB and a 1 GiB file (sparse, in /var/tmp, removed after), and refused once one byte
 *   of the file changes;
 * - JWS: the `jose` package with the key of the x5c certificate (ES256, PS256, RS256, EdDSA), attached
 *   and detached; ML-DSA-65 (svcmod) by @noble over the JWS signing input.
 * - CMS, ML-DSA-65 (svcmod): pkijs reads the SignedData, @noble/post-quantum checks the signature
 *   over the signed attributes; `svcd client verify --format cms` takes it and refuses a changed
 *   byte; the composite (svcmod) is checked over the signed attributes by tests/support/oracle.ts
 *   (@noble ML-DSA-65 and Web Crypto Ed25519 over the draft's M').
 * The keys are certified with `svcd ca certify --profile document-signing` under a CA on the same
 * token; the expired certificate comes from a test PKI (root → intermediate), stored with
 * pkcs11-tool as another application would, since `svcd ca certify` makes none.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import * as jose from "jose";
import { ml_dsa65 } from "@noble/post-quantum/ml-dsa.js";
import { curlNginx } from "../support/nginx.ts";
import { type CommandResult, runCommand } from "../support/command.ts";
import {
  type ClientStack,
  runClientThroughNginx,
  startClientStack,
} from "../support/client_nginx.ts";
import {
  certifyTokenKey,
  makeSigningPki,
  type SigningPki,
  writeSigningPkiFiles,
} from "../support/signing_pki.ts";
import { selectedModuleName } from "../support/modules.ts";
import { makeTestCa, type TestCa } from "../support/ca.ts";
import { readSignedData } from "../support/cms_pkijs.ts";
import { verifyIndependently } from "../support/oracle.ts";
import { pem } from "../../lib/der/mod.ts";

const GIB = 1 << 30;

/** SoftHSM2's keys: all certified but k-plain; k-old's certificate has expired. */
const CLASSICAL_KEYS: Record<string, string> = {
  "k-p256": "ec-p256",
  "k-rsa": "rsa-3072",
  "k-rsa15": "rsa-3072-pkcs1v15",
  "k-ed": "ed25519",
  "k-plain": "ec-p256",
  "k-old": "ec-p256",
};
const JWS_ALG: Record<string, string> = {
  "ec-p256": "ES256",
  "rsa-3072": "PS256",
  "rsa-3072-pkcs1v15": "RS256",
  ed25519: "EdDSA",
};

const canRun = Deno.uid() === 0 && await Deno.stat("/usr/sbin/nginx").then(() => true, () => false);
const MODULE = selectedModuleName();

interface ListedKey {
  label: string;
  key_type: string;
  public_key: string;
  public_key_raw: string;
  certificate?: string;
  chain?: string[];
}

interface Setup extends ClientStack {
  ca: TestCa;
  /** svcd's CA certificate: the CA file verifiers get. */
  caFile: string;
  /** The test PKI of the expired certificate. */
  signing: SigningPki;
  /** Its root, the CA file of a signature by k-old. */
  signingRoot: string;
}

/**
 * The stack, with a CA (`svcd ca init`, EC P-256) on the token; the daemon's --ca-cert holds its
 * certificate and the test PKI's chain, so GET /token states the chain of either.
 */
async function setUp(keys: Record<string, string>): Promise<Setup> {
  const signing = await makeSigningPki();
  const made: { ca?: TestCa; signingRoot?: string } = {};
  const stack = await startClientStack({
    keys,
    prefix: "svcd-containers-",
    daemonArgs: async (dir, token) => {
      const ca = made.ca = await makeTestCa(token, {
        keyLabel: "svcd-ca",
        keyType: "ec-p256",
        dir: `${dir}/ca`,
      });
      const files = await writeSigningPkiFiles(signing, dir);
      made.signingRoot = files.root;
      const all = `${dir}/ca-certificates.pem`;
      await Deno.writeTextFile(
        all,
        await Deno.readTextFile(ca.caPem) + await Deno.readTextFile(files.chain),
      );
      return ["--ca-cert", all];
    },
  });
  return {
    ...stack,
    ca: made.ca!,
    caFile: made.ca!.caPem,
    signing,
    signingRoot: made.signingRoot!,
  };
}

async function listedKeys(s: Setup): Promise<Map<string, ListedKey>> {
  const res = await curlNginx(s.nginx, s.pki, s.pki.clients[0], "/token", []);
  assert.equal(res.status, 200);
  const keys: ListedKey[] = JSON.parse(new TextDecoder().decode(res.body)).keys;
  return new Map(keys.map((k) => [k.label, k]));
}

/** `svcd ca certify --key-label LABEL --profile document-signing`, as the operator runs it. */
async function certify(s: Setup, label: string): Promise<void> {
  const r = await s.ca.run("certify", ["--key-label", label, "--profile", "document-signing"]);
  assert.equal(r.code, 0, r.text);
}

/**
 * Certifies every key but k-plain with `svcd ca certify`; k-old gets a certificate of the test
 * PKI that expired yesterday.
 */
async function certifyKeys(s: Setup, keys: Map<string, ListedKey>): Promise<void> {
  for (const key of keys.values()) {
    if (key.label === "k-plain") continue;
    if (key.label !== "k-old") {
      await certify(s, key.label);
      continue;
    }
    const spki = Uint8Array.fromBase64(key.public_key);
    await certifyTokenKey(s.signing, s.token, key.label, spki, { notAfterDays: -1 });
  }
}

function runClient(s: Setup, args: string[]): Promise<CommandResult> {
  return runClientThroughNginx(s.nginx, s.pki, args);
}

/**
 * The standard verifiers of a CMS signature by `keyType`, each a result (exit 0: valid): openssl
 * wherever it has the algorithm in CMS, and GnuTLS `certtool` for Ed25519 (OpenSSL 3.0 has no
 * Ed25519 in CMS; 3.2 and later do, so on those both must agree).
 */
async function cmsVerdicts(
  keyType: string,
  file: string,
  p7s: string,
  ca: string,
): Promise<CommandResult[]> {
  const verdicts = [];
  if (keyType === "ed25519") {
    verdicts.push(
      await runCommand("certtool", [
        ...["--p7-verify", "--inder", "--infile", p7s, "--load-data", file],
        ...["--load-ca-certificate", ca],
      ]),
    );
    if (!await opensslHasEd25519Cms()) return verdicts;
  }
  verdicts.push(
    await runCommand("openssl", [
      ...["cms", "-verify", "-binary", "-inform", "DER", "-in", p7s, "-content", file],
      ...["-CAfile", ca, "-out", "/dev/null"],
    ]),
  );
  return verdicts;
}

let ed25519Cms: Promise<boolean> | undefined;

/** Whether this openssl signs a CMS with an Ed25519 key itself (asked once, by trying). */
function opensslHasEd25519Cms(): Promise<boolean> {
  ed25519Cms ??= (async () => {
    const dir = await Deno.makeTempDir();
    try {
      const sh = `cd ${dir} && openssl genpkey -algorithm ed25519 -out k.pem && ` +
        "openssl req -new -x509 -key k.pem -subj /CN=probe -days 1 -out c.pem && echo x > f && " +
        "openssl cms -sign -binary -in f -signer c.pem -inkey k.pem -outform DER -out s.der";
      return (await runCommand("sh", ["-c", sh])).code === 0;
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  })();
  return ed25519Cms;
}

/** Every verifier accepts (`valid`) or every one refuses. */
async function assertCms(
  valid: boolean,
  what: string,
  ...args: Parameters<typeof cmsVerdicts>
): Promise<void> {
  for (const r of await cmsVerdicts(...args)) {
    if (valid) assert.equal(r.code, 0, `${what}: ${r.text}`);
    else assert.notEqual(r.code, 0, `${what}`);
  }
}

async function signCms(s: Setup, label: string, file: string, out: string): Promise<void> {
  const r = await runClient(s, [
    "sign",
    "--key-label",
    label,
    "--format",
    "cms",
    "--out",
    out,
    file,
  ]);
  assert.equal(r.code, 0, r.text);
}

/** Flips one byte of `file` at `offset` (twice restores it). */
async function flipByte(file: string, offset: number): Promise<void> {
  using f = await Deno.open(file, { read: true, write: true });
  const one = new Uint8Array(1);
  await f.seek(offset, Deno.SeekMode.Start);
  await f.read(one);
  one[0] ^= 0x01;
  await f.seek(offset, Deno.SeekMode.Start);
  await f.write(one);
}

/**
 * Signs `file` (CMS) with each key; the standard verifier accepts it, then refuses it with a byte
 * of the file flipped, and (`otherCa`) against another CA (the proxy's) instead of svcd's.
 */
async function cmsRoundTrip(
  s: Setup,
  keys: ListedKey[],
  file: string,
  otherCa?: string,
): Promise<void> {
  const size = (await Deno.stat(file)).size;
  for (const key of keys) {
    const p7s = `${s.dir}/${key.label}.p7s`;
    await signCms(s, key.label, file, p7s);
    await assertCms(true, key.label, key.key_type, file, p7s, s.caFile);
    await flipByte(file, size >> 1);
    try {
      await assertCms(
        false,
        `${key.label}: a changed file verified`,
        key.key_type,
        file,
        p7s,
        s.caFile,
      );
    } finally {
      await flipByte(file, size >> 1);
    }
    if (otherCa) {
      await assertCms(
        false,
        `${key.label}: verified against another CA`,
        key.key_type,
        file,
        p7s,
        otherCa,
      );
    }
    await Deno.remove(p7s);
  }
}

Deno.test({
  name:
    "svcd client --format cms and jws through nginx: EC, RSA-PSS, RSA PKCS #1 v1.5, Ed25519 (SoftHSM2)",
  ignore: !canRun || MODULE !== "softhsm",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    let s: Setup | undefined;
    const big = `/var/tmp/svcd-cms-${Deno.pid}.bin`;
    try {
      s = await setUp(CLASSICAL_KEYS);
      const setup = s;
      await certifyKeys(setup, await listedKeys(setup));
      const keys = await listedKeys(setup);
      assert.deepEqual([...keys.keys()].sort(), Object.keys(CLASSICAL_KEYS).sort());
      for (const key of keys.values()) {
        if (key.label === "k-plain") {
          assert.equal(key.certificate, undefined);
          continue;
        }
        assert.ok(key.certificate, `${key.label}: no certificate on GET /token`);
        const chain = key.label === "k-old" ? 2 : 1; // the test PKI's intermediate and root
        assert.equal(key.chain?.length, chain, `${key.label}: its chain`);
      }
      const classical = [...keys.values()].filter((k) =>
        k.key_type in JWS_ALG && k.certificate && k.label !== "k-old"
      );
      const small = `${setup.dir}/small`;
      await Deno.writeFile(small, crypto.getRandomValues(new Uint8Array(1024)));

      await t.step(
        "CMS, 1 KiB: accepted by openssl / certtool, refused with a byte changed or another CA",
        () => cmsRoundTrip(setup, classical, small, setup.pki.caCert),
      );

      await t.step(
        "CMS, 1 GiB (sparse, /var/tmp): accepted, refused with a byte changed",
        async () => {
          using f = await Deno.open(big, { write: true, create: true, truncate: true });
          await f.write(crypto.getRandomValues(new Uint8Array(4096)));
          await f.truncate(GIB);
          await cmsRoundTrip(setup, classical, big);
        },
      );

      await t.step("verify --format cms: 0, 1 for a changed file, 1 for another CA", async () => {
        const key = classical[0];
        const p7s = `${setup.dir}/v.p7s`;
        await signCms(setup, key.label, small, p7s);
        const verify = (file: string, ca: string) =>
          runClient(setup, ["verify", "--format", "cms", "--signer-ca-cert", ca, file, p7s]);
        assert.equal((await verify(small, setup.caFile)).code, 0);
        const other = `${setup.dir}/other`;
        await Deno.writeFile(other, new Uint8Array(1024));
        const changed = await verify(other, setup.caFile);
        assert.equal(changed.code, 1, changed.text);
        assert.match(changed.stdout, /Verification failure/);
        const wrongCa = await verify(small, `${setup.dir}/rogue-ca.pem`);
        assert.equal(wrongCa.code, 1, wrongCa.text);
      });

      await t.step("JWS: jose verifies ES256, PS256, RS256, EdDSA with the x5c key", async () => {
        const payload = await Deno.readFile(small);
        for (const key of classical) {
          for (const detached of [false, true]) {
            const out = `${setup.dir}/${key.label}.${detached}.jws`;
            const r = await runClient(setup, [
              ...["sign", "--key-label", key.label, "--format", "jws", "--out", out],
              ...(detached ? ["--detached"] : []),
              small,
            ]);
            assert.equal(r.code, 0, r.text);
            const jws = await Deno.readTextFile(out);
            const [h, p, sig] = jws.split(".");
            assert.equal(p === "", detached);
            const header = jose.decodeProtectedHeader(jws);
            assert.equal(header.alg, JWS_ALG[key.key_type]);
            assert.deepEqual(header.x5c, [key.certificate, ...key.chain!]);
            const publicKey = await jose.importX509(
              pem("CERTIFICATE", Uint8Array.fromBase64(header.x5c![0])),
              header.alg!,
            );
            const b64 = payload.toBase64({ alphabet: "base64url", omitPadding: true });
            const verified = await jose.compactVerify(`${h}.${b64}.${sig}`, publicKey);
            assert.deepEqual(verified.payload, payload);
          }
        }
      });

      await t.step("a key without a certificate: CMS refused, naming svcd ca certify", async () => {
        const r = await runClient(setup, [
          ...["sign", "--key-label", "k-plain", "--format", "cms", "--out", `${setup.dir}/p.p7s`],
          small,
        ]);
        assert.equal(r.code, 1);
        assert.match(r.stderr, /svcd ca certify --key-label k-plain --profile /);
        await assert.rejects(Deno.stat(`${setup.dir}/p.p7s`));
      });

      await t.step("an expired certificate: a warning on stderr, the signature made", async () => {
        const p7s = `${setup.dir}/old.p7s`;
        const r = await runClient(setup, [
          ...["sign", "--key-label", "k-old", "--format", "cms", "--out", p7s, small],
        ]);
        assert.equal(r.code, 0, r.text);
        assert.match(r.stderr, /warning: the certificate of 'k-old' expired on /);
        // openssl refuses it for the certificate's time alone: without the time check it verifies.
        await assertCms(false, "an expired signer", "ec-p256", small, p7s, setup.signingRoot);
        const timeless = await runCommand("openssl", [
          ...["cms", "-verify", "-no_check_time", "-binary", "-inform", "DER", "-in", p7s],
          ...["-content", small, "-CAfile", setup.signingRoot, "-out", "/dev/null"],
        ]);
        assert.equal(timeless.code, 0, timeless.text);
      });
    } finally {
      await Deno.remove(big).catch(() => {});
      await s?.stop();
    }
  },
});

Deno.test({
  name: "svcd client --format cms and jws through nginx: ML-DSA-65 and composite (svcmod)",
  ignore: !canRun || MODULE !== "svcmod",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    let s: Setup | undefined;
    try {
      s = await setUp({ "k-mldsa65": "ml-dsa-65", "k-comp": "composite-mldsa65-ed25519" });
      const setup = s;
      const key = (await listedKeys(setup)).get("k-mldsa65")!;
      const file = `${setup.dir}/small`;
      await Deno.writeFile(file, crypto.getRandomValues(new Uint8Array(1024)));

      await t.step("JWS ML-DSA-65 (kid): @noble verifies the signing input", async () => {
        const out = `${setup.dir}/pq.jws`;
        const r = await runClient(setup, [
          ...["sign", "--key-label", "k-mldsa65", "--format", "jws", "--out", out, file],
        ]);
        assert.equal(r.code, 0, r.text);
        const [h, p, sig] = (await Deno.readTextFile(out)).split(".");
        const header = JSON.parse(
          new TextDecoder().decode(Uint8Array.fromBase64(h, { alphabet: "base64url" })),
        );
        assert.deepEqual(header, { alg: "ML-DSA-65", kid: "k-mldsa65" });
        assert.deepEqual(
          Uint8Array.fromBase64(p, { alphabet: "base64url" }),
          await Deno.readFile(file),
        );
        const input = new TextEncoder().encode(`${h}.${p}`);
        const signature = Uint8Array.fromBase64(sig, { alphabet: "base64url" });
        const pk = Uint8Array.fromBase64(key.public_key_raw);
        assert.ok(ml_dsa65.verify(signature, input, pk), "@noble ML-DSA-65 over the input");
        input[input.length - 1] ^= 1;
        assert.ok(!ml_dsa65.verify(signature, input, pk));
      });

      await t.step(
        "CMS ML-DSA-65: pkijs reads it, @noble verifies the signed attributes",
        async () => {
          await certify(setup, "k-mldsa65");
          const p7s = `${setup.dir}/pq.p7s`;
          await signCms(setup, "k-mldsa65", file, p7s);
          const read = readSignedData(await Deno.readFile(p7s));
          assert.equal(read.signedData.encapContentInfo.eContent, undefined, "detached");
          const certified = (await listedKeys(setup)).get("k-mldsa65")!;
          const carried = read.signedData.certificates!.map((c) =>
            new Uint8Array((c as { toSchema(): { toBER(): ArrayBuffer } }).toSchema().toBER())
              .toBase64()
          );
          assert.deepEqual(carried, [certified.certificate, ...certified.chain!]);
          assert.equal(read.signerInfo.digestAlgorithm.algorithmId, "2.16.840.1.101.3.4.2.3");
          assert.equal(read.signerInfo.signatureAlgorithm.algorithmId, "2.16.840.1.101.3.4.3.18");
          const md = read.attributes.get("1.2.840.113549.1.9.4") as {
            valueBlock: { valueHexView: Uint8Array };
          };
          assert.deepEqual(
            new Uint8Array(md.valueBlock.valueHexView),
            new Uint8Array(createHash("sha512").update(await Deno.readFile(file)).digest()),
          );
          const pk = Uint8Array.fromBase64(key.public_key_raw);
          assert.ok(ml_dsa65.verify(read.signature, read.signedAttributes, pk), "@noble ML-DSA-65");
          const verify = () =>
            runClient(setup, [
              ...["verify", "--format", "cms", "--signer-ca-cert", setup.caFile, file, p7s],
            ]);
          const ok = await verify();
          assert.equal(ok.code, 0, ok.text);
          await flipByte(file, 512);
          const bad = await verify();
          assert.equal(bad.code, 1, bad.text);
          await flipByte(file, 512);
        },
      );

      await t.step(
        "CMS composite: the draft's OID; the independent check over the attributes",
        async () => {
          await certify(setup, "k-comp");
          const p7s = `${setup.dir}/comp.p7s`;
          await signCms(setup, "k-comp", file, p7s);
          const read = readSignedData(await Deno.readFile(p7s));
          assert.equal(read.signerInfo.signatureAlgorithm.algorithmId, "1.3.6.1.5.5.7.6.48");
          assert.equal(read.signerInfo.digestAlgorithm.algorithmId, "2.16.840.1.101.3.4.2.3");
          const raw = Uint8Array.fromBase64(
            (await listedKeys(setup)).get("k-comp")!.public_key_raw,
          );
          const composite = "composite-mldsa65-ed25519";
          assert.ok(
            await verifyIndependently(composite, { raw }, read.signedAttributes, read.signature),
          );
          const ok = await runClient(setup, [
            ...["verify", "--format", "cms", "--signer-ca-cert", setup.caFile, file, p7s],
          ]);
          assert.equal(ok.code, 0, ok.text);
        },
      );
    } finally {
      await s?.stop();
    }
  },
});
