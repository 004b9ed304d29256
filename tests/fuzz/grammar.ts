/**
 * Grammar-based generation of requests for the authenticated socket: a valid /sign, /verify,
 * /health or /token request (or another route) built from the fixture's subjects, keys and known
 * signatures, then mutated at the grammar level (headers, request line, framing, chunks), at the
 * byte level, and at the tail (a pipelined second request, a cut). Case `i` of seed `s` is the same
 * bytes on every run, whatever the concurrency.
 *
 * @example
 * ```ts
 * declare const fixture: Fixture;
 * const c = generateCase(42, 7, fixture);
 * c.bytes; // what is written to the socket; c.writes: where the writes split it
 * ```
 */
import { concat } from "../../lib/bytes/mod.ts";
import { Prng } from "./prng.ts";

/** What the daemon under test holds: who may use which key, the keys, signatures to verify. */
export interface Fixture {
  grants: Record<string, string[]>;
  /** Every key on the token by label (granted or not), with its public key. */
  keys: Record<string, { keyType: string; raw: Uint8Array; spki?: Uint8Array }>;
  /** Valid signatures made at set-up, for /verify cases. */
  signatures: Array<{ label: string; message: Uint8Array; signature: Uint8Array }>;
}

/** One fuzz case: the bytes, how they are written, and what was done to make them. */
export interface FuzzCase {
  bytes: Uint8Array;
  /** Offsets where one write ends and the next begins (empty: one write). */
  writes: number[];
  /** Shut the write side after the last write (the daemon then sees EOF). */
  halfClose: boolean;
  /** The mutations applied, for the report of a finding. */
  steps: string[];
}

interface Model {
  method: string;
  target: string;
  version: string;
  headers: Array<[string, string]>;
  body: Uint8Array;
  framing: "length" | "chunked" | "none";
  /** Chunk sizes for the chunked framing, and text appended to each size line. */
  chunks: number[];
  chunkExt: string;
  hexUpper: boolean;
}

const te = new TextEncoder();
const SPECIAL = ["\r\n", "\n", "\r", ":", " ", "\t", "\0", "\x85", "\x7f", "\xff", ";", ",", "?"];
const ROUTES: Array<[string, string]> = [
  ["POST", "/sign"],
  ["POST", "/verify"],
  ["GET", "/health"],
  ["GET", "/token"],
];
const ODD_ROUTES: Array<[string, string]> = [
  ["GET", "/sign"],
  ["PUT", "/sign"],
  ["HEAD", "/health"],
  ["POST", "/health"],
  ["GET", "/certificates"],
  ["POST", "/ocsp"],
  ["GET", "/"],
  ["POST", "/sign/"],
  ["POST", "//sign"],
  ["POST", "/SIGN"],
  ["POST", "/%73ign"],
  ["POST", "/sign?x=1"],
  ["POST", "/sign#f"],
  ["OPTIONS", "*"],
  ["CONNECT", "svcd:443"],
  ["post", "/sign"],
  ["DELETE", "/token"],
];
const EXTRA_HEADERS: Array<[string, string]> = [
  ["User-Agent", "fuzz/1"],
  ["Accept", "*/*"],
  ["Connection", "close"],
  ["Connection", "keep-alive"],
  ["X-Forwarded-For", "127.0.0.1"],
  ["Content-Type", "application/octet-stream"],
  ["Expect", "100-continue"],
  ["Accept-Encoding", "gzip"],
  ["Upgrade", "h2c"],
  ["Trailer", "X-A"],
  ["X-SVC-Mechanism", "0x80004202"],
];

/**
 * Case `index` of `seed`: its own generator, so that cases are independent of each other.
 *
 * @example
 * ```ts
 * declare const fx: Fixture;
 * const same = generateCase(1, 5, fx).bytes; // identical on every call
 * ```
 */
