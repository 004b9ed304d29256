/**
 * `svcd token …` as an operator runs it (subprocesses): init, keygen, list, selftest, pubkey.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { createPublicKey } from "node:crypto";
import { KEY_TYPE_NAMES } from "../token/mod.ts";
import { CKA } from "../../ffi/pkcs11/mod.ts";
import { type KeyObjectClass, readBooleanAttributes } from "../../tests/support/key_attributes.ts";
import { TokenAdmin } from "./admin.ts";
import { callCount } from "../../tests/support/pkcs11_calls.ts";
import { testModule } from "../../tests/support/modules.ts";
import { decryptCredential, runCommand, withTempUser } from "../../tests/support/command.ts";
import {
  makeTestToken,
  openTestToken,
  runTokenCli,
  type TestToken,
  testTokenPin,
} from "../../tests/support/token.ts";

const CLASSICAL = {
  "k-p256": "ec-p256",
  "k-p384": "ec-p384",
  "k-ed": "ed25519",
  "k-rsa": "rsa-3072",
};

function common(t: TestToken) {
  return ["--module", t.modulePath, "--token", t.tokenLabel];
}

async function pkcs11ToolObjects(t: TestToken): Promise<string> {
  const pin = new TextDecoder().decode(testTokenPin(t));
  const out = await new Deno.Command("pkcs11-tool", {
    args: ["--module", t.modulePath, "--token-label", t.tokenLabel, "--login", "--pin", pin, "-O"],
    env: t.module.env,
    stderr: "null",
  }).output();
  return new TextDecoder().decode(out.stdout);
}

/**
 * What `svcd token` states for each object it makes, including what modules would otherwise
 * default differently (SoftHSM sets CKA_SIGN_RECOVER unless told), and what follows from it
 * (always sensitive, never extractable).
 */
const SIGNING_PRIVATE_KEY = {
  [CKA.SIGN]: true,
  [CKA.SIGN_RECOVER]: false,
  [CKA.DECRYPT]: false,
  [CKA.UNWRAP]: false,
  [CKA.DERIVE]: false,
  [CKA.SENSITIVE]: true,
  [CKA.ALWAYS_SENSITIVE]: true,
  [CKA.EXTRACTABLE]: false,
  [CKA.NEVER_EXTRACTABLE]: true,
  [CKA.ALWAYS_AUTHENTICATE]: false,
  [CKA.WRAP_WITH_TRUSTED]: false,
  [CKA.COPYABLE]: true,
  [CKA.MODIFIABLE]: true,
  [CKA.DESTROYABLE]: true,
  [CKA.TOKEN]: true,
  [CKA.PRIVATE]: true,
};
const SIGNING_PUBLIC_KEY = {
  [CKA.VERIFY]: true,
  [CKA.VERIFY_RECOVER]: false,
  [CKA.ENCRYPT]: false,
  [CKA.WRAP]: false,
  [CKA.DERIVE]: false,
  [CKA.COPYABLE]: true,
  [CKA.MODIFIABLE]: true,
  [CKA.DESTROYABLE]: true,
  [CKA.TOKEN]: true,
  [CKA.PRIVATE]: false,
};
const MAC_SECRET = {
  [CKA.SIGN]: true,
  [CKA.VERIFY]: true,
  [CKA.ENCRYPT]: false,
  [CKA.DECRYPT]: false,
  [CKA.WRAP]: false,
  [CKA.UNWRAP]: false,
  [CKA.DERIVE]: false,
  [CKA.SENSITIVE]: true,
  [CKA.ALWAYS_SENSITIVE]: true,
  [CKA.EXTRACTABLE]: false,
  [CKA.NEVER_EXTRACTABLE]: true,
  [CKA.WRAP_WITH_TRUSTED]: false,
  [CKA.COPYABLE]: true,
  [CKA.TOKEN]: true,
  [CKA.PRIVATE]: true,
};

async function assertBooleans(
  t: TestToken,
  label: string,
  cls: KeyObjectClass,
  expected: Record<number, boolean>,
): Promise<void> {
  const types = Object.keys(expected).map(Number);
  const read = await readBooleanAttributes(t, label, cls, types);
  for (const type of types) {
    assert.equal(
      read.get(type),
      expected[type],
      `${cls} ${label}: attribute 0x${type.toString(16)}`,
    );
  }
}

