/**
 * Login discipline: the PIN comes only from $CREDENTIALS_DIRECTORY/svc-pin; a missing credential
 * stops before any C_Login; a wrong PIN costs exactly one C_Login and is never retried; the PIN
 * buffer is zero once C_Login has returned.
 */
import assert from "node:assert/strict";
import { runTokenCommand } from "../token_admin/mod.ts";
import { CredentialError, Pkcs11Error, Token } from "./mod.ts";
import { callCount } from "../../tests/support/pkcs11_calls.ts";
import {
  makeTestToken,
  openTestToken,
  runTokenCli,
  type TestToken,
  testTokenPin,
} from "../../tests/support/token.ts";

const logins = (made: TestToken) => callCount(made.modulePath, "C_Login");

/** Runs the CLI in this process (so C_Login calls can be counted) and captures what it prints. */
async function cliInProcess(args: string[], env: Record<string, string | undefined>) {
  const saved = { error: console.error, log: console.log };
  const previous = Object.fromEntries(Object.keys(env).map((k) => [k, Deno.env.get(k)]));
  let out = "";
  console.error = console.log = (...a: unknown[]) => void (out += a.join(" ") + "\n");
  for (const [k, v] of Object.entries(env)) {
    v === undefined ? Deno.env.delete(k) : Deno.env.set(k, v);
  }
  try {
    return { code: await runTokenCommand(args), out };
  } finally {
    Object.assign(console, saved);
    for (const [k, v] of Object.entries(previous)) {
      v === undefined ? Deno.env.delete(k) : Deno.env.set(k, v);
    }
  }
}

function common(made: TestToken) {
  return ["--module", made.modulePath, "--token", made.tokenLabel];
}

Deno.test({
  name:
    "login: a missing credential ends the command before any C_Login, naming the file and the cause",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken({ keys: { "k-ec": "ec-p256" } });
    try {
      for (
        const env of [{ CREDENTIALS_DIRECTORY: undefined }, {
          CREDENTIALS_DIRECTORY: `${made.dir}/nowhere`,
        }]
      ) {
        for (const cmd of ["selftest", "list", "keygen"]) {
          const before = logins(made);
          const extra = cmd === "keygen" ? ["--key-label", "x", "--key-type", "ec-p256"] : [];
          const r = await cliInProcess([cmd, ...common(made), ...extra], {
            ...made.module.env,
            ...env,
          });
          assert.notEqual(r.code, 0);
          assert.equal(logins(made) - before, 0, `${cmd}: C_Login was called`);
          assert.match(r.out, /LoadCredentialEncrypted/);
          if (env.CREDENTIALS_DIRECTORY) {
            assert.ok(r.out.includes(`${made.dir}/nowhere/svc-pin`), r.out);
          } else assert.match(r.out, /CREDENTIALS_DIRECTORY is not set/);
        }
      }
      // And as a real process: non-zero exit, message on stderr.
      const sub = await runTokenCli(["selftest", ...common(made)], {
        ...made.module.env,
        CREDENTIALS_DIRECTORY: `${made.dir}/empty`,
      });
      assert.equal(sub.code, 1);
      assert.ok(sub.stderr.includes(`${made.dir}/empty/svc-pin`), sub.stderr);
      assert.match(sub.stderr, /no login was attempted/);
      assert.throws(() => Token.readPinCredential(`${made.dir}/nowhere`), CredentialError);
    } finally {
      await made.cleanup();
    }
  },
});

Deno.test({
  name: "login: a wrong PIN costs exactly one C_Login, is reported by name and never retried",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken();
    const wrongDir = `${made.dir}/wrong`;
    await Deno.mkdir(wrongDir);
    await Deno.writeTextFile(`${wrongDir}/svc-pin`, "A".repeat(44));
    try {
      let before = logins(made);
      const r = await cliInProcess(["selftest", ...common(made)], {
        ...made.module.env,
        CREDENTIALS_DIRECTORY: wrongDir,
      });
      assert.equal(r.code, 1);
      assert.equal(logins(made) - before, 1);
      assert.match(r.out, /C_Login: CKR_PIN_INCORRECT \(0xa0\)/);
      assert.match(r.out, /not retried/);

      const token = openTestToken(made);
      try {
        before = logins(made);
        const pin = new TextEncoder().encode("wrong-pin-wrong-pin");
        const err = await token.login(pin).catch((e) => e);
        assert.ok(err instanceof Pkcs11Error);
        assert.equal(err.fn, "C_Login");
        assert.equal(err.code, "CKR_PIN_INCORRECT");
        assert.equal(err.rv, 0xa0);
        assert.ok(pin.every((b) => b === 0), "PIN buffer not zeroed after a failed C_Login");
        // The token object refuses a second attempt without touching the module.
        await assert.rejects(token.login(testTokenPin(made)), /never retries/);
        assert.equal(logins(made) - before, 1);
      } finally {
        token.close();
      }
    } finally {
      await made.cleanup();
    }
  },
});

Deno.test({
  name:
    "login: the PIN buffer is all zero after a successful C_Login (credential newline trimmed in place)",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken();
    const pinFile = `${made.credentialsDir}/svc-pin`;
    const withNewline = `${made.dir}/nl`;
    await Deno.mkdir(withNewline);
    await Deno.writeFile(
      `${withNewline}/svc-pin`,
      new Uint8Array([...await Deno.readFile(pinFile), 0x0a]),
    );
    const token = openTestToken(made);
    try {
      const pin = Token.readPinCredential(withNewline);
      assert.equal(pin.length, 44);
      const whole = new Uint8Array(pin.buffer, 0, pin.buffer.byteLength);
      await token.login(pin);
      assert.ok(whole.every((b) => b === 0), "PIN bytes left in memory after login");
      const key = await token.key("svc-audit-sign");
      assert.ok(key, "login did not unlock the private keys");
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});

Deno.test({
  name: "login: CKR_USER_ALREADY_LOGGED_IN from a second login in the same process is accepted",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken();
    const first = openTestToken(made);
    const second = openTestToken(made);
    try {
      await first.login(testTokenPin(made));
      const before = logins(made);
      await second.login(testTokenPin(made));
      assert.equal(logins(made) - before, 1);
    } finally {
      second.close();
      first.close();
      await made.cleanup();
    }
  },
});
