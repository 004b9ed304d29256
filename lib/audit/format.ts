/**
 * The bytes of an audit line, the names of audit files and the message a checkpoint signs: one
 * definition shared by the writer ({@link ./log.ts}) and the verifier ({@link ./verify.ts}), so the
 * two cannot disagree. The format is described for operators in ./README.md.
 *
 * @example
 * ```ts
 * const body = lineBody(memberHead("sign", "CN=alice"), 7, memberTail(new Date(), { key: "k" }), ZERO_MAC);
 * // {"event":"sign","actor":"CN=alice","seq":7,"time":"…","key":"k","prev":"000…0"}
 * ```
 */
import { latin1 } from "../bytes/mod.ts";
import { slabBytes } from "./slab.ts";

/** Length in bytes of every MAC in the chain (HMAC-SHA256). */
export const MAC_BYTES = 32;

/** The `prev` of the very first line ever written: 32 zero bytes. */
export const ZERO_MAC: Uint8Array = new Uint8Array(MAC_BYTES);

/** Members a caller may not pass in `fields`: the log writes them itself. */
export const RESERVED_MEMBERS: ReadonlySet<string> = new Set([
  "event",
  "actor",
  "actor_bytes",
  "seq",
  "time",
  "prev",
  "mac",
]);

/** Members of the first line of a file (login_ok / audit_reopened) that link it to the file before. */
export const OPENING_MEMBERS: ReadonlySet<string> = new Set([
  "file",
  "prev_file",
  "prev_size",
  "prev_torn",
]);

/** Events that may open a file: the module opening, or a new file after the old one was removed. */
export const OPENING_EVENTS: ReadonlySet<string> = new Set(["login_ok", "audit_reopened"]);

const FILE_NAME = /^audit\.log\.([0-9]{6})$/;
const MEMBER_NAME = /^[a-z][a-z0-9_]{0,63}$/;
/** Event and field names already found lower_snake_case: a few constants, checked once each. */
const knownNames = new Set<string>();
const KNOWN_NAMES_MAX = 1024;
const NON_ASCII = /[\u0080-\uffff]/;
/** Printable ASCII but `"` and `\`: JSON writes such a string as it is, in quotes. */
const PLAIN_STRING = /^[ !#-[\]-~]*$/;
const MAC_SUFFIX_HEAD = new TextEncoder().encode(`,"mac":"`);
/** `,"mac":"` + 64 hex digits + `"}`. */
export const MAC_SUFFIX_BYTES = MAC_SUFFIX_HEAD.length + 2 * MAC_BYTES + 2;

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const lossyUtf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * The file name for number `n`: `audit.log.` and six digits.
 *
 * @example
 * ```ts
 * auditFileName(3); // "audit.log.000003"
 * ```
 */
export function auditFileName(n: number): string {
  if (!Number.isInteger(n) || n < 1 || n > 999_999) {
    throw new RangeError(
      `audit file number ${n} is out of range 1–999999: archive old files and renumber`,
    );
  }
  return `audit.log.${String(n).padStart(6, "0")}`;
}

/**
 * The number in an audit file name, or undefined when `name` is not `audit.log.NNNNNN`.
 *
 * @example
 * ```ts
 * auditFileNumber("audit.log.000012"); // 12
 * ```
 */
export function auditFileNumber(name: string): number | undefined {
  const m = FILE_NAME.exec(name);
  return m ? Number(m[1]) : undefined;
}

/**
 * Turns a byte string (one char per byte, as the HTTP layer hands headers over) into the JSON
 * members `"actor":…` and, when the bytes are not valid UTF-8, `"actor_bytes":"<base64>"`.
 *
 * Valid UTF-8 is stored decoded, so the log reads naturally and the bytes come back by UTF-8
 * encoding; anything else is stored lossily for reading plus exactly in base64.
 *
 * @example
 * ```ts
 * actorMembers("CN=caf\xc3\xa9"); // `"actor":"CN=café"`
 * actorMembers("CN=\xff");        // `"actor":"CN=\ufffd","actor_bytes":"Q049/w=="`
 * ```
 */
export function actorMembers(actor: string): string {
  if (typeof actor !== "string" || actor.length === 0) {
    throw new TypeError(
      "audit actor must be a non-empty string (the certificate subject, or 'svcd')",
    );
  }
  // ASCII bytes are valid UTF-8 that decodes to the same string: nothing to convert.
  if (!NON_ASCII.test(actor)) return `"actor":${JSON.stringify(actor)}`;
  const bytes = byteStringBytes(actor);
  try {
    return `"actor":${JSON.stringify(strictUtf8.decode(bytes))}`;
  } catch {
    const readable = JSON.stringify(lossyUtf8.decode(bytes));
    return `"actor":${readable},"actor_bytes":"${bytes.toBase64()}"`;
  }
}

/**
 * The original bytes of a parsed line's actor (the inverse of {@link actorMembers}).
 *
 * @example
 * ```ts
 * actorBytes({ actor: "CN=café" }); // UTF-8 bytes of "CN=café"
 * ```
 */
export function actorBytes(line: { actor: string; actor_bytes?: unknown }): Uint8Array {
  if (typeof line.actor_bytes === "string") return Uint8Array.fromBase64(line.actor_bytes);
  return utf8.encode(line.actor);
}

function byteStringBytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 0xff) {
      throw new RangeError(
        `audit actor has the character U+${c.toString(16).padStart(4, "0")} at ${i}: ` +
          "pass the header value as received (one char per byte), not decoded text",
      );
    }
    out[i] = c;
  }
  return out;
}

