import assert from "node:assert/strict";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import {
  base64Bytes,
  decryptPinCredential,
  generatePin,
  isWellFormedPin,
  loadPin,
} from "./credential.ts";
import { CredentialError } from "./errors.ts";

const canEncrypt = Deno.uid() === 0 &&
  (await new Deno.Command("systemd-creds", { args: ["--version"], stdout: "null" }).output()
    .then((o) => o.success, () => false));

async function encrypt(path: string, bytes: Uint8Array, name = "svc-pin"): Promise<void> {
  const child = new Deno.Command("systemd-creds", {
    args: ["encrypt", `--name=${name}`, "-", path],
    stdin: "piped",
    stderr: "null",
  }).spawn();
  const w = child.stdin.getWriter();
  await w.write(bytes);
  await w.close();
  assert.equal((await child.status).code, 0);
}

Deno.test({
  name: "credential: an encrypted svc-pin is decrypted into bytes; a wrong one names the file",
  ignore: !canEncrypt,
  fn: async () => {
    const dir = moduleTempDir("svcd-cred-");
    try {
      const pin = new TextEncoder().encode("A".repeat(43) + "=");
      await encrypt(`${dir}/svc-pin.cred`, pin);
      const got = await loadPin({ encryptedFile: `${dir}/svc-pin.cred` });
      assert.ok(got instanceof Uint8Array);
      assert.deepEqual(got, pin);

      // A credential made for another name is refused by systemd-creds: never a login with it.
      await encrypt(`${dir}/other.cred`, pin, "other");
      const err = await decryptPinCredential(`${dir}/other.cred`).then(
        () => assert.fail("a credential of another name was accepted"),
        (e) => e as Error,
      );
      assert.ok(err instanceof CredentialError);
      assert.match(err.message, /other\.cred cannot be decrypted .*no login was attempted/);
      assert.ok(!err.message.includes("A".repeat(43)), "the message holds the PIN");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("base64Bytes matches the platform's base64 for every tail length", () => {
  for (let len = 0; len < 40; len++) {
    const bytes = crypto.getRandomValues(new Uint8Array(len));
    assert.equal(new TextDecoder().decode(base64Bytes(bytes)), bytes.toBase64());
  }
});

Deno.test("generatePin gives 44 base64 characters of 32 random bytes, different each time", () => {
  const a = generatePin();
  const b = generatePin();
  assert.equal(a.length, 44);
  assert.equal(Uint8Array.fromBase64(new TextDecoder().decode(a)).length, 32);
  assert.notDeepEqual(a, b);
});

Deno.test("isWellFormedPin: a generated PIN is; a short, long, padded-wrong or non-base64 one is not", () => {
  const pin = generatePin();
  assert.equal(isWellFormedPin(pin), true);
  assert.equal(isWellFormedPin(pin.subarray(0, 43)), false);
  assert.equal(isWellFormedPin(new Uint8Array([...pin, 0x0a])), false);
  const bad = pin.slice();
  bad[3] = 0x2d; // "-"
  assert.equal(isWellFormedPin(bad), false);
  const unpadded = pin.slice();
  unpadded[43] = 0x41;
  assert.equal(isWellFormedPin(unpadded), false);
});
