/**
 * The daemon's refusals through the client module, each the CK_RV pkcs11-module/README.md gives
 * it: 413 (a message past the daemon's --max-body), 403 on /sign (a grant removed by a policy
 * reload), 429 (the refusal budget: waited Retry-After and retried when that fits in the call's
 * timeout, at once CKR_FUNCTION_FAILED when it does not). First, C_Verify of the EC and Ed25519
 * keys, which the module answers itself (libcrypto) without asking the daemon. Driven through the
 * FFI binding; every signature that comes back is checked by node:crypto with the key's public key
 * from /token.
 */
import assert from "node:assert/strict";
import { createPublicKey, verify } from "node:crypto";
import {
  CKF_INIT,
  CKM,
  CKR,
  ckrName,
  encodeInitializeArgs,
  loadModule,
} from "../ffi/pkcs11/mod.ts";
import {
  ALICE,
  canRunClientBed,
  CLIENT_MODULE,
  type ClientBed,
  ClientSession,
  startClientBed,
  type TokenKey,
  tokenListing,
} from "./support/p11client.ts";
import { publicKeyHandle, verifyRv } from "./support/p11client_verify.ts";
import { sample, scrape } from "./support/metrics.ts";
import { moduleTempDir } from "./support/temp_dir.ts";

const MAX_BODY = 64 * 1024;
const TIMEOUT_S = 5;
/** Where the daemon counts its answers: what reached it, whatever the client module says. */
const METRICS_SOCKET = `${moduleTempDir("svcd-answers-metrics-")}/metrics.sock`;
// Two refusals limit the identity for 3 s (a wait that fits in the call's timeout with room for a
// slow machine); the next refusal after that for 6 s (doubled): longer than the timeout. Nothing
// is forgotten during the test.
const DAEMON_ARGS = [
  "--metrics-socket",
  METRICS_SOCKET,
  "--metrics-uid",
  String(Deno.uid()),
  "--max-body",
  String(MAX_BODY),
  "--refusal-threshold",
  "2",
  "--refusal-base-delay",
  "3",
  "--refusal-max-delay",
  "12",
  "--refusal-refill",
  "3600",
];

function ed25519Verified(key: TokenKey, message: Uint8Array, sig: Uint8Array): boolean {
  const spki = createPublicKey({
    key: Buffer.from(key.public_key!, "base64"),
    format: "der",
    type: "spki",
  });
  return verify(null, message, spki, sig);
}

/** Re-reads the policy file until /token no longer lists `label` for alice. */
async function reloadPolicyWithout(bed: ClientBed, label: string): Promise<void> {
  const policy = bed.keys.filter((l) => l !== label).map((l) => `${ALICE}\t${l}\n`).join("");
  await Deno.writeTextFile(bed.daemon.policyPath, policy);
  bed.daemon.signal("SIGHUP");
  for (let i = 0; i < 500; i++) {
    if (!(await tokenListing(bed)).keys.has(label)) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`the daemon still lists ${label} after SIGHUP`);
}

/**
 * The /sign answers the daemon has sent so far: signatures (200) and refusals of a limited
 * identity (429). Each is counted before it is sent, so a call that has returned is in the count.
 */
async function signAnswers(): Promise<{ signed: number; limited: number }> {
  const text = await scrape(METRICS_SOCKET);
  const count = (status: number) =>
    sample(
      text,
      `svcd_http_requests_total{listener="authenticated",route="/sign",status="${status}"}`,
    ) ?? 0;
  return { signed: count(200), limited: count(429) };
}

/** The answers the daemon sent since `before`. */
async function answersSince(before: { signed: number; limited: number }) {
  const now = await signAnswers();
  return { signed: now.signed - before.signed, limited: now.limited - before.limited };
}

/** A C_Sign with its CK_RV; how long it took is printed, a figure and not a claim. */
function loggedSign(
  session: ClientSession,
  key: bigint,
  mechanism: number,
  message: Uint8Array,
  what: string,
) {
  const t0 = performance.now();
  const result = session.trySign(key, mechanism, message);
  console.log(`  ${what}: ${ckrName(result.rv)} after ${Math.round(performance.now() - t0)} ms`);
  return result;
}