/**
 * The members that open a line: `{"event":…,"actor":…` (no closing brace).
 *
 * @example
 * ```ts
 * memberHead("sign", "CN=a"); // `{"event":"sign","actor":"CN=a"`
 * ```
 */
export function memberHead(event: string, actor: string): string {
  if (typeof event !== "string" || !isMemberName(event)) {
    throw new TypeError(
      `audit event ${JSON.stringify(event)} must be lower_snake_case, 1–64 chars`,
    );
  }
  return `{"event":${JSON.stringify(event)},${actorMembers(actor)}`;
}

/**
 * The members after `seq`: `,"time":…` then each field in the order given, undefined ones left out.
 *
 * @example
 * ```ts
 * memberTail(new Date(0), { key: "k1", ok: true }); // `,"time":"1970-01-01T00:00:00.000Z","key":"k1","ok":true`
 * ```
 */
export function memberTail(
  time: Date,
  fields: Record<string, unknown> = {},
  reserved = RESERVED_MEMBERS,
): string {
  let out = `,"time":"${isoTime(time)}"`;
  for (const name in fields) {
    if (!Object.hasOwn(fields, name)) continue;
    const value = fields[name];
    if (value === undefined) continue;
    if (reserved.has(name) || RESERVED_MEMBERS.has(name)) {
      throw new TypeError(`audit field '${name}' is written by the log itself; rename the field`);
    }
    if (!isMemberName(name)) {
      throw new TypeError(
        `audit field name ${JSON.stringify(name)} must be lower_snake_case, 1–64 chars`,
      );
    }
    out += `,"${name}":${jsonValue(name, value)}`;
  }
  return out;
}

let isoSecond = NaN;
let isoPrefix = "";

/** `time.toISOString()`; the part up to the seconds is made once per second (it costs ~1.5 µs). */
function isoTime(time: Date): string {
  const ms = time.getTime();
  const second = Math.floor(ms / 1000);
  if (second !== isoSecond) {
    const iso = time.toISOString(); // a RangeError for an invalid date, as before
    isoSecond = second;
    isoPrefix = iso.slice(0, -4); // through the "." before the milliseconds
    return iso;
  }
  const milli = ms - second * 1000;
  return isoPrefix + (milli < 10 ? "00" : milli < 100 ? "0" : "") + milli + "Z";
}

function isMemberName(name: string): boolean {
  if (knownNames.has(name)) return true;
  if (!MEMBER_NAME.test(name)) return false;
  if (knownNames.size < KNOWN_NAMES_MAX) knownNames.add(name);
  return true;
}

function jsonValue(name: string, value: unknown): string {
  if (typeof value === "string" && PLAIN_STRING.test(value)) return `"${value}"`;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new TypeError(
      `audit field '${name}' cannot be written as JSON: ${(err as Error).message}`,
    );
  }
  if (text === undefined) {
    throw new TypeError(`audit field '${name}' has no JSON form (a function or symbol?)`);
  }
  return text;
}

/**
 * The line without its MAC, as the MAC covers it: head, `"seq"`, tail, `"prev"`, closing brace.
 *
 * @example
 * ```ts
 * lineBody(`{"event":"x","actor":"svcd"`, 1, `,"time":"…"`, ZERO_MAC); // `{…,"seq":1,"time":"…","prev":"00…"}`
 * ```
 */
export function lineBody(head: string, seq: number, tail: string, prev: Uint8Array): string {
  return `${head},"seq":${seq}${tail},"prev":"${prev.toHex()}"}`;
}

/**
 * What the chain MAC is computed over: the previous line's MAC (32 raw bytes) ‖ the body's UTF-8.
 *
 * @example
 * ```ts
 * const mac = await keys.mac(macInput(prevMac, utf8Body));
 * ```
 */
export function macInput(prev: Uint8Array, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(prev.length + body.length);
  out.set(prev);
  out.set(body, prev.length);
  return out;
}

