/**
 * Fuzzing of the file and DER parsers, in process: the policy file (lib/policy), OpenSSL's
 * index.txt (lib/ocsp/index_db.ts), the DER reader (lib/der/read.ts) and the OCSP request parser
 * (lib/ocsp/request.ts). POST /ocsp over the real public socket is fuzzed by public_fuzz.ts.
 * Inputs are valid files or encodings, then mutated, plus plain random bytes. The oracle: no
 * exception other than the parser's own error type; what parses round-trips (its grants / lines
 * written back parse to the same thing); an error names a line that exists. An OCSP request
 * lib/ocsp accepts must also be accepted by Python cryptography's strict parser (checked in one
 * batch after the run, on a sample of up to `PYCA_SAMPLE` accepted inputs).
 *
 * Adding a parser: write a `ParserFuzzer` —
 * `generate` a valid input, `check` one input and return a finding or undefined — and add it to
 * `PARSER_FUZZERS`; `make fuzz` and the CI slice then run it.
 *
 * @example
 * ```ts
 * for (const r of fuzzParsers({ seed: 1, cases: 1000 })) console.log(r.name, r.findings.length);
 * ```
 */
import { concat, latin1 } from "../../lib/bytes/mod.ts";
import { grantsInFileOrder, parsePolicyText } from "../../lib/policy/parse.ts";
import { Policy, PolicyError } from "../../lib/policy/mod.ts";
import {
  formatIndexLine,
  IndexFormatError,
  parseIndex,
  parseIndexLine,
  REASON_NAME,
} from "../../lib/ocsp/index_db.ts";
import {
  boolean,
  DerError,
  DerReader,
  enumerated,
  explicit,
  generalizedTime,
  integer,
  octetString,
  oid,
  sequence,
  TAG,
  tlv,
} from "../../lib/der/mod.ts";
import {
  CERT_ID_HASHES,
  encodeCertId,
  encodeOcspRequest,
  type HashName,
  MalformedRequest,
  NONCE_MAX,
  parseOcspRequest,
} from "../../lib/ocsp/request.ts";
import { Prng } from "./prng.ts";
import { pycaOcspRequestVerdicts } from "../support/pyca.ts";

/** One parser under fuzz. */
export interface ParserFuzzer {
  name: string;
  /** A valid input. */
  generate(rng: Prng): Uint8Array;
  /** A finding for this input, or undefined. `valid` says it came unmutated from `generate`. */
  check(input: Uint8Array, valid: boolean): string | undefined;
  /** Findings of checks batched over the whole run (called once, after the last input). */
  afterRun?(): Array<{ finding: string; bytes: Uint8Array }>;
}

/** What one parser's run found. */
export interface ParserReport {
  name: string;
  cases: number;
  summary: string;
  findings: Array<{ finding: string; bytes: Uint8Array; steps: string[] }>;
}

const te = new TextEncoder();

// ---- policy -------------------------------------------------------------------------------------

const SUBJECT_CHARS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=,/ .-_+\\"#';

function word(rng: Prng, chars: string, max: number): string {
  let s = "";
  const n = 1 + rng.int(max);
  for (let i = 0; i < n; i++) s += chars[rng.int(chars.length)];
  return s.trim() || "x";
}

