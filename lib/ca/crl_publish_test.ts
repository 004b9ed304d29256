import assert from "node:assert/strict";
import { generateKeyPairSync, sign, verify } from "node:crypto";
import * as pkijs from "pkijs";
import { moduleTempDir } from "../../tests/support/temp_dir.ts";
import { formatIndexLine, IndexFileSource } from "../ocsp/mod.ts";
import { derFromPem } from "./csr.ts";
import { oid, sequence, tlv } from "../der/mod.ts";
import { type CrlFailure, CrlKeeper, type SignedCrl } from "./crl_publish.ts";

const PARTITIONS = 4;
const VALIDITY_S = 60;
const EXPIRES = Date.UTC(2030, 0, 1);
const SERIALS = ["10", "11", "12", "13", "14", "15", "16", "17"];
const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });

/** A keeper over a temporary index.txt, with a software signer that can be made to fail. */
async function keeperSetup() {
  const dir = moduleTempDir("svcd-keeper-");
  const index = `${dir}/index.txt`;
  const out = `${dir}/crl`;
  await Deno.mkdir(out);
  const revoked = new Set<string>(["10"]);
  const writeIndex = () =>
    Deno.writeTextFile(
      index,
      SERIALS.map((serial) =>
        formatIndexLine(
          revoked.has(serial)
            ? {
              status: "R",
              expires: EXPIRES,
              revokedAt: Date.UTC(2025, 0, 1),
              reason: 1,
              serial,
              subject: `/CN=${serial}`,
            }
            : { status: "V", expires: EXPIRES, serial, subject: `/CN=${serial}` },
        )
      ).join(""),
    );
  await writeIndex();
  const state = { failSigning: (_tbs: Uint8Array) => false };
  const logs: string[] = [];
  const failures: CrlFailure[] = [];
  const batches: string[][] = [];
  let number = 100n;
  const keeper = new CrlKeeper({
    source: new IndexFileSource(index),
    issuer: {
      name: sequence(tlv(0x31, sequence(oid("2.5.4.3"), tlv(0x0c, new TextEncoder().encode("K"))))),
      spki: new Uint8Array(publicKey.export({ type: "spki", format: "der" })),
      crlUrl: "http://pki.example.org/crl",
    },
    partitions: PARTITIONS,
    signer: {
      keyType: "ec-p256",
      sign: (tbs) => {
        if (state.failSigning(tbs)) return Promise.reject(new Error("CKR_FUNCTION_FAILED"));
        return Promise.resolve(
          new Uint8Array(sign("sha256", tbs, { key: privateKey, dsaEncoding: "ieee-p1363" })),
        );
      },
    },
    validitySeconds: VALIDITY_S,
    dir: out,
    takeNumber: (atLeast) => Promise.resolve(number = (atLeast > number ? atLeast : number) + 1n),
    log: (line) => logs.push(line),
    onFailure: (stage) => failures.push(stage),
    onWritten: (crls) => batches.push(crls.map((c) => c.name)),
  });
  const revoke = async (serial: string) => {
    revoked.add(serial);
    await writeIndex();
  };
  /** Every CRL file's bytes, by name. */
  const files = async () => {
    const all: Record<string, Uint8Array> = {};
    for await (const e of Deno.readDir(out)) {
      if (e.name.endsWith(".crl") || e.name === "full.pem") {
        all[e.name] = await Deno.readFile(`${out}/${e.name}`);
      }
    }
    return all;
  };
  return { dir, out, keeper, state, logs, failures, batches, revoke, files };
}

/** The serials a CRL file lists, its signature checked by node:crypto. */
function listed(der: Uint8Array): string[] {
  const crl = pkijs.CertificateRevocationList.fromBER(der.slice().buffer);
  assert.ok(verify("sha256", crl.tbsView, publicKey, crl.signatureValue.valueBlock.valueHexView));
  return (crl.revokedCertificates ?? []).map((c) =>
    c.userCertificate.valueBlock.valueHexView.toHex().toUpperCase()
  );
}

