/**
 * The bytes of an audit line (written, and read back by {@link parseLine}) and the names of audit
 * files: one definition shared by the writer ({@link ./log.ts}) and the verifier
 * ({@link ./verify.ts}), so the two cannot disagree. The format is described for operators in ./README.md.
 *
 * @example
 * ```ts
 * const body = lineBody(memberHead("sign", "CN=alice"), 7, memberTail(new Date(), { key: "k" }), ZERO_MAC);
 * // {"event":"sign","actor":"CN=alice","seq":7,"time":"…","key":"k","prev":"000…0"}
 * ```
 */
import { latin1 } from "../bytes/mod.ts";
import { createHash } from "node:crypto";
import { slabBytes } from "./slab.ts";

/** Length in bytes of every chain value, hash and MAC (SHA-256, HMAC-SHA256). */
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
  "hash",
  "seal",
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
const MAC_HEAD = new TextEncoder().encode(`,"mac":"`);
const HASH_HEAD = new TextEncoder().encode(`,"hash":"`);
const SEAL_HEAD = new TextEncoder().encode(`,"seal":"`);
/** A member `,"name":"<64 hex>"` in bytes. */
const memberBytes = (head: Uint8Array) => head.length + 2 * MAC_BYTES + 1;
const MAC_MEMBER_BYTES = memberBytes(MAC_HEAD);
const HASH_MEMBER_BYTES = memberBytes(HASH_HEAD);
const SEAL_MEMBER_BYTES = memberBytes(SEAL_HEAD);
/** Room a line's buffer keeps after its body: both members, `}` and `\n`. */
const TRAILER_ROOM = HASH_MEMBER_BYTES + SEAL_MEMBER_BYTES + 2;
const LOWER_HEX_64 = /^[0-9a-f]{64}$/;
/** The label a seal's HMAC input starts with (ASCII, no newline). */
const SEAL_LABEL = new TextEncoder().encode("svcd-audit-seal-v2 ");

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

/**
 * `time.toISOString()`; the part up to the seconds is made once per second, since formatting a
 * whole date costs more than the rest of a line's time member and a second holds many lines.
 */
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
 * What a line's chain value covers: the previous line's chain value (32 raw bytes) ‖ the body's
 * UTF-8. A v2 line's `hash` is SHA-256 of it; a v1 line's `mac` was HMAC-SHA256 of it.
 *
 * @example
 * ```ts
 * declare const prevValue: Uint8Array, utf8Body: Uint8Array;
 * const hash = lineHash(chainInput(prevValue, utf8Body));
 * ```
 */
export function chainInput(prev: Uint8Array, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(prev.length + body.length);
  out.set(prev);
  out.set(body, prev.length);
  return out;
}

/**
 * The SHA-256 of a v2 line: its chain value (what the next line's `prev` names).
 *
 * @example
 * ```ts
 * declare const prev: Uint8Array, body: Uint8Array;
 * const hash = lineHash(chainInput(prev, body)); // 32 bytes
 * ```
 */
export function lineHash(input: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha256").update(input).digest());
}

/**
 * What a seal's HMAC covers: an ASCII label and the chain value of the sealed line. Never the
 * same length as a v1 MAC input (32 bytes ‖ a non-empty body), so neither can stand for the other.
 *
 * @example
 * ```ts
 * import type { AuditKeys } from "./log.ts";
 * declare const keys: AuditKeys, hash: Uint8Array;
 * const seal = await keys.mac(sealInput(hash));
 * ```
 */
export function sealInput(hash: Uint8Array): Uint8Array {
  const out = new Uint8Array(SEAL_LABEL.length + hash.length);
  out.set(SEAL_LABEL);
  out.set(hash, SEAL_LABEL.length);
  return out;
}

/**
 * A v1 line as written: the body with `,"mac":"<hex>"` before its closing brace, and `\n`. Only
 * logs written before the seals had these; {@link splitTrailer} still reads them.
 *
 * @example
 * ```ts
 * declare const bodyBytes: Uint8Array, mac: Uint8Array;
 * lineBytesV1(bodyBytes, mac); // {…,"prev":"…","mac":"…"}\n
 * ```
 */
export function lineBytesV1(body: Uint8Array, mac: Uint8Array): Uint8Array {
  return withTrailer(body, `,"mac":"${mac.toHex()}"}\n`);
}

