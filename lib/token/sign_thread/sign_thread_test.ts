/**
 * The sign thread against SoftHSM2: the signatures it makes verify with WebCrypto and node:crypto
 * (lib/token_admin's independent verifier), what the ring cannot carry is signed on the calling
 * thread, a failed call comes back as the Pkcs11Error of that call, a full ring takes no more, and
 * close refuses what is still out.
 */
import assert from "node:assert/strict";
import {
  CKA,
  CKM,
  CKO,
  CKR,
  encodeMechanism,
  loadModule,
  Pkcs11Error,
  ulongBytes,
} from "../../../ffi/pkcs11/mod.ts";
import { withLoggedInToken } from "../../../tests/support/token.ts";
import { verifyIndependently } from "../../token_admin/mod.ts";
import { findObjects, finishSign, openSession, utf8 } from "../sessions.ts";
import { DATA_ROOM, SignThread } from "./sign_thread.ts";
import { SLOTS } from "./_slots.ts";

const ON_THREAD = { signThread: true, inlineSignLimitUs: 300 };
const message = new TextEncoder().encode("a release manifest");

Deno.test({
  name: "sign thread: EC, Ed25519 and RSA PKCS #1 v1.5 signatures are made on it and verify",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken(
      { ec: "ec-p256", ed: "ed25519", rsa: "rsa-3072-pkcs1v15" },
      async (token) => {
        for (const label of ["ec", "ed", "rsa"]) {
          const key = (await token.key(label))!;
          const before = token.signedOnThread;
          const { signature } = await token.sign(key, message);
          assert.equal(token.signedOnThread, before + 1, `${label}: made on the sign thread`);
          const verdict = await verifyIndependently(key, message, signature);
          assert.ok(verdict.ok, `${label}: ${verdict.verifier} accepts it`);
          const other = await verifyIndependently(
            key,
            new TextEncoder().encode("other"),
            signature,
          );
          assert.equal(other.ok, false, `${label}: not a signature of another message`);
        }
      },
      ON_THREAD,
    ),
});

Deno.test({
  name: "sign thread: many signatures at once all verify, each with its own message",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ ec: "ec-p256" }, async (token) => {
      const key = (await token.key("ec"))!;
      const messages = Array.from({ length: 200 }, (_, i) => new TextEncoder().encode(`m${i}`));
      const signed = await Promise.all(messages.map((m) => token.sign(key, m)));
      for (const [i, { signature }] of signed.entries()) {
        assert.ok((await verifyIndependently(key, messages[i], signature)).ok, `message ${i}`);
      }
      assert.ok(token.signedOnThread > 0);
    }, ON_THREAD),
});

Deno.test({
  name:
    "sign thread: a message larger than a slot, or a mechanism with a parameter, is signed on the calling thread",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ ed: "ed25519", pss: "rsa-3072" }, async (token) => {
      const ed = (await token.key("ed"))!;
      const large = new Uint8Array(DATA_ROOM + 1).fill(7);
      const { signature } = await token.sign(ed, large);
      assert.ok((await verifyIndependently(ed, large, signature)).ok);
      const pss = (await token.key("pss"))!;
      const byPss = await token.sign(pss, message);
      assert.ok((await verifyIndependently(pss, message, byPss.signature)).ok);
      assert.equal(token.signedOnThread, 0, "neither went to the thread");
    }, ON_THREAD),
});