Deno.test({
  name: "client module: 413, 403 after a policy reload, 429 → their documented CK_RV",
  ignore: !canRunClientBed,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const bed = await startClientBed({ "k-ec": "ec-p256", "k-ed": "ed25519" }, {
      daemonArgs: DAEMON_ARGS,
    });
    const env = { ...bed.env, SVCD_PKCS11_TIMEOUT: String(TIMEOUT_S) };
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, Deno.env.get(k)]));
    for (const [k, v] of Object.entries(env)) Deno.env.set(k, v);
    const mod = loadModule(CLIENT_MODULE);
    assert.equal(mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK)), CKR.OK);
    const session = new ClientSession(mod);
    try {
      const edKey = (await tokenListing(bed)).keys.get("k-ed")!;
      const ec = session.privateKey("k-ec");
      const ed = session.privateKey("k-ed");
      const message = new TextEncoder().encode("answers of the daemon");
      const signsEd = (what: string) => {
        const { rv, signature } = loggedSign(session, ed, CKM.EDDSA, message, what);
        assert.equal(rv, CKR.OK, `${what}: ${ckrName(rv)}`);
        assert.ok(ed25519Verified(edKey, message, signature!), what);
      };

      await t.step(
        "C_Verify here with libcrypto (EC, Ed25519): CKR_OK, tampered CKR_SIGNATURE_INVALID",
        () => {
          for (
            const [label, key, mechanism] of [
              ["k-ec", ec, CKM.ECDSA_SHA256],
              ["k-ed", ed, CKM.EDDSA],
            ] as const
          ) {
            const sig = session.sign(key, mechanism, message);
            const pub = publicKeyHandle(session, label);
            assert.equal(verifyRv(session, pub, mechanism, message, sig), CKR.OK, label);
            const flip = (b: Uint8Array) => Uint8Array.from(b, (x, i) => i === 0 ? x ^ 1 : x);
            for (
              const [what, msg, s] of [
                ["signature", message, flip(sig)],
                ["message", flip(message), sig],
              ] as const
            ) {
              const rv = verifyRv(session, pub, mechanism, msg, s);
              assert.equal(rv, CKR.SIGNATURE_INVALID, `${label}, tampered ${what}: ${ckrName(rv)}`);
            }
          }
        },
      );

      await t.step("413 (past the daemon's --max-body): CKR_DATA_LEN_RANGE", () => {
        // Past the 64 KiB GET /token states: refused before it is sent (a 413 maps to the same).
        const large = new Uint8Array(MAX_BODY + 1024).fill(0x61);
        const { rv } = session.trySign(ed, CKM.EDDSA, large);
        assert.equal(rv, CKR.DATA_LEN_RANGE, ckrName(rv));
        signsEd("a message within the limit");
      });

      await t.step(
        "403 on /sign (grant removed by a policy reload): CKR_KEY_FUNCTION_NOT_PERMITTED",
        async () => {
          assert.equal(session.trySign(ec, CKM.ECDSA_SHA256, message).rv, CKR.OK);
          await reloadPolicyWithout(bed, "k-ec");
          // The handle found before the reload stays; the daemon refuses its signature.
          const { rv } = session.trySign(ec, CKM.ECDSA_SHA256, message);
          assert.equal(rv, CKR.KEY_FUNCTION_NOT_PERMITTED, ckrName(rv));
          signsEd("the key still granted");
        },
      );

      await t.step("429 within the timeout: waited Retry-After, retried, CKR_OK", async () => {
        // The second refusal limits alice for 3 s: the next request gets 429 with Retry-After.
        assert.equal(
          session.trySign(ec, CKM.ECDSA_SHA256, message).rv,
          CKR.KEY_FUNCTION_NOT_PERMITTED,
        );
        const before = await signAnswers();
        signsEd("retried after the delay");
        // One 429, then one signature: a retry sent before the limit ended would have been
        // refused again (a second 429), so the daemon's own clock says the module waited.
        assert.deepEqual(await answersSince(before), { signed: 1, limited: 1 });
      });

      await t.step(
        "429 whose Retry-After passes the timeout: CKR_FUNCTION_FAILED, no retry",
        async () => {
          // The third refusal limits alice again, for 6 s: longer than the 5 s the call may take.
          assert.equal(
            session.trySign(ec, CKM.ECDSA_SHA256, message).rv,
            CKR.KEY_FUNCTION_NOT_PERMITTED,
          );
          const before = await signAnswers();
          const { rv } = loggedSign(
            session,
            ed,
            CKM.EDDSA,
            message,
            "Retry-After past the timeout",
          );
          // The 429's own CK_RV: a call that slept through Retry-After would end CKR_FUNCTION_CANCELED.
          assert.equal(rv, CKR.FUNCTION_FAILED, ckrName(rv));
          assert.deepEqual(
            await answersSince(before),
            { signed: 0, limited: 1 },
            "the daemon saw the 429 and no retry",
          );
        },
      );
    } finally {
      session.close();
      mod.fn.C_Finalize(null);
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) Deno.env.delete(k);
        else Deno.env.set(k, v);
      }
      await bed.stop();
    }
  },
});
