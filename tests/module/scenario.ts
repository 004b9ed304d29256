/**
 * One process's worth of svcmod use, for tests of per-process behaviour (login state, lockout
 * across processes, session limits, concurrent calls on one handle). Run by
 * tests/module_behaviour_test.ts as `deno run -A tests/module/scenario.ts <name> [PIN files]` with
 * SVCMOD_CONF set; prints one JSON line with what it saw (return codes as numbers). PINs come as
 * files of raw bytes, so they are never strings.
 *
 * @example
 * ```sh
 * SVCMOD_CONF=/tmp/x/svcmod.conf deno run -A tests/module/scenario.ts open-sessions
 * ```
 */
import { CKR, CKU, decodeSessionInfo } from "../../ffi/pkcs11/mod.ts";
import { initialize, initToken, loadSvcmod, openSession } from "./fixture.ts";

const CKS_RW_USER_FUNCTIONS = 3;
const [name, ...args] = Deno.args;
const pinFile = (i: number) => Deno.readFileSync(args[i]);
const mod = loadSvcmod();
initialize(mod);

function sessionState(s: number): number | string {
  const buf = new Uint8Array(32);
  const rv = mod.fn.C_GetSessionInfo(s, buf);
  return rv === CKR.OK ? decodeSessionInfo(buf).state : `rv:${rv}`;
}

function login(s: number, pin: Uint8Array, user: number = CKU.USER): number {
  return mod.fn.C_Login(s, user, pin, pin.length);
}

function report(result: Record<string, unknown>): void {
  console.log(JSON.stringify(result));
}

async function scenario(): Promise<void> {
  switch (name) {
    case "init": // SO PIN file, user PIN file
      initToken(mod, pinFile(0), pinFile(1));
      report({ ok: true });
      break;
    case "login": { // PIN file [so]; reports the C_Login answer and the session state after it
      const s = openSession(mod);
      const rv = login(s, pinFile(0), args[1] === "so" ? CKU.SO : CKU.USER);
      report({ login: rv, state: sessionState(s) });
      break;
    }
    case "login-hold": { // logs in, shows the second login's answer, waits for stdin to close
      const a = openSession(mod), b = openSession(mod);
      const first = login(a, pinFile(0));
      const second = login(b, pinFile(0));
      report({ login: first, second, stateB: sessionState(b) });
      for await (const _ of Deno.stdin.readable) { /* until the test closes stdin */ }
      break;
    }
    case "state-then-login": { // while another process holds a login
      const s = openSession(mod);
      const before = sessionState(s);
      const rv = login(s, pinFile(0));
      report({ before, login: rv, after: sessionState(s) });
      break;
    }
    case "open-sessions": { // opens sessions until one is refused
      const out = new BigUint64Array(1);
      let opened = 0, refusal: number = CKR.OK;
      for (; opened < 300; opened++) {
        refusal = mod.fn.C_OpenSession(0, 0x4, null, null, new Uint8Array(out.buffer));
        if (refusal !== CKR.OK) break;
      }
      report({ opened, refusal });
      break;
    }
    case "concurrent": { // a slow C_Login on one handle, quick calls on the same handle meanwhile
      const rounds: Record<string, unknown>[] = [];
      for (let round = 0; round < 10 && rounds.length < 3; round++) {
        const a = openSession(mod), b = openSession(mod);
        const pending = mod.fn.C_LoginAsync(a, CKU.USER, pinFile(0), pinFile(0).length);
        let quick: number | string = "none", other: number | string = "none";
        const deadline = Date.now() + 30_000; // failure guard only
        for (;;) {
          const st = sessionState(a);
          if (st === CKS_RW_USER_FUNCTIONS || Date.now() > deadline) break; // no overlap seen
          if (typeof st === "string") {
            quick = st;
            other = sessionState(b);
            break;
          }
        }
        const loginRv = await pending;
        if (quick !== "none") rounds.push({ quick, other, login: loginRv });
        else if (loginRv === CKR.OPERATION_ACTIVE) rounds.push({ quick: "ok", login: loginRv });
        mod.fn.C_CloseSession(a);
        mod.fn.C_CloseSession(b);
      }
      report({ rounds });
      break;
    }
    default:
      throw new Error(`unknown scenario '${name}'`);
  }
}

try {
  await scenario();
} finally {
  mod.fn.C_Finalize(null);
}
