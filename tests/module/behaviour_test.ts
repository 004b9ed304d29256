/**
 * The behaviours of the hardware module svcmod stands in for, each seen from outside: the function
 * table, per-process login state and CKR_USER_ALREADY_LOGGED_IN, PBKDF2 with 200 000 iterations,
 * lockout after five failures across processes, the session cap and the secure heap, and a second
 * concurrent call on one session handle. Processes are real: each scenario runs in its own Deno
 * process (tests/module/scenario.ts). The C-level tests (fork rule, PBKDF2 counted at every login,
 * a concurrent call held by a gate) run as build/p11_test.
 */
import assert from "node:assert/strict";
import { moduleTempDir } from "../support/temp_dir.ts";
import { CKF_TOKEN, CKR, decodeTokenInfo, loadModule } from "../../ffi/pkcs11/mod.ts";
import { initialize, SVCMOD_BUILD, SVCMOD_LIB, writeSvcmodConfig } from "./fixture.ts";

const SCENARIO = new URL("./scenario.ts", import.meta.url).pathname;
const REPO = new URL("../..", import.meta.url).pathname;
const CKS_RW_PUBLIC_SESSION = 2, CKS_RW_USER_FUNCTIONS = 3;

interface Token {
  dir: string;
  conf: string;
  soPinFile: string;
  userPinFile: string;
  userPin: Uint8Array;
  cleanup(): Promise<void>;
}

/** A token directory initialised by a scenario process; the PINs live in 0600 files. */
async function makeToken(opts: { secureHeapKb?: number } = {}): Promise<Token> {
  const dir = moduleTempDir("svcmod-behaviour-");
  const conf = await writeSvcmodConfig(dir, opts);
  // A PIN as `svcd token init` makes one: 32 random bytes, base64 (44 characters).
  const userPin = new TextEncoder().encode(crypto.getRandomValues(new Uint8Array(32)).toBase64());
  const soPin = crypto.getRandomValues(new Uint8Array(24));
  const soPinFile = `${dir}/so-pin`, userPinFile = `${dir}/user-pin`;
  await Deno.writeFile(soPinFile, soPin, { mode: 0o600 });
  await Deno.writeFile(userPinFile, userPin, { mode: 0o600 });
  const token = {
    dir,
    conf,
    soPinFile,
    userPinFile,
    userPin,
    cleanup: () => Deno.remove(dir, { recursive: true }),
  };
  assert.deepEqual(await scenario(token, "init", soPinFile, userPinFile), { ok: true });
  return token;
}

function command(token: Pick<Token, "conf">, args: string[], stdin: "piped" | "null" = "null") {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", SCENARIO, ...args],
    cwd: REPO,
    env: { SVCMOD_CONF: token.conf, NO_COLOR: "1" },
    stdin,
    stdout: "piped",
    stderr: "piped",
  });
}

// deno-lint-ignore no-explicit-any
async function scenario(token: Pick<Token, "conf">, ...args: string[]): Promise<any> {
  const out = await command(token, args).output();
  const stderr = new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, `scenario ${args[0]} failed: ${stderr}`);
  const lines = new TextDecoder().decode(out.stdout).trim().split("\n");
  return JSON.parse(lines[lines.length - 1]);
}

async function wrongPinFile(dir: string): Promise<string> {
  const file = `${dir}/wrong-pin`;
  await Deno.writeFile(file, new TextEncoder().encode("not-the-pin"), { mode: 0o600 });
  return file;
}

Deno.test("svcmod: C_GetInterface gives a 3.2 table of 104 entries; C_GetFunctionList 2.40", () => {
  const mod = loadModule(SVCMOD_LIB);
  assert.equal(mod.via, "C_GetInterface");
  assert.deepEqual(mod.tableVersion, { major: 3, minor: 2 });
  assert.equal(mod.tableEntries, 104);
  for (const name of ["C_VerifySignatureInit", "C_VerifySignature", "C_UnwrapKeyAuthenticated"]) {
    assert.ok(mod.provides(name), name);
  }
  const lib = Deno.dlopen(
    SVCMOD_LIB,
    {
      C_GetFunctionList: { parameters: ["buffer"], result: "u32" },
    } as const,
  );
  const out = new BigUint64Array(1);
  assert.equal(lib.symbols.C_GetFunctionList(new Uint8Array(out.buffer)), CKR.OK);
  const table = new Deno.UnsafePointerView(Deno.UnsafePointer.create(out[0])!);
  assert.deepEqual([table.getUint8(0), table.getUint8(1)], [2, 40]);
  lib.close();
});

Deno.test("svcmod: login is per process; a second C_Login answers 0x100", async () => {
  const token = await makeToken();
  try {
    const holder = command(token, ["login-hold", token.userPinFile], "piped").spawn();
    const reader = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let first = "";
    while (!first.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      first += value;
    }
    const held = JSON.parse(first.trim());
    assert.equal(held.login, CKR.OK);
    assert.equal(held.second, CKR.USER_ALREADY_LOGGED_IN); // 0x100, and it proves nothing
    assert.equal(held.stateB, CKS_RW_USER_FUNCTIONS); // the other session is logged in too
    // While that process holds its login, another process starts public and logs in itself.
    const other = await scenario(token, "state-then-login", token.userPinFile);
    assert.deepEqual(other, {
      before: CKS_RW_PUBLIC_SESSION,
      login: CKR.OK,
      after: CKS_RW_USER_FUNCTIONS,
    });
    await holder.stdin.close();
    await reader.cancel();
    assert.equal((await holder.status).code, 0);
  } finally {
    await token.cleanup();
  }
});