/**
 * The full line as written: the body with `,"mac":"<hex>"` before its closing brace, and `\n`.
 *
 * @example
 * ```ts
 * lineBytes(bodyBytes, mac); // {…,"prev":"…","mac":"…"}\n
 * ```
 */
export function lineBytes(body: Uint8Array, mac: Uint8Array): Uint8Array {
  const suffix = utf8.encode(`,"mac":"${mac.toHex()}"}\n`);
  const out = new Uint8Array(body.length - 1 + suffix.length);
  out.set(body.subarray(0, body.length - 1));
  out.set(suffix, body.length - 1);
  return out;
}

/**
 * The MAC input of a line — the previous MAC (32 raw bytes) ‖ the body's UTF-8, as
 * {@link macInput} gives it — in a buffer with room after it for the MAC member, so that
 * {@link writtenLine} can finish the line in place: one buffer and one encoding per line.
 *
 * @example
 * ```ts
 * const input = macInputWithRoom(prevMac, lineBody(head, seq, tail, prevMac));
 * const line = writtenLine(input, await keys.mac(input));
 * ```
 */
export function macInputWithRoom(prev: Uint8Array, body: string): Uint8Array {
  // A UTF-16 code unit takes at most 3 bytes of UTF-8.
  const buf = slabBytes(prev.length + body.length * 3 + MAC_SUFFIX_BYTES + 1);
  buf.set(prev);
  const { written } = utf8.encodeInto(body, buf.subarray(prev.length));
  return buf.subarray(0, prev.length + written);
}

/**
 * The line as written (the same bytes as {@link lineBytes}) from a {@link macInputWithRoom} result
 * and the line's MAC, built in the same buffer: the MAC member replaces the body's closing brace.
 *
 * @example
 * ```ts
 * writtenLine(input, mac); // {…,"prev":"…","mac":"…"}\n
 * ```
 */
export function writtenLine(input: Uint8Array, mac: Uint8Array): Uint8Array {
  const braceAt = input.byteOffset + input.length - 1;
  const suffix = new Uint8Array(input.buffer, braceAt, MAC_SUFFIX_BYTES + 1);
  const { written } = utf8.encodeInto(`,"mac":"${mac.toHex()}"}\n`, suffix);
  if (written !== suffix.length) throw new Error("audit line buffer too small for its MAC");
  return new Uint8Array(
    input.buffer,
    input.byteOffset + MAC_BYTES,
    input.length - 1 - MAC_BYTES + written,
  );
}

/**
 * Splits a written line (without its `\n`) into the body the MAC covers and the MAC it carries;
 * undefined when the line does not end in `,"mac":"<64 lowercase hex>"}`.
 *
 * @example
 * ```ts
 * const parts = splitMac(line); // { body, mac } or undefined
 * ```
 */
export function splitMac(line: Uint8Array): { body: Uint8Array; mac: Uint8Array } | undefined {
  if (line.length < MAC_SUFFIX_BYTES + 2) return undefined;
  const at = line.length - MAC_SUFFIX_BYTES;
  for (let i = 0; i < MAC_SUFFIX_HEAD.length; i++) {
    if (line[at + i] !== MAC_SUFFIX_HEAD[i]) return undefined;
  }
  const hexStart = at + MAC_SUFFIX_HEAD.length;
  const hex = latin1(line.subarray(hexStart, hexStart + 2 * MAC_BYTES));
  if (!/^[0-9a-f]{64}$/.test(hex)) return undefined;
  if (line[line.length - 2] !== 0x22 || line[line.length - 1] !== 0x7d) return undefined;
  const body = new Uint8Array(at + 1);
  body.set(line.subarray(0, at));
  body[at] = 0x7d;
  return { body, mac: Uint8Array.fromHex(hex) };
}

/** What a checkpoint signs: a chain head in one file, and the SHA-256 of the file up to it. */
export interface CheckpointClaim {
  file: string;
  seq: number;
  mac: Uint8Array;
  size: number;
  sha256: Uint8Array;
}

/**
 * The exact bytes an Ed25519 checkpoint signature covers (ASCII, one line, no newline).
 *
 * @example
 * ```ts
 * checkpointMessage({ file: "audit.log.000001", seq: 1000, mac, size: 301234, sha256 });
 * // "svcd-audit-checkpoint-v1 file=audit.log.000001 seq=1000 mac=… size=301234 sha256=…"
 * ```
 */
export function checkpointMessage(c: CheckpointClaim): Uint8Array {
  return utf8.encode(
    `svcd-audit-checkpoint-v1 file=${c.file} seq=${c.seq} mac=${c.mac.toHex()} size=${c.size} ` +
      `sha256=${c.sha256.toHex()}`,
  );
}