const policyFuzzer: ParserFuzzer = {
  name: "policy (lib/policy/parse.ts)",
  generate(rng) {
    const lines: string[] = [];
    if (rng.chance(0.05)) lines.push("\xEF\xBB\xBF# bom");
    const n = rng.size(40);
    for (let i = 0; i < n; i++) {
      const r = rng.int(10);
      if (r === 0) lines.push(`# ${word(rng, SUBJECT_CHARS, 30)}`);
      else if (r === 1) lines.push("");
      else {
        const sep = rng.pick(["\t", "\t\t", " \t", "\t "]);
        lines.push(`${word(rng, SUBJECT_CHARS, 60)}${sep}${word(rng, "abcdefk0123456789-_.", 20)}`);
      }
    }
    const eol = rng.chance(0.2) ? "\r\n" : "\n";
    return Uint8Array.from(lines.join(eol) + (rng.chance(0.9) ? eol : ""), (c) => c.charCodeAt(0));
  },
  check(input, valid) {
    let parsed;
    try {
      parsed = parsePolicyText(latin1(input), "fuzz");
    } catch (err) {
      return `parsePolicyText threw ${(err as Error).name}: ${(err as Error).message}`;
    }
    const lineCount = latin1(input).split("\n").length;
    for (const e of parsed.errors) {
      if (!(e.line >= 1 && e.line <= lineCount) || !e.message) {
        return `error without a line: ${JSON.stringify(e)}`;
      }
    }
    try {
      Policy.parse(input, "fuzz");
      if (parsed.errors.length > 0) return "Policy.parse accepted what parsePolicyText refused";
    } catch (err) {
      if (!(err instanceof PolicyError)) return `Policy.parse threw ${(err as Error).name}`;
      if (parsed.errors.length === 0) return "Policy.parse refused what parsePolicyText accepted";
    }
    if (valid && parsed.errors.length > 0) {
      return `a valid policy refused: ${parsed.errors[0].message}`;
    }
    if (parsed.errors.length > 0) return undefined;
    const grants = grantsInFileOrder(parsed);
    for (const g of grants) {
      // deno-lint-ignore no-control-regex -- control bytes are exactly what this looks for
      const bad = /[\x00-\x1f\x7f]|^[ ]|[ ]$/;
      if (!g.subject || !g.label || bad.test(g.subject) || bad.test(g.label)) {
        return `grant with a field no header could carry: ${JSON.stringify(g)}`;
      }
    }
    // Written back as plain lines, the grants parse to exactly the same list.
    // After a comment line: a grant whose subject starts with the bytes of a BOM keeps them.
    const again = parsePolicyText(
      "# written back\n" + grants.map((g) => `${g.subject}\t${g.label}\n`).join(""),
      "again",
    );
    const back = grantsInFileOrder(again);
    const same = again.errors.length === 0 && back.length === grants.length &&
      back.every((g, i) => g.subject === grants[i].subject && g.label === grants[i].label);
    return same ? undefined : "the grants written back do not parse to the same grants";
  },
};

// ---- index.txt ---------------------------------------------------------------------------------

const indexFuzzer: ParserFuzzer = {
  name: "index.txt (lib/ocsp/index_db.ts)",
  generate(rng) {
    const n = rng.size(30);
    let text = "";
    for (let i = 0; i < n; i++) {
      const status = rng.pick(["V", "R", "E"] as const);
      const expires = Date.UTC(
        2000 + rng.int(80),
        rng.int(12),
        1 + rng.int(28),
        rng.int(24),
        rng.int(60),
        rng.int(60),
      );
      text += formatIndexLine({
        status,
        expires,
        revokedAt: status === "R"
          ? Date.UTC(1990 + rng.int(59), rng.int(12), 1 + rng.int(28))
          : undefined,
        reason: status === "R" && rng.chance(0.7)
          ? rng.pick(Object.keys(REASON_NAME).map(Number))
          : undefined,
        // Unique per file (a repeated serial is refused): the line number, then random hex.
        serial: (i + 1).toString(16).padStart(4, "0") +
          Array.from(rng.bytes(8), (b) => b.toString(16).padStart(2, "0")).join(""),
        file: rng.chance(0.8) ? "unknown" : word(rng, "abc0123.pem", 10),
        subject: `/C=DE/O=${word(rng, "abcdefXYZ ", 12)}/CN=${word(rng, "abcdef0123.-", 20)}`,
      });
    }
    return te.encode(text);
  },
  check(input, valid) {
    const text = latin1(input);
    let entries;
    try {
      entries = parseIndex(text);
    } catch (err) {
      if (err instanceof IndexFormatError) {
        return valid ? `a file formatIndexLine wrote is refused: ${err.message}` : undefined;
      }
      return `parseIndex threw ${(err as Error).name}: ${(err as Error).message}`;
    }
    for (const e of entries) {
      let line: string;
      try {
        line = formatIndexLine(e);
      } catch {
        continue; // a field formatIndexLine will not write (a reason OpenSSL has no name for)
      }
      const back = parseIndexLine(line.slice(0, -1), e.line);
      for (
        const k of [
          "status",
          "expires",
          "revokedAt",
          "reason",
          "serial",
          "file",
          "subject",
        ] as const
      ) {
        if (back[k] !== e[k]) {
          return `line ${e.line} does not round-trip: ${k} ${e[k]} → ${back[k]}`;
        }
      }
    }
    return undefined;
  },
};