Deno.test("svcmod: the PIN key is PBKDF2-HMAC-SHA256 with 200 000 iterations", async () => {
  const token = await makeToken();
  try {
    const db = await Deno.readTextFile(`${token.dir}/tokens/token.db`);
    const field = (k: string) => Uint8Array.fromHex(db.match(new RegExp(`^${k} (\\w+)$`, "m"))![1]);
    const salt = field("user_salt"), wrap = field("user_wrap");
    const unwrapWith = async (iterations: number) => {
      const pin = await crypto.subtle.importKey(
        "raw",
        token.userPin as BufferSource,
        "PBKDF2",
        false,
        [
          "deriveBits",
        ],
      );
      const bits = await crypto.subtle.deriveBits(
        { name: "PBKDF2", hash: "SHA-256", salt: salt as BufferSource, iterations },
        pin,
        256,
      );
      const key = await crypto.subtle.importKey("raw", bits, "AES-GCM", false, ["decrypt"]);
      return await crypto.subtle.decrypt(
        {
          name: "AES-GCM",
          iv: wrap.slice(0, 12),
          additionalData: new TextEncoder().encode("svcmod-user-pin"),
        },
        key,
        wrap.slice(12),
      );
    };
    assert.equal((await unwrapWith(200_000)).byteLength, 32);
    await assert.rejects(unwrapWith(199_999));
    await assert.rejects(unwrapWith(1000));
  } finally {
    await token.cleanup();
  }
});

Deno.test("svcmod: five failed logins lock the user, seen by every later process", async () => {
  const token = await makeToken();
  try {
    const wrong = await wrongPinFile(token.dir);
    for (let i = 0; i < 5; i++) {
      assert.equal((await scenario(token, "login", wrong)).login, CKR.PIN_INCORRECT);
    }
    assert.equal((await scenario(token, "login", token.userPinFile)).login, CKR.PIN_LOCKED);
    assert.equal((await scenario(token, "login", token.userPinFile)).login, CKR.PIN_LOCKED);
    // The token says so too (read in this process through the binding).
    Deno.env.set("SVCMOD_CONF", token.conf);
    const mod = loadModule(SVCMOD_LIB);
    initialize(mod);
    const info = new Uint8Array(208);
    assert.equal(mod.fn.C_GetTokenInfo(0, info), CKR.OK);
    assert.ok(decodeTokenInfo(info).flags & CKF_TOKEN.USER_PIN_LOCKED);
    mod.fn.C_Finalize(null);
  } finally {
    await token.cleanup();
  }
});

Deno.test("svcmod: a failure count below five is reset by a correct login", async () => {
  const token = await makeToken();
  try {
    const wrong = await wrongPinFile(token.dir);
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 4; i++) {
        assert.equal((await scenario(token, "login", wrong)).login, CKR.PIN_INCORRECT);
      }
      assert.equal((await scenario(token, "login", token.userPinFile)).login, CKR.OK);
    }
  } finally {
    await token.cleanup();
  }
});

Deno.test("svcmod: the session cap (127) and the secure heap both answer CKR_HOST_MEMORY", async () => {
  const cases = [
    { secureHeapKb: 8192, opened: 127 }, // the cap, one below the compile-time maximum of 128
    { secureHeapKb: 1024, opened: 42 }, // the default heap: 42 reservations of 24 KiB
    { secureHeapKb: 64, opened: 2 }, // the smallest heap
  ];
  for (const c of cases) {
    const token = await makeToken({ secureHeapKb: c.secureHeapKb });
    try {
      assert.deepEqual(await scenario(token, "open-sessions"), {
        opened: c.opened,
        refusal: CKR.HOST_MEMORY,
      });
    } finally {
      await token.cleanup();
    }
  }
});

Deno.test("svcmod: a second concurrent call on one session handle answers CKR_OPERATION_ACTIVE", async () => {
  const token = await makeToken();
  try {
    const { rounds } = await scenario(token, "concurrent", token.userPinFile);
    assert.ok(rounds.length > 0, "no overlap observed in ten slow logins");
    for (const r of rounds) {
      if (r.quick === "ok") {
        // The quick call came first: the login was the second call and was refused.
        assert.equal(r.login, CKR.OPERATION_ACTIVE);
      } else {
        // The login came first: the quick call on the same handle was refused, the other
        // session answered, and the login itself completed.
        assert.equal(r.quick, `rv:${CKR.OPERATION_ACTIVE}`);
        assert.equal(r.other, CKS_RW_PUBLIC_SESSION);
        assert.equal(r.login, CKR.OK);
      }
    }
  } finally {
    await token.cleanup();
  }
});

Deno.test("svcmod: C-level behaviour tests (fork rule, PBKDF2 at every login, gated overlap)", async () => {
  const out = await new Deno.Command(`${SVCMOD_BUILD}p11_test`, {
    args: [SVCMOD_LIB],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.equal(out.code, 0, text);
  assert.match(text, /p11_test: all \d+ checks passed/);
});