/**
 * A v2 line as written: the body with `,"hash":"<hex>"` (and `,"seal":"<hex>"` when it ends its
 * group) before its closing brace, and `\n`.
 *
 * @example
 * ```ts
 * declare const bodyBytes: Uint8Array, hash: Uint8Array, seal: Uint8Array;
 * lineBytes(bodyBytes, hash, seal); // {…,"prev":"…","hash":"…","seal":"…"}\n
 * ```
 */
export function lineBytes(body: Uint8Array, hash: Uint8Array, seal?: Uint8Array): Uint8Array {
  const sealMember = seal ? `,"seal":"${seal.toHex()}"` : "";
  return withTrailer(body, `,"hash":"${hash.toHex()}"${sealMember}}\n`);
}

function withTrailer(body: Uint8Array, trailer: string): Uint8Array {
  const suffix = utf8.encode(trailer);
  const out = new Uint8Array(body.length - 1 + suffix.length);
  out.set(body.subarray(0, body.length - 1));
  out.set(suffix, body.length - 1);
  return out;
}

/**
 * The chain input of a line — the previous chain value (32 raw bytes) ‖ the body's UTF-8, as
 * {@link chainInput} gives it — in a buffer with room after it for the `hash` and `seal` members,
 * so that {@link hashedLine} and {@link sealedLine} finish the line in place: one buffer and one
 * encoding per line.
 *
 * @example
 * ```ts
 * declare const prev: Uint8Array, head: string, seq: number, tail: string;
 * const input = chainInputWithRoom(prev, lineBody(head, seq, tail, prev));
 * const line = hashedLine(input, lineHash(input));
 * ```
 */
export function chainInputWithRoom(prev: Uint8Array, body: string): Uint8Array {
  // A UTF-16 code unit takes at most 3 bytes of UTF-8.
  const buf = slabBytes(prev.length + body.length * 3 + TRAILER_ROOM);
  buf.set(prev);
  const { written } = utf8.encodeInto(body, buf.subarray(prev.length));
  return buf.subarray(0, prev.length + written);
}

/**
 * The line as written without a seal (the same bytes as {@link lineBytes} without one) from a
 * {@link chainInputWithRoom} result and its hash, built in the same buffer.
 *
 * @example
 * ```ts
 * declare const input: Uint8Array, hash: Uint8Array;
 * hashedLine(input, hash); // {…,"prev":"…","hash":"…"}\n
 * ```
 */
export function hashedLine(input: Uint8Array, hash: Uint8Array): Uint8Array {
  const braceAt = input.byteOffset + input.length - 1;
  const room = new Uint8Array(input.buffer, braceAt, HASH_MEMBER_BYTES + 2);
  const { written } = utf8.encodeInto(`,"hash":"${hash.toHex()}"}\n`, room);
  if (written !== room.length) throw new Error("audit line buffer too small for its hash");
  return new Uint8Array(
    input.buffer,
    input.byteOffset + MAC_BYTES,
    input.length - 1 - MAC_BYTES + written,
  );
}

/**
 * A {@link hashedLine} with the group's seal added in place (its buffer has the room): the line
 * then ends `,"hash":"…","seal":"…"}\n`.
 *
 * @example
 * ```ts
 * import type { AuditKeys } from "./log.ts";
 * declare const keys: AuditKeys, line: Uint8Array, hash: Uint8Array;
 * const last = sealedLine(line, await keys.mac(sealInput(hash)));
 * ```
 */
export function sealedLine(line: Uint8Array, seal: Uint8Array): Uint8Array {
  const braceAt = line.byteOffset + line.length - 2;
  const room = new Uint8Array(line.buffer, braceAt, SEAL_MEMBER_BYTES + 2);
  const { written } = utf8.encodeInto(`,"seal":"${seal.toHex()}"}\n`, room);
  if (written !== room.length) throw new Error("audit line buffer too small for its seal");
  return new Uint8Array(line.buffer, line.byteOffset, line.length + SEAL_MEMBER_BYTES);
}

/** The end of a written line, split off: the body it covers and the values it carries. */
export interface LineTrailer {
  /** The line up to `prev` with its closing brace: what the chain value covers. */
  body: Uint8Array;
  /** 1: `"mac"` (HMAC of every line); 2: `"hash"` (SHA-256), plus `"seal"` at the end of a group. */
  version: 1 | 2;
  /** The chain value the next line's `prev` names: the v1 MAC or the v2 hash. */
  value: Uint8Array;
  /** The v2 seal (HMAC-SHA256 of {@link sealInput}), on the last line of each group. */
  seal?: Uint8Array;
}

