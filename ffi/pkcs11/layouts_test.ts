import assert from "node:assert/strict";
import {
  addressOf,
  CKA,
  CKF_INIT,
  CKF_MECHANISM,
  CKF_SESSION,
  CKF_TOKEN,
  CKG,
  CKH,
  CKK,
  CKM,
  CKR,
  ckrName,
  decodeTokenInfo,
  encodeInitializeArgs,
  encodeMechanism,
  encodePssParams,
  encodeSignAdditionalContext,
  encodeTemplate,
  entryCount,
  FUNCTION_ORDER,
  type MechanismFlag,
  OFFSET,
  padText,
  Pkcs11Error,
  readUlongs,
  type SessionFlag,
  SIZE,
  tableOffset,
  ulongBytes,
} from "./mod.ts";

const u64 = (b: Uint8Array, at: number) =>
  new DataView(b.buffer, b.byteOffset).getBigUint64(at, true);

Deno.test("function table offsets follow the entry order of the OASIS v3.2 function list", () => {
  const expected: Record<string, number> = {
    C_Initialize: 8,
    C_Finalize: 16,
    C_GetInfo: 24,
    C_GetFunctionList: 32,
    C_GetSlotList: 40,
    C_GetTokenInfo: 56,
    C_GetMechanismList: 64,
    C_GetMechanismInfo: 72,
    C_InitToken: 80,
    C_InitPIN: 88,
    C_OpenSession: 104,
    C_CloseSession: 112,
    C_Login: 152,
    C_Logout: 160,
    C_CreateObject: 168,
    C_DestroyObject: 184,
    C_GetAttributeValue: 200,
    C_FindObjectsInit: 216,
    C_FindObjects: 224,
    C_FindObjectsFinal: 232,
    C_DigestInit: 304,
    C_SignInit: 344,
    C_Sign: 352,
    C_VerifyInit: 392,
    C_Verify: 400,
    C_GenerateKey: 472,
    C_GenerateKeyPair: 480,
    C_GenerateRandom: 520,
    C_GetInterfaceList: 552,
    C_GetInterface: 560,
    C_LoginUser: 568,
    C_VerifySignatureInit: 760,
    C_VerifySignature: 768,
  };
  for (const [name, offset] of Object.entries(expected)) {
    assert.equal(tableOffset(name), offset, name);
  }
  assert.equal(FUNCTION_ORDER.length, 104);
  assert.equal(entryCount({ major: 2, minor: 40 }), 68);
  assert.equal(entryCount({ major: 3, minor: 0 }), 92);
  assert.equal(entryCount({ major: 3, minor: 1 }), 92);
  assert.equal(entryCount({ major: 3, minor: 2 }), 104);
  assert.throws(() => tableOffset("C_Nonsense"), /not a PKCS#11 function/);
});

Deno.test("CK_ATTRIBUTE template: 24 bytes each, type@0 pValue@8 ulValueLen@16; CK_ULONG values are 8 bytes", () => {
  const label = new TextEncoder().encode("svcd");
  const cls = ulongBytes(3);
  const t = encodeTemplate([{ type: CKA.CLASS, value: cls }, { type: CKA.LABEL, value: label }, {
    type: CKA.VALUE,
    value: null,
  }]);
  assert.equal(t.bytes.length, 3 * SIZE.CK_ATTRIBUTE);
  assert.equal(u64(t.bytes, 0), BigInt(CKA.CLASS));
  assert.equal(u64(t.bytes, 8), addressOf(cls));
  assert.equal(u64(t.bytes, 16), 8n);
  assert.equal(u64(t.bytes, 24), BigInt(CKA.LABEL));
  assert.equal(u64(t.bytes, 32), addressOf(label));
  assert.equal(u64(t.bytes, 40), 4n);
  assert.equal(u64(t.bytes, 56), 0n); // null value: length query
  assert.equal(u64(t.bytes, 64), 0n);
  assert.deepEqual([...cls], [3, 0, 0, 0, 0, 0, 0, 0]);
});

Deno.test("CK_MECHANISM with CK_RSA_PKCS_PSS_PARAMS and CK_SIGN_ADDITIONAL_CONTEXT parameters", () => {
  const pss = encodePssParams(CKM.SHA256, CKG.MGF1_SHA256, 32);
  assert.equal(pss.bytes.length, 24);
  assert.deepEqual([u64(pss.bytes, 0), u64(pss.bytes, 8), u64(pss.bytes, 16)], [0x250n, 2n, 32n]);
  const m = encodeMechanism(CKM.SHA256_RSA_PKCS_PSS, pss);
  assert.equal(m.bytes.length, SIZE.CK_MECHANISM);
  assert.equal(u64(m.bytes, 0), 0x43n);
  assert.equal(u64(m.bytes, 8), addressOf(pss.bytes));
  assert.equal(u64(m.bytes, 16), 24n);
  assert.ok(m.keep.includes(pss.bytes));

  const ctx = new Uint8Array([1, 2, 3]);
  const sac = encodeSignAdditionalContext(CKH.DETERMINISTIC_REQUIRED, ctx);
  assert.deepEqual([u64(sac.bytes, 0), u64(sac.bytes, 8), u64(sac.bytes, 16)], [
    2n,
    addressOf(ctx),
    3n,
  ]);
  const empty = encodeSignAdditionalContext(CKH.HEDGE_PREFERRED);
  assert.deepEqual([u64(empty.bytes, 0), u64(empty.bytes, 8), u64(empty.bytes, 16)], [0n, 0n, 0n]);
  const bare = encodeMechanism(CKM.EDDSA);
  assert.deepEqual([u64(bare.bytes, 0), u64(bare.bytes, 8), u64(bare.bytes, 16)], [
    0x1057n,
    0n,
    0n,
  ]);
});

Deno.test("CK_C_INITIALIZE_ARGS: 48 bytes, flags at 32", () => {
  const a = encodeInitializeArgs(CKF_INIT.OS_LOCKING_OK);
  assert.equal(a.length, 48);
  assert.equal(u64(a, 32), 2n);
  assert.ok(a.subarray(0, 32).every((b) => b === 0) && a.subarray(40).every((b) => b === 0));
});

Deno.test("CK_TOKEN_INFO decoding: blank-padded text, CK_ULONGs from 96, versions at 184/186", () => {
  const b = new Uint8Array(SIZE.CK_TOKEN_INFO);
  b.set(padText("svcd", 32), 0);
  b.set(padText("Maker", 32), 32);
  b.set(padText("Model", 16), 64);
  b.set(padText("0123456789abcdef", 16), 80);
  const v = new DataView(b.buffer);
  v.setBigUint64(96, 0x42dn, true);
  v.setBigUint64(104, 127n, true);
  v.setBigUint64(112, 0xffff_ffff_ffff_ffffn, true); // CK_UNAVAILABLE_INFORMATION
  v.setBigUint64(136, 255n, true);
  v.setBigUint64(144, 4n, true);
  b.set([3, 2, 1, 9], 184);
  b.set(new TextEncoder().encode("2026112100000000"), 188);
  const t = decodeTokenInfo(b);
  assert.equal(t.label, "svcd");
  assert.equal(t.manufacturerId, "Maker");
  assert.equal(t.model, "Model");
  assert.equal(t.serialNumber, "0123456789abcdef");
  assert.equal(t.flags, 0x42d);
  assert.equal(t.maxSessionCount, 127);
  assert.equal(t.sessionCount, null);
  assert.equal(t.maxPinLen, 255);
  assert.equal(t.minPinLen, 4);
  assert.deepEqual(t.hardwareVersion, { major: 3, minor: 2 });
  assert.deepEqual(t.firmwareVersion, { major: 1, minor: 9 });
  assert.equal(t.utcTime, "2026112100000000");
  assert.throws(() => padText("x".repeat(33), 32), /longer than 32 bytes/);
});

Deno.test("CK_UTF8CHAR text fields read back as written (UTF-8, not latin1)", () => {
  const b = new Uint8Array(SIZE.CK_TOKEN_INFO);
  b.set(padText("clé-ключ", 32), 0);
  assert.equal(decodeTokenInfo(b).label, "clé-ключ");
});

Deno.test("post-quantum and composite constants; CKR names in errors", () => {
  assert.equal(CKK.ML_DSA, 0x4a);
  assert.equal(CKM.ML_DSA, 0x1d);
  assert.equal(CKM.ML_DSA_KEY_PAIR_GEN, 0x1c);
  assert.equal(CKA.PARAMETER_SET, 0x61d);
  assert.equal(CKM.COMPOSITE_MLDSA65_ED25519, 0x80004202);
  assert.equal(CKK.COMPOSITE_MLDSA65_ED25519, 0x80004202);
  assert.equal(ckrName(CKR.USER_ALREADY_LOGGED_IN), "CKR_USER_ALREADY_LOGGED_IN");
  assert.equal(ckrName(0x209), "CKR_PARAMETER_SET_NOT_SUPPORTED");
  assert.equal(ckrName(0x80000001), "CKR_VENDOR_DEFINED+0x1");
  assert.equal(ckrName(0x4), "CKR_UNKNOWN");
  const e = new Pkcs11Error("C_Sign", 0xc1);
  assert.equal(e.message, "C_Sign: CKR_SIGNATURE_LEN_RANGE (0xc1)");
  assert.equal(e.code, "CKR_SIGNATURE_LEN_RANGE");
});

/** Compiles layouts_check.c against one header and returns what the compiler laid out. */
async function compilerLayout(header: "NSS" | "SVCD", dir: string): Promise<Map<string, number>> {
  const source = new URL("./layouts_check.c", import.meta.url).pathname;
  const include = header === "NSS"
    ? ["-I/usr/include/nss", "-I/usr/include/nspr"]
    : [`-I${new URL("../../pkcs11-common", import.meta.url).pathname}`];
  const exe = `${dir}/layouts_${header}`;
  const cc = await new Deno.Command("gcc", {
    args: ["-Wall", "-Werror", `-DHEADER_${header}`, ...include, "-o", exe, source],
    stderr: "piped",
  }).output();
  assert.equal(cc.code, 0, new TextDecoder().decode(cc.stderr));
  const run = await new Deno.Command(exe, { stdout: "piped" }).output();
  assert.equal(run.code, 0);
  const out = new Map<string, number>();
  for (const line of new TextDecoder().decode(run.stdout).trim().split("\n")) {
    const [name, value] = line.split(" ");
    out.set(name, Number(value));
  }
  return out;
}

Deno.test({
  name: "SIZE and OFFSET are what a C compiler lays out from NSS's and the project's header",
  permissions: { run: true, read: true, write: true },
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "svcd-layouts-" });
    try {
      const ours = new Map<string, number>(Object.entries(SIZE));
      for (const [struct, fields] of Object.entries(OFFSET)) {
        for (const [field, at] of Object.entries(fields)) ours.set(`${struct}.${field}`, at);
      }
      const seen = new Set<string>();
      for (const header of ["NSS", "SVCD"] as const) {
        for (const [name, value] of await compilerLayout(header, dir)) {
          assert.ok(ours.has(name), `${name} (${header}) is not in SIZE/OFFSET`);
          assert.equal(
            ours.get(name),
            value,
            `${name}: layouts.ts says ${ours.get(name)}, ${header} ${value}`,
          );
          seen.add(name);
        }
      }
      const unchecked = [...ours.keys()].filter((name) => !seen.has(name));
      assert.deepEqual(unchecked, [], "every size and offset layouts.ts uses is checked");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("flags are typed by structure: a token flag is not a mechanism or session flag", () => {
  const sign: MechanismFlag = CKF_MECHANISM.SIGN;
  const rw: SessionFlag = CKF_SESSION.RW_SESSION;
  // @ts-expect-error CKF_TOKEN.RNG is a CK_TOKEN_INFO bit (0x1), not a CK_MECHANISM_INFO one
  const wrong: MechanismFlag = CKF_TOKEN.RNG;
  // @ts-expect-error CKF_INIT.OS_LOCKING_OK and CKF_SESSION.RW_SESSION are both 0x2
  encodeInitializeArgs(CKF_SESSION.RW_SESSION);
  assert.deepEqual([sign, rw, wrong], [0x800, 0x2, 0x1]);
});

Deno.test("readUlongs: a CK_ULONG array (CKA_ALLOWED_MECHANISMS), a partial trailing value ignored", () => {
  const two = new Uint8Array([...ulongBytes(0x40), ...ulongBytes(0x40000600)]);
  assert.deepEqual(readUlongs(two), [0x40, 0x40000600]);
  assert.deepEqual(readUlongs(two.subarray(0, 12)), [0x40]);
  assert.deepEqual(readUlongs(new Uint8Array()), []);
});
