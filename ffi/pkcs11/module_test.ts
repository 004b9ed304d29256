import assert from "node:assert/strict";
import { CKR } from "./constants.ts";
import { FUNCTION_ORDER, tableOffset } from "./functions.ts";
import { bindTable } from "./module.ts";

/**
 * A hand-built table: the version, then non-NULL words for `entries` functions and different
 * non-NULL junk after them (what lies past a short table). bindTable never calls what it binds.
 */
function fakeTable(major: number, minor: number, entries: number) {
  const words = new BigUint64Array(1 + FUNCTION_ORDER.length + 8).fill(0xdead_beefn);
  const bytes = new Uint8Array(words.buffer);
  bytes.fill(0, 0, 8);
  bytes[0] = major;
  bytes[1] = minor;
  for (let i = entries; i < FUNCTION_ORDER.length; i++) words[1 + i] = 0xbad_c0den;
  return { bytes, ptr: Deno.UnsafePointer.of(bytes)! };
}

Deno.test("bindTable reads only the entries the table's own version has (3.0 table: no 3.2 entries)", () => {
  const t = fakeTable(3, 0, 92);
  const mod = bindTable("fake", t.ptr, "C_GetInterface");
  assert.equal(mod.tableEntries, 92);
  assert.equal(mod.provides("C_GetInterface"), true);
  assert.equal(mod.provides("C_MessageVerifyFinal"), true); // entry 92
  assert.equal(mod.provides("C_VerifySignature"), false); // entry 96: not in a 3.0 table
  assert.equal(tableOffset("C_VerifySignature"), 768);
});

Deno.test("bindTable: a 2.40 table has 68 entries; a NULL entry answers CKR_FUNCTION_NOT_SUPPORTED", async () => {
  const t = fakeTable(2, 40, 68);
  new BigUint64Array(t.bytes.buffer)[tableOffset("C_Login") / 8] = 0n;
  const mod = bindTable("fake", t.ptr, "C_GetFunctionList");
  assert.equal(mod.tableEntries, 68);
  assert.equal(mod.provides("C_WaitForSlotEvent"), true);
  assert.equal(mod.provides("C_GetInterface"), false);
  assert.equal(mod.provides("C_Login"), false);
  assert.equal(mod.fn.C_Login(1, 1, new Uint8Array(1), 1), CKR.FUNCTION_NOT_SUPPORTED);
  assert.equal(await mod.fn.C_LoginAsync(1, 1, new Uint8Array(1), 1), CKR.FUNCTION_NOT_SUPPORTED);
});