function names(crls: SignedCrl[]): string[] {
  return crls.map((c) => c.name);
}

Deno.test("crl keeper: the first round writes every CRL; a revocation writes its partition first, then the full CRL, and leaves the others alone", async () => {
  const s = await keeperSetup();
  try {
    const now = Date.now();
    assert.deepEqual(names(await s.keeper.round(now)), [
      "0.crl",
      "1.crl",
      "2.crl",
      "3.crl",
      "full.crl",
    ]);
    assert.deepEqual(s.batches, [["0.crl", "1.crl", "2.crl", "3.crl"], ["full.crl"]]);
    const first = await s.files();
    assert.deepEqual(Object.keys(first).sort(), [
      "0.crl",
      "1.crl",
      "2.crl",
      "3.crl",
      "full.crl",
      "full.pem",
    ]);
    assert.deepEqual(listed(first["full.crl"]), ["10"]);
    assert.deepEqual(derFromPem(first["full.pem"], "X509 CRL"), first["full.crl"]);
    assert.deepEqual(await s.keeper.round(now + 1000), [], "nothing changed, nothing due");

    await s.revoke("17");
    s.batches.length = 0;
    const k = 0x17 % PARTITIONS;
    assert.deepEqual(names(await s.keeper.round(now + 2000)), [`${k}.crl`, "full.crl"]);
    assert.deepEqual(s.batches, [[`${k}.crl`], ["full.crl"]], "the partition is out first");
    const second = await s.files();
    assert.deepEqual(listed(second[`${k}.crl`]), ["17"]);
    assert.deepEqual(listed(second["full.crl"]), ["10", "17"]);
    for (let other = 0; other < PARTITIONS; other++) {
      if (other !== k) assert.deepEqual(second[`${other}.crl`], first[`${other}.crl`]);
    }
    // Half the validity later every CRL is signed again.
    const later = await s.keeper.round(now + 2000 + VALIDITY_S * 500);
    assert.equal(later.length, PARTITIONS + 1);
  } finally {
    await Deno.remove(s.dir, { recursive: true });
  }
});

Deno.test("crl keeper: a token that does not sign leaves the files as they were, logs once per cause and counts each round; the next good round says it works again", async () => {
  const s = await keeperSetup();
  try {
    const now = Date.now();
    await s.keeper.round(now);
    const good = await s.files();
    s.state.failSigning = () => true;
    await s.revoke("12");
    assert.deepEqual(await s.keeper.round(now + 1000), []);
    assert.deepEqual(await s.keeper.round(now + 1500), []);
    assert.deepEqual(s.failures, ["sign", "sign"]);
    assert.equal(s.logs.length, 1);
    assert.match(
      s.logs[0],
      /^crl: the token did not sign: CKR_FUNCTION_FAILED; the CRLs published before are served until their nextUpdate/,
    );
    assert.deepEqual(await s.files(), good);

    // The full CRL alone fails (the TBS without an issuingDistributionPoint, OID 2.5.29.28): the
    // partition is out, the full CRL as it was.
    s.state.failSigning = (tbs) => !tbs.toHex().includes("0603551d1c");
    const k = 0x12 % PARTITIONS;
    assert.deepEqual(names(await s.keeper.round(now + 2000)), [`${k}.crl`]);
    const partial = await s.files();
    assert.deepEqual(listed(partial[`${k}.crl`]), ["12"]);
    assert.deepEqual(partial["full.crl"], good["full.crl"]);
    assert.deepEqual(s.failures, ["sign", "sign", "sign"]);

    s.state.failSigning = () => false;
    assert.deepEqual(names(await s.keeper.round(now + 2500)), [`${k}.crl`, "full.crl"]);
    assert.deepEqual(listed((await s.files())["full.crl"]), ["10", "12"]);
    assert.match(s.logs.at(-1)!, /^crl: working again: published 2 CRL\(s\)/);
  } finally {
    await Deno.remove(s.dir, { recursive: true });
  }
});