// ---- DER (the reader OCSP requests go through) -------------------------------------------------

function derTree(rng: Prng, depth: number): Uint8Array {
  const r = depth > 5 ? rng.int(6) : rng.int(9);
  switch (r) {
    case 0:
      return integer(rng.int(1 << 30));
    case 1:
      return oid(
        rng.pick(["1.3.6.1.5.5.7.48.1.1", "2.16.840.1.101.3.4.2.1", "1.3.101.112", "2.5.4.3"]),
      );
    case 2:
      return octetString(rng.bytes(rng.size(64)));
    case 3:
      return boolean(rng.chance(0.5));
    case 4:
      return enumerated(rng.int(10));
    case 5:
      return generalizedTime(Date.UTC(2000 + rng.int(40), rng.int(12), 1 + rng.int(28)));
    case 6:
      return explicit(rng.int(4), derTree(rng, depth + 1));
    default: {
      const n = rng.int(4);
      return sequence(...Array.from({ length: n }, () => derTree(rng, depth + 1)));
    }
  }
}

/** Walks every element the way a schema-driven parser would, reading primitives by their tag. */
function walk(r: DerReader): void {
  while (!r.done) {
    const tag = r.peekTag();
    if (tag === TAG.SEQUENCE || tag === TAG.SET || (tag & 0xe0) === 0xa0) {
      walk(r.enter(tag));
      continue;
    }
    switch (tag) {
      case TAG.INTEGER:
        r.readIntegerBytes();
        break;
      case TAG.OID:
        r.readOid();
        break;
      case TAG.OCTET_STRING:
        r.readOctetString();
        break;
      case TAG.BOOLEAN:
        r.readBoolean();
        break;
      case TAG.ENUMERATED:
        r.readEnumerated();
        break;
      case TAG.NULL:
        r.readNull();
        break;
      case TAG.GENERALIZED_TIME:
      case TAG.UTC_TIME:
        r.readTime();
        break;
      default:
        r.next();
    }
  }
  r.finish();
}

const derFuzzer: ParserFuzzer = {
  name: "DER reader (lib/der/read.ts)",
  generate(rng) {
    // The shape of an OCSPRequest (RFC 6960 §4.1.1) or any tree.
    if (rng.chance(0.5)) {
      const certId = sequence(
        sequence(oid("1.3.14.3.2.26"), tlv(TAG.NULL, new Uint8Array())),
        octetString(rng.bytes(20)),
        octetString(rng.bytes(20)),
        integer(rng.int(1 << 30)),
      );
      return sequence(
        sequence(sequence(sequence(certId)), ...(rng.chance(0.5) ? [explicit(2, sequence())] : [])),
      );
    }
    return derTree(rng, 0);
  },
  check(input) {
    try {
      walk(new DerReader(input));
    } catch (err) {
      if (err instanceof DerError) return undefined;
      return `DerReader threw ${(err as Error).name}: ${(err as Error).message}`;
    }
    return undefined;
  },
};

// ---- OCSP requests (RFC 6960 §4.1.1) -------------------------------------------------------------