export function generateCase(seed: number, index: number, fx: Fixture): FuzzCase {
  const rng = new Prng((seed * 0x9e3779b1 + index * 0x85ebca6b + 0x632be5ab) >>> 0);
  const steps: string[] = [];
  const m = baseRequest(rng, fx, steps);
  const grammarMutations = rng.chance(0.45) ? 0 : 1 + rng.int(3);
  for (let i = 0; i < grammarMutations; i++) {
    const mutation = rng.pick(MUTATIONS);
    steps.push(mutation.name);
    mutation(rng, m, fx);
  }
  let bytes = serialize(m);
  if (rng.chance(0.12)) bytes = byteMutation(rng, bytes, steps);
  if (rng.chance(0.05)) {
    const second = serialize(baseRequest(rng, fx, []));
    bytes = concat([bytes, rng.chance(0.3) ? second.subarray(0, rng.int(second.length)) : second]);
    steps.push("pipelined");
  }
  if (rng.chance(0.04)) {
    bytes = bytes.subarray(0, rng.int(bytes.length + 1));
    steps.push("cut");
  }
  const writes: number[] = [];
  if (rng.chance(0.3) && bytes.length > 1) {
    const n = 1 + rng.int(3);
    for (let i = 0; i < n; i++) writes.push(1 + rng.int(bytes.length - 1));
    writes.sort((a, b) => a - b);
  }
  return { bytes, writes: [...new Set(writes)], halfClose: rng.chance(0.1), steps };
}

function baseRequest(rng: Prng, fx: Fixture, steps: string[]): Model {
  const subjects = Object.keys(fx.grants);
  const [method, target] = rng.chance(0.88) ? rng.pick(ROUTES) : rng.pick(ODD_ROUTES);
  steps.push(`${method} ${target}`);
  const version = rng.chance(0.92) ? "HTTP/1.1" : "HTTP/1.0";
  const headers: Array<[string, string]> = [];
  if (version === "HTTP/1.1" || rng.chance(0.5)) headers.push(["Host", "svcd"]);
  const subject = rng.chance(0.8)
    ? rng.pick(subjects)
    : rng.pick(["CN=nobody,O=Example", "", "CN=fuzz ", "/CN=fuzz", "CN=fuzz\xe9"]);
  headers.push(["X-SVC-Client-Subject", subject]);
  const granted = fx.grants[subject] ?? [];
  const label = granted.length > 0 && rng.chance(0.8)
    ? rng.pick(granted)
    : rng.pick([...Object.keys(fx.keys), "no-such-key", "svc-audit", "svc-audit-sign", ""]);
  let body: Uint8Array = new Uint8Array();
  if (target.startsWith("/verify")) {
    const known = fx.signatures.filter((s) => s.label === label);
    const s = known.length > 0 ? rng.pick(known) : rng.pick(fx.signatures);
    const signature = s.signature.slice();
    let message = s.message;
    if (rng.chance(0.2)) signature[rng.int(signature.length)] ^= 1 << rng.int(8);
    if (rng.chance(0.2)) message = rng.bytes(rng.size(256));
    body = concat([signature, message]);
    headers.push(["X-SVC-Key", label]);
    headers.push(["X-SVC-Signature-Length", String(signature.length)]);
  } else if (method !== "GET" || rng.chance(0.05)) {
    body = rng.chance(0.5) ? rng.bytes(rng.size(4096)) : te.encode(`message ${rng.next()}`);
    headers.push(["X-SVC-Key", label]);
  }
  const extras = rng.int(3);
  for (let i = 0; i < extras; i++) {
    const [name, value] = rng.pick(EXTRA_HEADERS); // a copy: mutations edit header pairs in place
    headers.push([name, value]);
  }
  const framing = version === "HTTP/1.1" && body.length > 0 && rng.chance(0.15)
    ? "chunked"
    : method === "GET" && body.length === 0 && rng.chance(0.7)
    ? "none"
    : "length";
  if (framing === "length") headers.push(["Content-Length", String(body.length)]);
  if (framing === "chunked") headers.push(["Transfer-Encoding", "chunked"]);
  if (rng.chance(0.3)) shuffle(rng, headers);
  const chunks: number[] = [];
  for (let left = body.length; left > 0;) {
    const n = Math.min(left, 1 + rng.size(1024));
    chunks.push(n);
    left -= n;
  }
  return {
    method,
    target,
    version,
    headers,
    body,
    framing,
    chunks,
    chunkExt: "",
    hexUpper: rng.chance(0.5),
  };
}

function shuffle<T>(rng: Prng, items: T[]): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [items[i], items[j]] = [items[j], items[i]];
  }
}

