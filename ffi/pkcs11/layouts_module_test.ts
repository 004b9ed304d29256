/**
 * The hand-written LP64 layouts against reality: what the binding decodes from CK_INFO,
 * CK_SLOT_INFO and CK_TOKEN_INFO equals what softhsm2-util --show-slots and pkcs11-tool -T/-I print
 * for the same token (wrong offsets would shift text fields and scramble flags and versions).
 */
import assert from "node:assert/strict";
import { check, CKF_SLOT, CKF_TOKEN, decodeSlotInfo, loadModule, SIZE } from "./mod.ts";
import { SOFTHSM_PATH } from "../../tests/support/modules.ts";
import { makeTestToken, openTestToken } from "../../tests/support/token.ts";

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stdin: "null" }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(
    out.code,
    0,
    `${cmd} ${args.join(" ")} failed: ${new TextDecoder().decode(out.stderr)}`,
  );
  return text;
}

/** "Key: value" pairs of one indented block, values trimmed. */
function fields(block: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of block.split("\n")) {
    const m = line.match(/^\s+([^:]+?)\s*:\s*(.*?)\s*$/);
    if (m) map.set(m[1], m[2]);
  }
  return map;
}

// pkcs11-tool's names for token flags (opensc's print_token_info).
const PKCS11_TOOL_FLAGS: Record<string, number> = {
  "rng": CKF_TOKEN.RNG,
  "write protected": CKF_TOKEN.WRITE_PROTECTED,
  "login required": CKF_TOKEN.LOGIN_REQUIRED,
  "PIN initialized": CKF_TOKEN.USER_PIN_INITIALIZED,
  "PIN pad present": CKF_TOKEN.PROTECTED_AUTHENTICATION_PATH,
  "token initialized": CKF_TOKEN.TOKEN_INITIALIZED,
  "user PIN count low": CKF_TOKEN.USER_PIN_COUNT_LOW,
  "final user PIN try": CKF_TOKEN.USER_PIN_FINAL_TRY,
  "user PIN locked": CKF_TOKEN.USER_PIN_LOCKED,
  "user PIN to be changed": CKF_TOKEN.USER_PIN_TO_BE_CHANGED,
  "SO PIN count low": CKF_TOKEN.SO_PIN_COUNT_LOW,
  "final SO PIN try": CKF_TOKEN.SO_PIN_FINAL_TRY,
  "SO PIN locked": CKF_TOKEN.SO_PIN_LOCKED,
  "SO PIN to be changed": CKF_TOKEN.SO_PIN_TO_BE_CHANGED,
};

function parseFlags(text: string): number {
  let flags = 0;
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const other = part.match(/^other flags=0x([0-9a-f]+)$/i);
    if (other) flags |= parseInt(other[1], 16);
    else if (part in PKCS11_TOOL_FLAGS) flags |= PKCS11_TOOL_FLAGS[part];
    else throw new Error(`unknown pkcs11-tool flag name '${part}'`);
  }
  return flags;
}

Deno.test({
  name:
    "layouts: CK_TOKEN_INFO, CK_SLOT_INFO and CK_INFO read through the binding match SoftHSM's tools",
  ignore: Deno.env.get("SVCD_TEST_MODULE") === "svcmod",
  sanitizeResources: false,
  fn: async () => {
    const made = await makeTestToken({ tokenLabel: "layout-check" });
    const env = { ...made.module.env, PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" };
    const token = openTestToken(made);
    try {
      const info = token.info();

      // softhsm2-util --show-slots: one block per slot, "Slot <id>" then slot and token info.
      const slots = (await run("softhsm2-util", ["--show-slots"], env)).split(/^Slot /m).slice(1);
      const ours = slots.find((b) => b.startsWith(`${info.slotId}\n`));
      assert.ok(ours, `softhsm2-util lists no slot ${info.slotId}`);
      const [slotPart, tokenPart] = ours.split("Token info:");
      const s = fields(slotPart);
      const t = fields(tokenPart);
      assert.equal(t.get("Label"), info.label);
      assert.equal(info.label, "layout-check");
      assert.equal(t.get("Serial number"), info.serialNumber);
      assert.match(info.serialNumber, /^[0-9a-f]{16}$/);
      assert.equal(t.get("Manufacturer ID"), info.manufacturerId);
      assert.equal(t.get("Model"), info.model);
      assert.equal(t.get("Hardware version"), info.hardwareVersion);
      assert.equal(t.get("Firmware version"), info.firmwareVersion);
      assert.equal(t.get("Initialized"), info.flags & CKF_TOKEN.TOKEN_INITIALIZED ? "yes" : "no");
      assert.equal(
        t.get("User PIN init."),
        info.flags & CKF_TOKEN.USER_PIN_INITIALIZED ? "yes" : "no",
      );

      const mod = loadModule(made.modulePath);
      const slotBuf = new Uint8Array(SIZE.CK_SLOT_INFO);
      check("C_GetSlotInfo", mod.fn.C_GetSlotInfo(info.slotId, slotBuf));
      const slot = decodeSlotInfo(slotBuf);
      assert.equal(s.get("Description"), slot.slotDescription);
      assert.equal(s.get("Manufacturer ID"), slot.manufacturerId);
      assert.equal(
        s.get("Hardware version"),
        `${slot.hardwareVersion.major}.${slot.hardwareVersion.minor}`,
      );
      assert.equal(
        s.get("Firmware version"),
        `${slot.firmwareVersion.major}.${slot.firmwareVersion.minor}`,
      );
      assert.equal(s.get("Token present"), slot.flags & CKF_SLOT.TOKEN_PRESENT ? "yes" : "no");

      // pkcs11-tool -T: flags by name, PIN length bounds (the CK_ULONGs right after the session counts).
      const listing = await run("pkcs11-tool", ["--module", SOFTHSM_PATH, "-T"], env);
      const block = listing.split(/^Slot /m).find((b) =>
        b.includes(`(0x${info.slotId.toString(16)})`)
      );
      assert.ok(block, `pkcs11-tool lists no slot 0x${info.slotId.toString(16)}`);
      const p = fields(block);
      assert.equal(p.get("token label"), info.label);
      assert.equal(p.get("serial num"), info.serialNumber);
      assert.equal(parseFlags(p.get("token flags")!), info.flags);
      const raw = new Uint8Array(SIZE.CK_TOKEN_INFO);
      check("C_GetTokenInfo", mod.fn.C_GetTokenInfo(info.slotId, raw));
      const view = new DataView(raw.buffer);
      assert.equal(
        p.get("pin min/max"),
        `${view.getBigUint64(144, true)}/${view.getBigUint64(136, true)}`,
      );
      // SoftHSM reports CK_EFFECTIVELY_INFINITE sessions (0) and withholds the current counts.
      assert.equal(info.maxSessionCount, 0);
      assert.equal(info.sessionCount, null);

      // pkcs11-tool -I: CK_INFO ("Cryptoki version 2.40", then "Name<spaces>value" lines).
      const general = await run("pkcs11-tool", ["--module", SOFTHSM_PATH, "-I"], env);
      const line = (name: string) => general.match(new RegExp(`^${name}\\s+(.+?)\\s*$`, "m"))?.[1];
      assert.equal(line("Cryptoki version"), info.cryptokiVersion);
      assert.equal(line("Manufacturer"), "SoftHSM");
      assert.equal(line("Library"), `${info.libraryDescription} (ver ${info.libraryVersion})`);
      assert.equal(info.functionTableVersion, "2.40");
    } finally {
      token.close();
      await made.cleanup();
    }
  },
});