/** The certIds and nonce each generated request was built from, keyed by its encoding. */
const builtFrom = new Map<string, { certIds: Uint8Array[]; nonce: Uint8Array | null }>();

/** Accepted OCSP requests handed to Python cryptography after a run, at most this many. */
export const PYCA_SAMPLE = 600;
const acceptedSample: Uint8Array[] = [];

const set = (...parts: Uint8Array[]) => tlv(TAG.SET, concat(parts));

// A requestorName: dNSName, or a directoryName of one or two RDNs (two values in DER order).
function requestorName(rng: Prng): Uint8Array {
  if (rng.chance(0.3)) return explicit(1, tlv(0x82, te.encode(word(rng, "abc.-1", 20))));
  const atv = (type: string) =>
    sequence(oid(type), tlv(TAG.UTF8_STRING, te.encode(word(rng, SUBJECT_CHARS, 20))));
  const rdns = [set(atv("2.5.4.3"))];
  if (rng.chance(0.5)) rdns.unshift(set(atv("2.5.4.10")));
  return explicit(1, explicit(4, sequence(...rdns)));
}

// optionalSignature without certificates: ecdsa-with-SHA256 over nothing in particular (the
// signature is not checked, only its structure).
function signature(rng: Prng): Uint8Array {
  const bits = tlv(TAG.BIT_STRING, concat([Uint8Array.of(0), rng.bytes(8 + rng.int(64))]));
  return explicit(0, sequence(sequence(oid("1.2.840.10045.4.3.2")), bits));
}

const ocspRequestFuzzer: ParserFuzzer = {
  name: "OCSP request (lib/ocsp/request.ts)",
  generate(rng) {
    const hashes = Object.keys(CERT_ID_HASHES) as HashName[];
    const certIds = Array.from({ length: 1 + rng.int(3) }, () => {
      const hash = rng.pick(hashes);
      const serial = rng.bytes(1 + rng.int(20));
      serial[0] = 1 + (serial[0] & 0x7e); // positive, no leading zero octet
      return encodeCertId({
        hash,
        issuerNameHash: rng.bytes(CERT_ID_HASHES[hash].length),
        issuerKeyHash: rng.bytes(CERT_ID_HASHES[hash].length),
        serial,
        nullParameters: rng.chance(0.8),
      });
    });
    const nonce = rng.chance(0.5) ? rng.bytes(1 + rng.int(NONCE_MAX)) : null;
    let der = encodeOcspRequest({ certIds, nonce });
    if (rng.chance(0.3)) {
      const outer = new DerReader(der).enter(TAG.SEQUENCE);
      const tbs = outer.enter(TAG.SEQUENCE);
      const tbsContent = tbs.bytes.subarray(tbs.offset, tbs.end);
      const named = rng.chance(0.7) ? concat([requestorName(rng), tbsContent]) : tbsContent;
      der = sequence(sequence(named), ...(rng.chance(0.6) ? [signature(rng)] : []));
    }
    builtFrom.clear(); // only the latest valid input is checked against its parts
    builtFrom.set(der.toHex(), { certIds, nonce });
    return der;
  },
  check(input, valid) {
    let parsed;
    try {
      parsed = parseOcspRequest(input);
    } catch (err) {
      if (!(err instanceof MalformedRequest)) {
        return `parseOcspRequest threw ${(err as Error).name}: ${(err as Error).message}`;
      }
      return valid ? `a request encodeOcspRequest wrote is refused: ${err.message}` : undefined;
    }
    if (acceptedSample.length < PYCA_SAMPLE && (!valid || acceptedSample.length % 4 === 0)) {
      acceptedSample.push(input);
    }
    const parts = valid ? builtFrom.get(input.toHex()) : undefined;
    if (!parts) return undefined;
    const same = parsed.certIds.length === parts.certIds.length &&
      parsed.certIds.every((c, i) => c.der.toHex() === parts.certIds[i].toHex()) &&
      (parsed.nonce?.toHex() ?? null) === (parts.nonce?.toHex() ?? null);
    return same ? undefined : "the parsed request is not what was encoded";
  },
  afterRun() {
    const sample = acceptedSample.splice(0);
    const verdicts = pycaOcspRequestVerdicts(sample);
    return sample.flatMap((bytes, i) =>
      verdicts[i] === "ok"
        ? []
        : [{ finding: `accepted, but Python cryptography ${verdicts[i]}`, bytes }]
    );
  },
};

