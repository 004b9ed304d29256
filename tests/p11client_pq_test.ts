/**
 * ML-DSA-44/65/87 and the composite (0x80004202) through the client module, driven by the
 * project's own FFI binding (ffi/pkcs11) with the daemon on the test module (svcmod). Every
 * signature is checked by @noble/post-quantum over the message (tests/support/oracle.ts), never by
 * the module.
 */
import assert from "node:assert/strict";
import {
  CKA,
  CKF_INIT,
  CKH,
  CKM,
  CKO,
  CKR,
  ckrName,
  type Encoded,
  encodeInitializeArgs,
  encodeMechanism,
  encodeSignAdditionalContext,
  encodeTemplate,
  loadModule,
  type Pkcs11Module,
  ulongBytes,
} from "../ffi/pkcs11/mod.ts";
import { verifyIndependently } from "./support/oracle.ts";
import {
  canRunClientBed,
  CLIENT_MODULE,
  type ClientBed,
  startClientBed,
  type TokenKey,
  tokenListing,
} from "./support/p11client.ts";

const CKF_SERIAL_SESSION = 4;
const KEYS = {
  "k-44": "ml-dsa-44",
  "k-65": "ml-dsa-65",
  "k-87": "ml-dsa-87",
  "k-comp": "composite-mldsa65-ed25519",
};
const MECHANISM: Record<string, number> = {
  "ml-dsa-44": CKM.ML_DSA,
  "ml-dsa-65": CKM.ML_DSA,
  "ml-dsa-87": CKM.ML_DSA,
  "composite-mldsa65-ed25519": CKM.COMPOSITE_MLDSA65_ED25519,
};

/** A session of the client module through the FFI binding. */
class ClientSession {
  readonly handle: bigint;
  constructor(readonly mod: Pkcs11Module) {
    const out = new BigUint64Array(1);
    this.ok(
      mod.fn.C_OpenSession(0, CKF_SERIAL_SESSION, null, null, new Uint8Array(out.buffer)),
      "C_OpenSession",
    );
    this.handle = out[0];
  }

  ok(rv: number, what: string): void {
    assert.equal(rv, CKR.OK, `${what}: ${ckrName(rv)}`);
  }

  privateKey(label: string): bigint {
    const tpl = encodeTemplate([
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      { type: CKA.LABEL, value: new TextEncoder().encode(label) },
    ]);
    const found = new BigUint64Array(2);
    const count = new BigUint64Array(1);
    this.ok(this.mod.fn.C_FindObjectsInit(this.handle, tpl.bytes, 2), "C_FindObjectsInit");
    this.ok(
      this.mod.fn.C_FindObjects(
        this.handle,
        new Uint8Array(found.buffer),
        2,
        new Uint8Array(count.buffer),
      ),
      "C_FindObjects",
    );
    this.ok(this.mod.fn.C_FindObjectsFinal(this.handle), "C_FindObjectsFinal");
    assert.equal(count[0], 1n, `one private key labelled ${label}`);
    return found[0];
  }

  signInit(key: bigint, mechanism: number, param?: Encoded): number {
    const mech = encodeMechanism(mechanism, param);
    return this.mod.fn.C_SignInit(this.handle, mech.bytes, key);
  }

  /** Single-part C_Sign (length query first, as tools do). */
  sign(key: bigint, mechanism: number, message: Uint8Array, param?: Encoded): Uint8Array {
    this.ok(this.signInit(key, mechanism, param), "C_SignInit");
    const len = new BigUint64Array(1);
    const lenBytes = new Uint8Array(len.buffer);
    this.ok(this.mod.fn.C_Sign(this.handle, message, message.length, null, lenBytes), "C_Sign");
    const sig = new Uint8Array(Number(len[0]));
    this.ok(this.mod.fn.C_Sign(this.handle, message, message.length, sig, lenBytes), "C_Sign");
    return sig.subarray(0, Number(len[0]));
  }

  /** Multi-part: C_SignUpdate in `chunk`-byte parts, then C_SignFinal; the CK_RV of the first failure. */
  signParts(
    key: bigint,
    mechanism: number,
    parts: Iterable<Uint8Array>,
  ): { rv: number; signature?: Uint8Array } {
    this.ok(this.signInit(key, mechanism), "C_SignInit");
    for (const part of parts) {
      const rv = this.mod.fn.C_SignUpdate(this.handle, part, part.length);
      if (rv !== CKR.OK) return { rv };
    }
    const len = new BigUint64Array(1);
    const sig = new Uint8Array(8192);
    len[0] = BigInt(sig.length);
    const rv = this.mod.fn.C_SignFinal(this.handle, sig, new Uint8Array(len.buffer));
    return { rv, signature: sig.slice(0, Number(len[0])) };
  }

  close(): void {
    this.mod.fn.C_CloseSession(this.handle);
  }
}

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

async function verifiedByNoble(key: TokenKey, message: Uint8Array, sig: Uint8Array) {
  return await verifyIndependently(
    key.key_type,
    { raw: Uint8Array.fromBase64(key.public_key_raw) },
    message,
    sig,
  );
}

Deno.test({
  name: "client module: ML-DSA-44/65/87 and the composite through the FFI binding",
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
        "multi-part ML-DSA within the service's limit is buffered and sent",
        async () => {
          const key = session.privateKey("k-44");
          const parts = [...chunks(256 * 1024, 10_000, (o) => o & 0xff)];
          const { rv, signature } = session.signParts(key, CKM.ML_DSA, parts);
          assert.equal(rv, CKR.OK, ckrName(rv));
          assert.ok(
            await verifiedByNoble(listing.keys.get("k-44")!, concatParts(parts), signature!),
          );
        },
      );

      const mu = listing.keys.get("k-65")!.digests?.includes("ml-dsa-mu") ?? false;

      await t.step({
        name: "without digest mode a multi-part message past the limit fails CKR_DATA_LEN_RANGE",
        ignore: mu,
        fn: () => {
          const key = session.privateKey("k-65");
          const { rv } = session.signParts(
            key,
            CKM.ML_DSA,
            chunks(2 * 1024 * 1024, 64 * 1024, (o) => o),
          );
          assert.equal(rv, CKR.DATA_LEN_RANGE, ckrName(rv));
        },
      });

      await t.step({
        name: "a 64 MiB multi-part ML-DSA signature is sent as μ (digest mode)",
        ignore: !mu,
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