/**
 * Splits a written line (without its `\n`) into the body and the values at its end; undefined
 * when it ends in none of `,"mac":"<hex>"}`, `,"hash":"<hex>"}`, `,"hash":"<hex>","seal":"<hex>"}`
 * (64 lowercase hex digits each).
 *
 * @example
 * ```ts
 * declare const line: Uint8Array;
 * const t = splitTrailer(line); // { body, version, value, seal? } or undefined
 * ```
 */
export function splitTrailer(line: Uint8Array): LineTrailer | undefined {
  const seal = memberAtEnd(line, line.length - 1, SEAL_HEAD);
  const valueEnd = seal ? line.length - 1 - SEAL_MEMBER_BYTES : line.length - 1;
  const hash = memberAtEnd(line, valueEnd, HASH_HEAD);
  const mac = seal || hash ? undefined : memberAtEnd(line, valueEnd, MAC_HEAD);
  const value = hash ?? mac;
  if (!value || line[line.length - 1] !== 0x7d) return undefined;
  const at = valueEnd - (hash ? HASH_MEMBER_BYTES : MAC_MEMBER_BYTES);
  const body = new Uint8Array(at + 1);
  body.set(line.subarray(0, at));
  body[at] = 0x7d;
  return hash ? { body, version: 2, value: hash, seal } : { body, version: 1, value };
}

/** The 32 bytes of `<head><64 hex>"` ending just before `end`, or undefined. */
function memberAtEnd(line: Uint8Array, end: number, head: Uint8Array): Uint8Array | undefined {
  const at = end - head.length - 2 * MAC_BYTES - 1;
  if (at < 1 || line[end - 1] !== 0x22) return undefined;
  for (let i = 0; i < head.length; i++) {
    if (line[at + i] !== head[i]) return undefined;
  }
  const hexStart = at + head.length;
  const hex = latin1(line.subarray(hexStart, hexStart + 2 * MAC_BYTES));
  return LOWER_HEX_64.test(hex) ? Uint8Array.fromHex(hex) : undefined;
}

/** A line's members, as {@link parseLine} read them. */
export interface AuditLine {
  event: string;
  actor: string;
  seq: number;
  time: string;
  prev: string;
  [member: string]: unknown;
}

/** A line parsed: its members, and the body and values at its end (see {@link splitTrailer}). */
export interface ParsedLine {
  line: AuditLine;
  body: Uint8Array;
  version: 1 | 2;
  value: Uint8Array;
  seal?: Uint8Array;
}

/**
 * Parses one line (without `\n`) into its members, the body its hash or MAC covers and the values
 * at its end, or says what is wrong with it.
 *
 * @example
 * ```ts
 * declare const bytes: Uint8Array;
 * const p = parseLine(bytes); // string = the reason it is not an audit line
 * ```
 */
export function parseLine(bytes: Uint8Array): ParsedLine | string {
  const parts = splitTrailer(bytes);
  if (!parts) return "not an audit line: it does not end with its hash or MAC";
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch (err) {
    return `not an audit line: ${(err as Error).message}`;
  }
  const line = value as AuditLine;
  if (typeof line !== "object" || line === null || Array.isArray(line)) {
    return "not an audit line: not a JSON object";
  }
  if (typeof line.event !== "string" || typeof line.actor !== "string" || line.actor === "") {
    return "not an audit line: event or actor is missing";
  }
  if (!Number.isSafeInteger(line.seq) || line.seq < 1) {
    return "not an audit line: seq is not a positive integer";
  }
  if (typeof line.time !== "string" || !isHex(line.prev, MAC_BYTES)) {
    return "not an audit line: time or prev is missing";
  }
  const name = parts.version === 1 ? "mac" : "hash";
  if (line[name] !== parts.value.toHex() || line.seal !== parts.seal?.toHex()) {
    return `not an audit line: its ${name} or seal member is not the value at its end`;
  }
  return { line, ...parts };
}

/**
 * Whether `x` is `bytes` bytes in lowercase hex, as every hash, MAC and seal is written.
 *
 * @example
 * ```ts
 * isHex("00ff", 2); // true
 * ```
 */
export function isHex(x: unknown, bytes: number): x is string {
  return typeof x === "string" && x.length === 2 * bytes && /^[0-9a-f]+$/.test(x);
}