/** The request's bytes: head, then the body as its framing says. */
function serialize(m: Model): Uint8Array {
  const head = `${m.method} ${m.target} ${m.version}\r\n` +
    m.headers.map(([n, v]) => n === "" ? `${v}\r\n` : `${n}:${v === "" ? "" : " "}${v}\r\n`)
      .join("") +
    "\r\n";
  const parts = [latin1Bytes(head)];
  if (m.framing !== "chunked") {
    parts.push(m.body);
  } else {
    let at = 0;
    for (const n of m.chunks) {
      const size = m.hexUpper ? n.toString(16).toUpperCase() : n.toString(16);
      parts.push(
        latin1Bytes(`${size}${m.chunkExt}\r\n`),
        m.body.subarray(at, at + n),
        te.encode("\r\n"),
      );
      at += n;
    }
    parts.push(latin1Bytes(`0${m.chunkExt}\r\n\r\n`));
  }
  return concat(parts);
}

function latin1Bytes(s: string): Uint8Array {
  return Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);
}

function randomText(rng: Prng, max: number): string {
  let s = "";
  const n = rng.size(max);
  for (let i = 0; i < n; i++) {
    s += rng.chance(0.15) ? rng.pick(SPECIAL) : String.fromCharCode(0x20 + rng.int(0x5f));
  }
  return s;
}

type Mutation = (rng: Prng, m: Model, fx: Fixture) => void;

function headerIndex(rng: Prng, m: Model): number {
  return m.headers.length === 0 ? -1 : rng.int(m.headers.length);
}

const MUTATIONS: Mutation[] = [
  function duplicateHeader(rng, m) {
    const i = headerIndex(rng, m);
    if (i < 0) return;
    const [n, v] = m.headers[i];
    m.headers.splice(rng.int(m.headers.length + 1), 0, [
      n,
      rng.chance(0.5) ? v : randomText(rng, 40),
    ]);
  },
  function dropHeader(rng, m) {
    const i = headerIndex(rng, m);
    if (i >= 0) m.headers.splice(i, 1);
  },
  function headerNameCase(rng, m) {
    const i = headerIndex(rng, m);
    if (i < 0) return;
    const n = m.headers[i][0];
    m.headers[i][0] = rng.chance(0.5) ? n.toLowerCase() : n.toUpperCase();
  },
  function valueWhitespace(rng, m) {
    const i = headerIndex(rng, m);
    if (i < 0) return;
    const ws = rng.pick([" ", "\t", "  ", " \t"]);
    m.headers[i][1] = rng.chance(0.5) ? m.headers[i][1] + ws : ws + m.headers[i][1];
  },
  function valueRandom(rng, m) {
    const i = headerIndex(rng, m);
    if (i >= 0) m.headers[i][1] = randomText(rng, 64);
  },
  function valueByteInside(rng, m) {
    const i = headerIndex(rng, m);
    if (i < 0) return;
    const v = m.headers[i][1];
    const at = rng.int(v.length + 1);
    m.headers[i][1] = v.slice(0, at) + String.fromCharCode(rng.int(256)) + v.slice(at);
  },
  function nameBroken(rng, m) {
    const i = headerIndex(rng, m);
    if (i < 0) return;
    m.headers[i][0] += rng.pick([" ", "\t", "(", "@", "\x7f", "é"]);
  },
  function obsFold(rng, m) {
    const i = headerIndex(rng, m);
    if (i >= 0) m.headers[i][1] += `\r\n${rng.pick([" ", "\t"])}folded`;
  },
  function headerWithoutColon(rng, m) {
    // An empty name writes the value as the whole line.
    m.headers.splice(rng.int(m.headers.length + 1), 0, ["", `X-No-Colon ${randomText(rng, 8)}`]);
  },
  function method(rng, m) {
    m.method = rng.pick([
      "GET",
      "POST",
      "post",
      "PATCH",
      "HEAD",
      "PRI",
      "POST ",
      "P\0ST",
      "",
      "SIGN",
    ]);
  },
  function target(rng, m) {
    m.target = rng.pick([
      "/sign",
      "/verify",
      "/sign?",
      "/sign?a=b",
      "/health/",
      "/token?x",
      "http://svcd/sign",
      "/sign%00",
      "/sig n",
      "/" + "a".repeat(rng.size(20000)),
      "/sign\t",
      "",
    ]);
  },
  function version(rng, m) {
    m.version = rng.pick([
      "HTTP/1.0",
      "HTTP/1.1",
      "HTTP/1.2",
      "HTTP/2.0",
      "HTTP/0.9",
      "http/1.1",
      "HTTP/1.1 ",
      "HTTP/1",
    ]);
  },
  function contentLength(rng, m) {
    const i = m.headers.findIndex(([n]) => n.toLowerCase() === "content-length");
    const n = m.body.length;
    const v = rng.pick([
      String(n + 1),
      String(Math.max(0, n - 1)),
      `+${n}`,
      `${n}, ${n}`,
      `0x${n.toString(16)}`,
      `-${n}`,
      `0${n}`,
      "99999999999999999999",
      `${n} `,
      "",
      String(2 ** 20 + 1),
    ]);
    if (i >= 0) m.headers[i][1] = v;
    else m.headers.push(["Content-Length", v]);
  },
  function secondContentLength(rng, m) {
    m.headers.push([
      "Content-Length",
      rng.chance(0.5) ? String(m.body.length) : String(rng.int(10)),
    ]);
  },
  function transferEncoding(rng, m) {
    m.headers.push([
      "Transfer-Encoding",
      rng.pick([
        "chunked",
        "Chunked",
        "gzip, chunked",
        "chunked, identity",
        "identity",
        " chunked",
        "chunked\t",
        "x",
      ]),
    ]);
  },
  function chunkExtension(rng, m) {
    m.chunkExt = rng.pick([";a=b", " ;x", ";\0", ";" + "e".repeat(rng.size(9000)), "\t", "x"]);
  },
  function chunkSizes(rng, m) {
    if (m.chunks.length > 0) m.chunks[rng.int(m.chunks.length)] += rng.pick([-1, 1, 4096]);
  },
  function hostHeader(rng, m) {
    const hosts = m.headers.filter(([n]) => n.toLowerCase() === "host").length;
    if (hosts > 0 && rng.chance(0.5)) {
      m.headers = m.headers.filter(([n]) => n.toLowerCase() !== "host");
    } else {
      m.headers.push(["Host", rng.pick(["svcd", "other", ""])]);
    }
  },
  function subjectHeader(rng, m, fx) {
    m.headers.push(["X-SVC-Client-Subject", rng.pick(Object.keys(fx.grants))]);
  },
  function keyHeader(rng, m, fx) {
    m.headers.push(["X-SVC-Key", rng.pick(Object.keys(fx.keys))]);
  },
  function signatureLength(rng, m) {
    const i = m.headers.findIndex(([n]) => n.toLowerCase() === "x-svc-signature-length");
    const v = rng.pick([
      "0",
      "-1",
      "16385",
      "1e3",
      " 64",
      "0064",
      String(m.body.length),
      String(m.body.length + 1),
      "",
      "99999999",
    ]);
    if (i >= 0) m.headers[i][1] = v;
    else m.headers.push(["X-SVC-Signature-Length", v]);
  },
  function largeHeader(rng, m) {
    m.headers.push(["X-Pad", "p".repeat(16384 - 64 + rng.int(128))]);
  },
  function manyHeaders(rng, m) {
    const n = 50 + rng.int(400);
    for (let i = 0; i < n; i++) m.headers.push([`X-H${i}`, "v"]);
  },
  function bodyChange(rng, m) {
    if (m.body.length > 0) {
      const b = m.body.slice();
      b[rng.int(b.length)] ^= 1 << rng.int(8);
      m.body = b;
    }
  },
];