/** pkcs11-tool's object listing, split into objects keyed by "kind label". */
function objects(listing: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const block of listing.split(/^(?=\S.*Object;)/m)) {
    const label = block.match(/^\s+label:\s+(.*)$/m)?.[1];
    if (label) map.set(`${block.split(" Object;")[0]} ${label}`, block);
  }
  return map;
}

Deno.test({
  name:
    "cli: init writes a 44-character base64 PIN credential (0400), prints no PIN, creates the audit keys",
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken();
    try {
      const cred = `${t.credentialsDir}/svc-pin`;
      const pin = await Deno.readFile(cred);
      assert.equal(pin.length, 44);
      assert.equal(Uint8Array.fromBase64(new TextDecoder().decode(pin)).length, 32);
      assert.equal((await Deno.stat(cred)).mode! & 0o777, 0o400);

      // Re-running init for the same label refuses, leaves the token and removes its unused credential.
      const again = await runTokenCli(
        ["init", ...common(t), "--plain-credential-dir", `${t.dir}/second`],
        t.module.env,
      );
      assert.equal(again.code, 1);
      assert.match(again.stderr, /already initialised/);
      await assert.rejects(Deno.stat(`${t.dir}/second/svc-pin`), Deno.errors.NotFound);
      assert.ok(!again.stdout.includes(new TextDecoder().decode(pin)));

      // pkcs11-tool, another application, sees both; what they may do is read through PKCS#11.
      const listing = objects(await pkcs11ToolObjects(t));
      assert.ok(listing.has("Secret Key svc-audit"), [...listing.keys()].join(", "));
      assert.ok(listing.has("Private Key svc-audit-sign"), [...listing.keys()].join(", "));
      await assertBooleans(t, "svc-audit", "secret", MAC_SECRET);
      await assertBooleans(t, "svc-audit-sign", "private", SIGNING_PRIVATE_KEY);
      await assertBooleans(t, "svc-audit-sign", "public", SIGNING_PUBLIC_KEY);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name: "cli: init output never contains either PIN; --credential-out encrypts with systemd-creds",
  sanitizeResources: false,
  ignore: Deno.uid() !== 0,
  fn: async () => {
    const dir = moduleTempDir("svcd-init-");
    try {
      const mod = await testModule(dir);
      const credFile = `${dir}/svc-pin.cred`;
      const init = await runTokenCli([
        "init",
        "--module",
        mod.path,
        "--token",
        "enc",
        "--credential-out",
        credFile,
      ], mod.env);
      assert.equal(init.code, 0, init.stderr);
      assert.match(init.stdout, /not shown/);
      const dec = await new Deno.Command("systemd-creds", {
        args: ["decrypt", "--name=svc-pin", credFile, "-"],
        stderr: "null",
      }).output();
      assert.equal(dec.code, 0);
      const pin = new TextDecoder().decode(dec.stdout);
      assert.equal(pin.length, 44);
      const file = new TextDecoder("latin1").decode(await Deno.readFile(credFile));
      assert.ok(!file.includes(pin), "the credential file holds the PIN in clear");
      assert.ok(!init.stdout.includes(pin) && !init.stderr.includes(pin), "init printed the PIN");
      // The decrypted PIN is the token's user PIN.
      await Deno.mkdir(`${dir}/creds`);
      await Deno.writeFile(`${dir}/creds/svc-pin`, dec.stdout);
      const list = await runTokenCli(["list", "--module", mod.path, "--token", "enc"], {
        ...mod.env,
        CREDENTIALS_DIRECTORY: `${dir}/creds`,
      });
      assert.equal(list.code, 0, list.stderr);
      assert.match(list.stdout, /^svc-audit-sign\ted25519\tCKM_EDDSA\tsha256:[0-9a-f]{64}$/m);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "cli: as root with --user, the token's files are that user's; --credential decrypts in memory; rotate-pin replaces the PIN",
  sanitizeResources: false,
  ignore: Deno.uid() !== 0,
  fn: () =>
    withTempUser("svcd-t", "svcd-runas-", async ({ name: user, uid }, dir) => {
      const mod = await testModule(dir);
      assert.equal((await runCommand("chown", ["-R", user, dir])).code, 0);
      await Deno.chmod(dir, 0o755);
      const cred = `${dir}/svc-pin.cred`;
      const as = ["--module", mod.path, "--token", "ru", "--user", user];
      const init = await runTokenCli(
        ["init", ...as, "--token", "ru", "--credential-out", cred],
        mod.env,
      );
      assert.equal(init.code, 0, init.text);
      const credInfo = await Deno.stat(cred);
      assert.equal(credInfo.mode! & 0o777, 0o600, "the encrypted credential is 0600");
      assert.equal(credInfo.uid, 0);
      for await (const e of Deno.readDir(mod.tokenDir!)) {
        assert.equal((await Deno.stat(`${mod.tokenDir}/${e.name}`)).uid, uid, "token folder owner");
      }

      const gen = await runTokenCli(
        ["keygen", ...as, "--credential", cred, "--key-label", "k", "--key-type", "ed25519"],
        mod.env,
      );
      assert.equal(gen.code, 0, gen.text);
      const listed = await runTokenCli(["list", ...as, "--credential", cred], mod.env);
      assert.equal(listed.code, 0, listed.text);
      assert.match(listed.stdout, /^k\ted25519\tCKM_EDDSA/m);
      const oldPin = await decryptCredential(cred);
      for (const out of [init.text, gen.text, listed.text]) {
        assert.ok(!out.includes(oldPin), "a command printed the PIN");
      }

      await Deno.copyFile(cred, `${dir}/old.cred`);
      const rotated = await runTokenCli(["rotate-pin", ...as, "--credential", cred], mod.env);
      assert.equal(rotated.code, 0, rotated.text);
      await Deno.stat(`${cred}.new`).then(
        () => assert.fail("the staged credential is left"),
        () => {},
      );
      assert.equal((await Deno.stat(cred)).mode! & 0o777, 0o600);
      const newList = await runTokenCli(["list", ...as, "--credential", cred], mod.env);
      assert.equal(newList.code, 0, newList.text);
      const withOld = await runTokenCli(
        ["list", ...as, "--credential", `${dir}/old.cred`],
        mod.env,
      );
      assert.notEqual(withOld.code, 0);
      assert.match(withOld.text, /CKR_PIN_INCORRECT/);
    }),
});

Deno.test({
  name: "cli: keygen, list, pubkey and selftest over the classical key types",
  sanitizeResources: false,
  fn: async () => {
    const t = await makeTestToken({ keys: CLASSICAL });
    try {
      const env = t.env;
      const list = await runTokenCli(["list", ...common(t)], env);
      assert.equal(list.code, 0, list.stderr);
      const lines = list.stdout.trim().split("\n").map((l) => l.split("\t"));
      const byLabel = new Map(lines.map((l) => [l[0], l]));
      for (const [label, type] of Object.entries({ ...CLASSICAL, "svc-audit-sign": "ed25519" })) {
        if (!t.keys.includes(label) && label !== "svc-audit-sign") continue;
        const row = byLabel.get(label);
        assert.ok(row, `list lacks ${label}`);
        assert.equal(row[1], type);
        assert.match(row[3], /^sha256:[0-9a-f]{64}$/);
      }
      if (t.keys.includes("k-rsa")) {
        assert.equal(byLabel.get("k-rsa")?.[2], "CKM_SHA256_RSA_PKCS_PSS");
      }
      assert.equal(byLabel.get("k-ed")?.[2], "CKM_EDDSA");

      // Every key pair: sign only, sensitive, never extractable, as stated at generation.
      const listing = objects(await pkcs11ToolObjects(t));
      for (const label of t.keys) {
        assert.ok(listing.has(`Private Key ${label}`), label);
        await assertBooleans(t, label, "private", SIGNING_PRIVATE_KEY);
        await assertBooleans(t, label, "public", SIGNING_PUBLIC_KEY);
      }

      // pubkey: a PEM SPKI that node:crypto parses into the same key the token holds.
      const token = openTestToken(t);
      try {
        for (
          const label of ["k-p256", "k-rsa", "svc-audit-sign"].filter((l) =>
            l.startsWith("svc") || t.keys.includes(l)
          )
        ) {
          const out = await runTokenCli(["pubkey", ...common(t), "--key-label", label], env);
          assert.equal(out.code, 0, out.stderr);
          const spki = createPublicKey(out.stdout).export({ type: "spki", format: "der" });
          const expected = (await token.publicKey(label))!.publicKeySpki!;
          assert.deepEqual(new Uint8Array(spki), expected);
        }
        const file = `${t.dir}/audit.pem`;
        assert.equal(
          (await runTokenCli(
            ["pubkey", ...common(t), "--key-label", "svc-audit-sign", "--out", file],
            env,
          )).code,
          0,
        );
        assert.match(await Deno.readTextFile(file), /^-----BEGIN PUBLIC KEY-----\n/);
        assert.equal(
          (await runTokenCli(["pubkey", ...common(t), "--key-label", "nope"], env)).code,
          1,
        );
      } finally {
        token.close();
      }

      const st = await runTokenCli(["selftest", ...common(t)], env);
      assert.equal(st.code, 0, st.stdout + st.stderr);
      const results = st.stdout.trim().split("\n");
      assert.equal(results.length, t.keys.length + 2); // + svc-audit-sign + svc-audit
      for (const line of results) assert.match(line, /^ok\t/);
      if (t.keys.includes("k-rsa")) {
        assert.match(st.stdout, /^ok\tk-rsa\trsa-3072\t.*WebCrypto RSA-PSS verify ok/m);
      }

      // Duplicate label and unknown type: refused clearly.
      const dup = await runTokenCli([
        "keygen",
        ...common(t),
        "--key-label",
        "k-ed",
        "--key-type",
        "ed25519",
      ], env);
      assert.equal(dup.code, 1);
      assert.match(dup.stderr, /already exists/);
      const bad = await runTokenCli(
        ["keygen", ...common(t), "--key-label", "x", "--key-type", "dsa-1024"],
        env,
      );
      assert.equal(bad.code, 2);
      assert.match(bad.stderr, /unknown key type 'dsa-1024'/);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name: "cli: selftest exits non-zero and names a key it cannot use",
  sanitizeResources: false,
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  fn: async () => {
    const t = await makeTestToken({ keys: { "k-ed": "ed25519" } });
    try {
      // An RSA-2048 key made by another tool: svcd signs with rsa-3072 only.
      const pin = new TextDecoder().decode(testTokenPin(t));
      const gen = await new Deno.Command("pkcs11-tool", {
        args: [
          "--module",
          t.modulePath,
          "--token-label",
          t.tokenLabel,
          "--login",
          "--pin",
          pin,
          "--keypairgen",
          "--key-type",
          "rsa:2048",
          "--label",
          "odd",
        ],
        env: t.module.env,
        stdout: "null",
        stderr: "null",
      }).output();
      assert.equal(gen.code, 0);
      const st = await runTokenCli(["selftest", ...common(t)], t.env);
      assert.equal(st.code, 1);
      assert.match(st.stdout, /^FAIL\todd\t.*2048 bits, which svcd does not sign with/m);
      assert.match(st.stdout, /^ok\tk-ed\t/m);
    } finally {
      await t.cleanup();
    }
  },
});

Deno.test({
  name:
    "cli/token: a key type the module does not offer is reported, and C_GenerateKeyPair is not attempted",
  sanitizeResources: false,
  fn: async (ctx) => {
    const t = await makeTestToken();
    const token = openTestToken(t);
    try {
      await token.login(testTokenPin(t));
      const missing = KEY_TYPE_NAMES.filter((k) => !token.offeredKeyTypes().includes(k));
      if (missing.length === 0) {
        console.log(`${t.module.name} offers every key type; nothing to refuse`);
        return;
      }
      for (const type of missing) {
        await ctx.step(type, async () => {
          const before = callCount(t.modulePath, "C_GenerateKeyPair");
          await assert.rejects(
            new TokenAdmin(token).generateKeyPair(`x-${type}`, type),
            /does not offer CKM_\w+ (\(C_GetMechanismInfo: CKR_MECHANISM_INVALID\)|for \d+-bit keys)/,
          );
          assert.equal(callCount(t.modulePath, "C_GenerateKeyPair"), before);
        });
      }
      const cli = await runTokenCli(
        ["keygen", ...common(t), "--key-label", "x", "--key-type", missing[0]],
        t.env,
      );
      assert.equal(cli.code, 3);
      assert.match(cli.stderr, new RegExp(`not offered: ${missing[0]}: the module does not offer`));
    } finally {
      token.close();
      await t.cleanup();
    }
  },
});