/** Every parser the campaign feeds. */
export const PARSER_FUZZERS: readonly ParserFuzzer[] = [
  policyFuzzer,
  indexFuzzer,
  derFuzzer,
  ocspRequestFuzzer,
];

const SPECIAL = [
  "\t",
  "\n",
  "\r",
  "\r\n",
  "\0",
  "#",
  " ",
  "\xEF\xBB\xBF",
  "\x85",
  "\xff",
  "\x30\x82",
  "\x80",
];

/**
 * Damage to an input: flips, inserts, deletes, repeats, truncation, or random bytes outright.
 *
 * @example
 * ```ts
 * import { Prng } from "./prng.ts";
 * declare const der: Uint8Array, steps: string[];
 * const damaged = mutate(new Prng(1), der, steps);
 * ```
 */
export function mutate(rng: Prng, input: Uint8Array, steps: string[]): Uint8Array {
  if (rng.chance(0.1)) {
    steps.push("random");
    return rng.bytes(rng.size(4096));
  }
  let b = input;
  const n = 1 + rng.int(5);
  for (let k = 0; k < n; k++) {
    const at = rng.int(b.length + 1);
    const kind = rng.int(5);
    steps.push(`${["flip", "insert", "delete", "repeat", "cut"][kind]}@${at}`);
    if (kind === 0 && b.length > 0) {
      b = b.slice();
      b[Math.min(at, b.length - 1)] ^= 1 << rng.int(8);
    } else if (kind === 1) {
      const s = rng.pick(SPECIAL);
      b = concat([b.subarray(0, at), Uint8Array.from(s, (c) => c.charCodeAt(0)), b.subarray(at)]);
    } else if (kind === 2) {
      b = concat([b.subarray(0, at), b.subarray(at + 1 + rng.int(8))]);
    } else if (kind === 3) {
      b = concat([b.subarray(0, at + 1 + rng.int(40)), b.subarray(at)]);
    } else {
      b = b.subarray(0, at);
    }
  }
  return b;
}

/**
 * Runs `cases` inputs through each parser (a quarter of them unmutated).
 *
 * @example
 * ```ts
 * const reports = fuzzParsers({ seed: 3, cases: 500 });
 * ```
 */
export function fuzzParsers(o: { seed: number; cases: number }): ParserReport[] {
  return PARSER_FUZZERS.map((p, which) => {
    const rng = new Prng((o.seed * 31 + which * 7919) >>> 0);
    const report: ParserReport = { name: p.name, cases: 0, summary: "", findings: [] };
    let slowest = 0;
    for (let i = 0; i < o.cases; i++) {
      const steps: string[] = [];
      const valid = rng.chance(0.25);
      const base = p.generate(rng);
      const input = valid ? base : mutate(rng, base, steps);
      const started = performance.now();
      const finding = p.check(input, valid);
      slowest = Math.max(slowest, performance.now() - started);
      report.cases++;
      if (finding) report.findings.push({ finding: `${p.name}: ${finding}`, bytes: input, steps });
    }
    for (const f of p.afterRun?.() ?? []) {
      report.findings.push({ finding: `${p.name}: ${f.finding}`, bytes: f.bytes, steps: [] });
    }
    report.summary = `${report.findings.length} findings, slowest ${slowest.toFixed(1)} ms`;
    return report;
  });
}