/** Byte-level damage to the serialized request: flips, inserts, deletes, duplicated ranges. */
function byteMutation(rng: Prng, bytes: Uint8Array, steps: string[]): Uint8Array {
  const n = 1 + rng.int(4);
  let b = bytes;
  for (let k = 0; k < n; k++) {
    const at = rng.int(b.length + 1);
    switch (rng.int(4)) {
      case 0: {
        if (b.length === 0) break;
        b = b.slice();
        b[Math.min(at, b.length - 1)] ^= 1 << rng.int(8);
        steps.push(`flip@${at}`);
        break;
      }
      case 1: {
        const ins = rng.chance(0.5) ? latin1Bytes(rng.pick(SPECIAL)) : rng.bytes(1 + rng.int(8));
        b = concat([b.subarray(0, at), ins, b.subarray(at)]);
        steps.push(`insert@${at}`);
        break;
      }
      case 2: {
        const len = 1 + rng.int(16);
        b = concat([b.subarray(0, at), b.subarray(at + len)]);
        steps.push(`delete@${at}+${len}`);
        break;
      }
      default: {
        const len = 1 + rng.int(32);
        b = concat([b.subarray(0, at + len), b.subarray(at)]);
        steps.push(`repeat@${at}+${len}`);
      }
    }
  }
  return b;
}