Deno.test({
  name:
    "sign thread: a failed C_SignInit is its Pkcs11Error; a full ring takes no more; close refuses what is out",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({}, async (token, made) => {
      const mod = loadModule(made.modulePath);
      const session = openSession(mod, token.slotId);
      const thread = SignThread.start(mod, 0.3)!;
      try {
        const noKey = 0x7fff_fff0;
        const ecdsa = { mechanism: CKM.ECDSA };
        // The module's own answer to the same call on this thread is what the thread must report.
        const direct = mod.fn.C_SignInit(session, encodeMechanism(CKM.ECDSA).bytes, noKey);
        assert.notEqual(direct, CKR.OK);
        await assert.rejects(
          thread.sign(session, noKey, ecdsa, message)!,
          (err: unknown) =>
            err instanceof Pkcs11Error && err.rv === direct && err.message.includes("C_SignInit"),
        );
        const out = Array.from(
          { length: SLOTS },
          () => thread.sign(session, noKey, ecdsa, message),
        );
        assert.ok(out.every((p) => p instanceof Promise), "a full ring's worth is taken");
        assert.equal(thread.sign(session, noKey, ecdsa, message), undefined, "one more is not");
        const outcomes = Promise.allSettled(out);
        assert.equal(thread.close(), true, "the thread left the module");
        for (const outcome of await outcomes) {
          assert.equal(outcome.status, "rejected");
          const err = (outcome as PromiseRejectedResult).reason;
          // Done before the close: the module's answer; not done: refused, never a token error.
          const ok = (err instanceof Pkcs11Error && err.rv === direct) ||
            (!(err instanceof Pkcs11Error) && /closed before/.test(err.message));
          assert.ok(ok, String(err));
        }
        assert.equal(thread.sign(session, noKey, ecdsa, message), undefined, "closed");
      } finally {
        thread.close();
        mod.fn.C_CloseSession(session);
      }
    }),
});

Deno.test({
  name: "sign thread: taken only while signOnThreadWhile says so",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ ec: "ec-p256" }, async (token) => {
      const key = (await token.key("ec"))!;
      let wanted = false;
      token.signOnThreadWhile(() => wanted);
      const inline = await token.sign(key, message);
      assert.equal(token.signedOnThread, 0, "not wanted: the calling thread");
      wanted = true;
      const onThread = await token.sign(key, message);
      assert.equal(token.signedOnThread, 1, "wanted: the sign thread");
      for (const { signature } of [inline, onThread]) {
        assert.ok((await verifyIndependently(key, message, signature)).ok);
      }
    }, ON_THREAD),
});

Deno.test({
  name: "sign thread: closing the token waits for the signatures the thread is making",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ rsa: "rsa-3072-pkcs1v15" }, async (token) => {
      const key = (await token.key("rsa"))!;
      // RSA-3072 signatures take long enough that the close comes while one is in the module.
      const out = Promise.allSettled(Array.from({ length: 40 }, () => token.sign(key, message)));
      await new Promise((resolve) => setTimeout(resolve, 0));
      token.close();
      const settled = await out;
      for (const s of settled) {
        if (s.status === "fulfilled") {
          assert.ok((await verifyIndependently(key, message, s.value.signature)).ok);
        } else {
          assert.doesNotMatch(String(s.reason), /CKR_/, "refused, not failed in the module");
        }
      }
      assert.ok(settled.some((s) => s.status === "rejected"), "some were still out");
    }, ON_THREAD),
});

Deno.test({
  name:
    "finishSign completes a C_Sign left active by CKR_BUFFER_TOO_SMALL into the length asked for",
  sanitizeResources: false,
  fn: () =>
    withLoggedInToken({ ed: "ed25519" }, async (token, made) => {
      const key = (await token.key("ed"))!;
      const mod = loadModule(made.modulePath);
      const session = openSession(mod, token.slotId);
      try {
        const [handle] = findObjects(mod, session, [
          { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
          { type: CKA.LABEL, value: utf8("ed") },
        ]);
        assert.equal(mod.fn.C_SignInit(session, encodeMechanism(CKM.EDDSA).bytes, handle), CKR.OK);
        const cell = new BigUint64Array([8n]);
        const tooSmall = mod.fn.C_Sign(
          session,
          message,
          message.length,
          new Uint8Array(8),
          new Uint8Array(cell.buffer),
        );
        assert.equal(tooSmall, CKR.BUFFER_TOO_SMALL);
        const signature = finishSign(mod, session, message, Number(cell[0]));
        assert.ok((await verifyIndependently(key, message, signature)).ok);
      } finally {
        mod.fn.C_CloseSession(session);
      }
    }),
});
