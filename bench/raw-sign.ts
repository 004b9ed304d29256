/**
 * Raw signing throughput: C_Sign/s through the binding (Token.sign, nonblocking FFI) at 1 and 16
 * in flight, beside a plain synchronous C_SignInit+C_Sign loop on one session — the module's own
 * limit on this machine in the same run. Other benches (e.g. /sign) import `measureRawSign` to quote
 * raw figures measured alongside their own.
 *
 * @example
 * ```sh
 * deno run -A bench/raw-sign.ts                     # ec-p256 and ed25519, 2 s per figure
 * deno run -A bench/raw-sign.ts --types ec-p256,rsa-3072 --seconds 5
 * ```
 */
import { createHash } from "node:crypto";
import { benchArgs, listOf, oneOf, positiveNumber, valueOption } from "./_args.ts";
import {
  CKA,
  CKF_MECHANISM,
  CKO,
  encodeMechanism,
  loadModule,
  ulongBytes,
} from "../ffi/pkcs11/mod.ts";
import {
  findObjects,
  KEY_TYPES,
  type KeyTypeName,
  openSession,
  type SigningKey,
  type Token,
  utf8,
} from "../lib/token/mod.ts";
import { makeTestToken, openTestToken, testTokenPin } from "../tests/support/token.ts";

/** Figures for one key. */
export interface RawSignFigures {
  keyType: KeyTypeName;
  mechanism: string;
  /** Plain synchronous C_SignInit + C_Sign loop on one session (no pool, no event loop). */
  syncLoopPerSec: number;
  /** Token.sign (pool + nonblocking C_Sign), awaited one at a time. */
  binding1PerSec: number;
  /** Token.sign with 16 calls in flight. */
  binding16PerSec: number;
}

/** Options: how long each figure runs (default 2000 ms). */
export interface RawSignOptions {
  durationMs?: number;
}

/**
 * Measures one key of a logged-in token. The token must come from `modulePath` in this process.
 * Example: `await measureRawSign(token, modulePath, await token.key("k-ec"))`.
 */
export async function measureRawSign(
  token: Token,
  modulePath: string,
  key: SigningKey,
  opts: RawSignOptions = {},
): Promise<RawSignFigures> {
  const durationMs = opts.durationMs ?? 2000;
  const message = new TextEncoder().encode("svcd raw sign bench: a 32-byte-ish message");
  return {
    keyType: key.keyType,
    mechanism: key.mechanism,
    syncLoopPerSec: syncLoop(token, modulePath, key, message, durationMs),
    binding1PerSec: await inFlight(token, key, message, 1, durationMs),
    binding16PerSec: await inFlight(token, key, message, 16, durationMs),
  };
}

async function inFlight(token: Token, key: SigningKey, message: Uint8Array, n: number, ms: number) {
  await token.sign(key, message); // warm the pool and the key cache
  let done = 0;
  const start = performance.now();
  const deadline = start + ms;
  await Promise.all(Array.from({ length: n }, async () => {
    while (performance.now() < deadline) {
      await token.sign(key, message);
      done++;
    }
  }));
  return done / ((performance.now() - start) / 1000);
}

function syncLoop(
  token: Token,
  modulePath: string,
  key: SigningKey,
  message: Uint8Array,
  ms: number,
): number {
  const mod = loadModule(modulePath);
  const spec = KEY_TYPES[key.keyType];
  const signing = spec.signing.find((m) => token.offers(m.mechanism, CKF_MECHANISM.SIGN))!;
  const data = signing.prehash ? createHash(signing.prehash).update(message).digest() : message;
  const session = openSession(mod, token.slotId);
  try {
    const [handle] = findObjects(mod, session, [
      { type: CKA.CLASS, value: ulongBytes(CKO.PRIVATE_KEY) },
      { type: CKA.LABEL, value: utf8(key.label) },
    ]);
    const mech = encodeMechanism(signing.mechanism, signing.parameter?.());
    const sig = new Uint8Array(spec.signatureLength);
    const len = new BigUint64Array(1);
    const lenBytes = new Uint8Array(len.buffer);
    let done = 0;
    const start = performance.now();
    const deadline = start + ms;
    while (performance.now() < deadline) {
      len[0] = BigInt(sig.length);
      if (mod.fn.C_SignInit(session, mech.bytes, handle) !== 0) {
        throw new Error("C_SignInit failed");
      }
      if (mod.fn.C_Sign(session, data, data.byteLength, sig, lenBytes) !== 0) {
        throw new Error("C_Sign failed");
      }
      done++;
    }
    return done / ((performance.now() - start) / 1000);
  } finally {
    mod.fn.C_CloseSession(session);
  }
}

/**
 * Makes a temporary token with one key per type, measures each, and prints one line per key.
 * Example: `await runRawSignBench(["ec-p256", "ed25519"], { durationMs: 2000 })`.
 */
export async function runRawSignBench(
  types: KeyTypeName[],
  opts: RawSignOptions = {},
): Promise<RawSignFigures[]> {
  const made = await makeTestToken({
    keys: Object.fromEntries(types.map((t) => [`bench-${t}`, t])),
  });
  const token = openTestToken(made);
  const figures: RawSignFigures[] = [];
  try {
    await token.login(testTokenPin(made));
    for (const label of made.keys) {
      const key = (await token.key(label))!;
      figures.push(await measureRawSign(token, made.modulePath, key, opts));
    }
  } finally {
    token.close();
    await made.cleanup();
  }
  return figures;
}

/** The figures as aligned text lines. */
export function formatFigures(figures: RawSignFigures[]): string {
  const rows = figures.map((f) =>
    `${f.keyType.padEnd(10)} ${f.mechanism.padEnd(24)} ${fmt(f.syncLoopPerSec)} ${
      fmt(f.binding1PerSec)
    } ${fmt(f.binding16PerSec)}`
  );
  return [
    `${"key".padEnd(10)} ${"mechanism".padEnd(24)} ${"sync loop/s".padStart(12)} ${
      "binding c=1".padStart(12)
    } ${"binding c=16".padStart(12)}`,
    ...rows,
  ].join("\n");
}

function fmt(n: number): string {
  return Math.round(n).toString().padStart(12);
}

if (import.meta.main) {
  const { values } = benchArgs({
    url: import.meta.url,
    measures: "Raw signing throughput: C_Sign/s through the binding (Token.sign, nonblocking " +
      "FFI) at 1 and 16 in flight, beside a plain synchronous C_SignInit + C_Sign loop on one " +
      "session (the module's own limit on this machine), in the same run.",
    options: {
      types: {
        type: "string",
        default: "ec-p256,ed25519",
        check: listOf(oneOf(Object.keys(KEY_TYPES))),
        help: "key types to measure",
      },
      seconds: valueOption(positiveNumber, "2", "seconds per figure"),
    },
    examples: [
      "deno run -A bench/raw-sign.ts",
      "deno run -A bench/raw-sign.ts --types ec-p256,rsa-3072 --seconds 5",
    ],
  });
  const types = values.types.split(",") as KeyTypeName[];
  console.log(
    `raw C_Sign throughput, ${
      Deno.env.get("SVCD_TEST_MODULE") ?? "softhsm"
    }, ${navigator.hardwareConcurrency} cores`,
  );
  const figures = await runRawSignBench(types, { durationMs: Number(values.seconds) * 1000 });
  console.log(formatFigures(figures));
}
