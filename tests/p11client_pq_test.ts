/**
 * ML-DSA-44/65/87 and the composite (0x80004202) through the client module, driven by the
 * project's own FFI binding (ffi/pkcs11) and by lib/token's Token over it, with the daemon on the
 * test module (svcmod). Every signature is checked by @noble/post-quantum over the message
 * (tests/support/oracle.ts), never by the module.
 */
import assert from "node:assert/strict";
import {
  CKA,
  CKF_INIT,
  CKH,
  CKK,
  CKM,
  CKP_ML_DSA,
  CKR,
  ckrName,
  encodeInitializeArgs,
  encodeSignAdditionalContext,
  loadModule,
  readUlong,
} from "../ffi/pkcs11/mod.ts";
import { getAttributes, Token } from "../lib/token/mod.ts";
import { verifyIndependently } from "./support/oracle.ts";
import {
  canRunClientBed,
  CLIENT_MODULE,
  type ClientBed,
  ClientSession,
  startClientBed,
  type TokenKey,
  tokenListing,
} from "./support/p11client.ts";
import { publicKeyHandle, verifyPartsRv, verifyRv } from "./support/p11client_verify.ts";

const KEYS = {
  "k-44": "ml-dsa-44",
  "k-65": "ml-dsa-65",
  "k-87": "ml-dsa-87",
  "k-comp": "composite-mldsa65-ed25519",
};
const PARAMETER_SET: Record<string, number | undefined> = {
  "ml-dsa-44": CKP_ML_DSA.ML_DSA_44,
  "ml-dsa-65": CKP_ML_DSA.ML_DSA_65,
  "ml-dsa-87": CKP_ML_DSA.ML_DSA_87,
};
const MECHANISM: Record<string, number> = {
  "ml-dsa-44": CKM.ML_DSA,
  "ml-dsa-65": CKM.ML_DSA,
  "ml-dsa-87": CKM.ML_DSA,
  "composite-mldsa65-ed25519": CKM.COMPOSITE_MLDSA65_ED25519,
};

function* chunks(total: number, size: number, fill: (offset: number) => number) {
  for (let at = 0; at < total; at += size) {
    const part = new Uint8Array(Math.min(size, total - at));
    for (let i = 0; i < part.length; i += 4096) part[i] = fill(at + i);
    yield part;
  }
}

function concatParts(parts: Iterable<Uint8Array>): Uint8Array {
  const list = [...parts];
  const out = new Uint8Array(list.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of list) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** A copy of `bytes` with one bit of byte `at` flipped. */
function flipped(bytes: Uint8Array, at: number): Uint8Array {
  return Uint8Array.from(bytes, (b, i) => i === at ? b ^ 1 : b);
}

async function verifiedByNoble(key: TokenKey, message: Uint8Array, sig: Uint8Array) {
  return await verifyIndependently(
    key.key_type,
    { raw: Uint8Array.fromBase64(key.public_key_raw) },
    message,
    sig,
  );
}

Deno.test({
  name: "client module: ML-DSA-44/65/87 and the composite through the FFI binding and lib/token",
  ignore: !canRunClientBed,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async (t) => {
    const bed: ClientBed = await startClientBed(KEYS, { module: "svcmod" });
    const saved = Object.fromEntries(Object.keys(bed.env).map((k) => [k, Deno.env.get(k)]));
    for (const [k, v] of Object.entries(bed.env)) Deno.env.set(k, v);
    const mod = loadModule(CLIENT_MODULE);
    assert.equal(mod.fn.C_Initialize(encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK)), CKR.OK);
    const session = new ClientSession(mod);
    try {
      const listing = await tokenListing(bed);
      assert.deepEqual([...listing.keys.keys()].sort(), Object.keys(KEYS).sort());
      const message = new TextEncoder().encode("a post-quantum signature through svcd");

      for (const [label, type] of Object.entries(KEYS)) {
        await t.step(`${type}: C_Sign, verified by @noble/post-quantum`, async () => {
          const key = session.privateKey(label);
          const sig = session.sign(key, MECHANISM[type], message);
          assert.ok(await verifiedByNoble(listing.keys.get(label)!, message, sig));
          const tampered = Uint8Array.from(message, (b, i) => i === 0 ? b ^ 1 : b);
          assert.ok(!await verifiedByNoble(listing.keys.get(label)!, tampered, sig));
        });
      }

      await t.step(
        "objects: CKA_KEY_TYPE, CKA_PARAMETER_SET, CKA_VALUE (the public key /token lists)",
        () => {
          for (const [label, type] of Object.entries(KEYS)) {
            const raw = Uint8Array.fromBase64(listing.keys.get(label)!.public_key_raw);
            const keyType = type === "composite-mldsa65-ed25519"
              ? CKK.COMPOSITE_MLDSA65_ED25519
              : CKK.ML_DSA;
            for (
              const [object, handle] of [
                ["private", session.privateKey(label)],
                ["public", publicKeyHandle(session, label)],
              ] as const
            ) {
              const what = `${label} ${object}`;
              const attrs = getAttributes(mod, Number(session.handle), Number(handle), [
                CKA.KEY_TYPE,
                CKA.PARAMETER_SET,
                CKA.VALUE,
              ]);
              assert.equal(readUlong(attrs.get(CKA.KEY_TYPE)!), keyType, what);
              // The composite has no parameter set: the module answers the attribute as absent.
              const set = attrs.get(CKA.PARAMETER_SET);
              assert.equal(set && readUlong(set), PARAMETER_SET[type] ?? null, what);
              // The private key's value is sensitive (null); the public key's is the raw key.
              assert.deepEqual(attrs.get(CKA.VALUE), object === "public" ? raw : null, what);
            }
          }
        },
      );

      await t.step(
        "lib/token's Token over the client module: signed, verified by @noble/post-quantum",
        async () => {
          const token = Token.open({ modulePath: CLIENT_MODULE, tokenLabel: bed.token.tokenLabel });
          try {
            // No PIN exists (the client certificate is the credential): the module takes any, so
            // the login the daemon makes with its PIN passes with an empty one.
            await token.login(new Uint8Array(0));
            for (const [label, type] of Object.entries(KEYS)) {
              const key = await token.key(label);
              assert.ok(key, label);
              assert.equal(key.keyType, type);
              const { signature: sig } = await token.sign(key, message);
              assert.ok(await verifiedByNoble(listing.keys.get(label)!, message, sig), label);
              // Token.verify is C_Verify through the daemon's /verify.
              assert.ok(await token.verify(key, message, sig), label);
              assert.ok(!await token.verify(key, message, flipped(sig, 0)), label);
            }
          } finally {
            token.close();
          }
        },
      );

      await t.step("CK_SIGN_ADDITIONAL_CONTEXT: empty context, hedged variants", async () => {
        const key = session.privateKey("k-65");
        for (const hedge of [CKH.HEDGE_PREFERRED, CKH.HEDGE_REQUIRED]) {
          const sig = session.sign(key, CKM.ML_DSA, message, encodeSignAdditionalContext(hedge));
          assert.ok(await verifiedByNoble(listing.keys.get("k-65")!, message, sig));
        }
        // The service signs hedged with an empty context; anything else is not what was asked.
        assert.equal(
          session.signInit(
            key,
            CKM.ML_DSA,
            encodeSignAdditionalContext(CKH.DETERMINISTIC_REQUIRED),
          ),
          CKR.MECHANISM_PARAM_INVALID,
        );
        assert.equal(
          session.signInit(
            key,
            CKM.ML_DSA,
            encodeSignAdditionalContext(CKH.HEDGE_PREFERRED, Uint8Array.of(1, 2)),
          ),
          CKR.MECHANISM_PARAM_INVALID,
        );
        assert.equal(session.signInit(key, CKM.EDDSA), CKR.MECHANISM_INVALID);
      });

      await t.step(
        "C_Verify through /verify (ML-DSA-65, composite): CKR_OK, tampered CKR_SIGNATURE_INVALID",
        () => {
          for (const label of ["k-65", "k-comp"] as const) {
            const mechanism = MECHANISM[KEYS[label]];
            const sig = session.sign(session.privateKey(label), mechanism, message);
            const pub = publicKeyHandle(session, label);
            assert.equal(verifyRv(session, pub, mechanism, message, sig), CKR.OK, label);
            for (
              const [what, msg, s] of [
                ["signature", message, flipped(sig, 0)],
                ["message", flipped(message, 0), sig],
              ] as const
            ) {
              const rv = verifyRv(session, pub, mechanism, msg, s);
              assert.equal(rv, CKR.SIGNATURE_INVALID, `${label}, tampered ${what}: ${ckrName(rv)}`);
            }
          }
        },
      );

      await t.step(
        "multi-part C_VerifyUpdate/C_VerifyFinal of ML-DSA past max_body (as μ)",
        () => {
          const key = session.privateKey("k-65");
          const pub = publicKeyHandle(session, "k-65");
          // 4 MiB: past max_body (1 MiB), so neither the signature nor the check sends the message.
          const total = 4 * 1024 * 1024;
          const parts = () => chunks(total, 256 * 1024, (o) => (o >> 12) & 0xff);
          const { rv, signature } = session.signParts(key, CKM.ML_DSA, parts());
          assert.equal(rv, CKR.OK, ckrName(rv));
          assert.equal(verifyPartsRv(session, pub, CKM.ML_DSA, parts(), signature!), CKR.OK);
          const other = chunks(total, 256 * 1024, (o) => ((o >> 12) & 0xff) ^ 1);
          const bad = verifyPartsRv(session, pub, CKM.ML_DSA, other, signature!);
          assert.equal(bad, CKR.SIGNATURE_INVALID, ckrName(bad));
        },
      );

      /** 256 KiB in parts of 10 000 bytes signed by `label`: noble verifies it over the whole. */
      const signsPartsWithinMaxBody = async (label: string, mechanism: number) => {
        const parts = [...chunks(256 * 1024, 10_000, (o) => o & 0xff)];
        const { rv, signature } = session.signParts(session.privateKey(label), mechanism, parts);
        assert.equal(rv, CKR.OK, ckrName(rv));
        assert.ok(
          await verifiedByNoble(listing.keys.get(label)!, concatParts(parts), signature!),
        );
      };

      await t.step(
        "multi-part ML-DSA within max_body is sent as μ too (the key takes ml-dsa-mu)",
        () => signsPartsWithinMaxBody("k-44", CKM.ML_DSA),
      );

      await t.step(
        "multi-part composite within max_body (no digest mode) is buffered and sent whole",
        () => signsPartsWithinMaxBody("k-comp", CKM.COMPOSITE_MLDSA65_ED25519),
      );

      await t.step("/token: ML-DSA keys take μ (ml-dsa-mu), the composite no digest", () => {
        for (const label of ["k-44", "k-65", "k-87"]) {
          assert.deepEqual(listing.keys.get(label)!.digests, ["ml-dsa-mu"], label);
        }
        assert.deepEqual(listing.keys.get("k-comp")!.digests, []);
      });

      await t.step(
        "without digest mode (composite) a multi-part message past max_body fails CKR_DATA_LEN_RANGE",
        async () => {
          const key = session.privateKey("k-comp");
          // max_body is 1 MiB (the default): the first part past it is refused, nothing is sent.
          const { rv } = session.signParts(
            key,
            CKM.COMPOSITE_MLDSA65_ED25519,
            chunks(2 * 1024 * 1024, 64 * 1024, (o) => o),
          );
          assert.equal(rv, CKR.DATA_LEN_RANGE, ckrName(rv));
          // The session is usable again: a message within the limit signs.
          const sig = session.sign(key, CKM.COMPOSITE_MLDSA65_ED25519, message);
          assert.ok(await verifiedByNoble(listing.keys.get("k-comp")!, message, sig));
        },
      );

      await t.step({
        name: "a 64 MiB multi-part ML-DSA signature is sent as μ (digest mode)",
        fn: async () => {
          const key = session.privateKey("k-65");
          const total = 64 * 1024 * 1024;
          const fill = (o: number) => (o >> 12) & 0xff;
          const { rv, signature } = session.signParts(
            key,
            CKM.ML_DSA,
            chunks(total, 1024 * 1024, fill),
          );
          assert.equal(rv, CKR.OK, ckrName(rv));
          const whole = concatParts(chunks(total, 1024 * 1024, fill));
          assert.ok(await verifiedByNoble(listing.keys.get("k-65")!, whole, signature!));
        },
      });
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
