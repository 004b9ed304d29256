/**
 * Distinguished names for the CA tool: the RFC 4514 string nginx writes in `$ssl_client_s_dn`
 * (OpenSSL's `X509_NAME_print_ex(…, XN_FLAG_RFC2253)`: components reversed, comma separated,
 * OpenSSL short names, RFC 2253 escaping, bytes ≥ 0x80 and control bytes as `\XX`, non-string
 * values as `#` and the DER in hex), the legacy slash form `openssl ca` writes into index.txt, and
 * the parsing of an operator's `--subject` into a DER Name.
 *
 * @example
 * ```ts
 * import { nameFromRfc4514, nginxSubject } from "./name.ts";
 * const name = nameFromRfc4514("CN=alice,O=Example,C=DE");
 * nginxSubject(name); // → "CN=alice,O=Example,C=DE"
 * ```
 */
import * as asn1js from "asn1js";
import * as pkijs from "pkijs";
import { legacyToRfc4514, subjectFormAdvice } from "../policy/mod.ts";

/** Attribute types whose OpenSSL short name is known here (OID → short name). */
const SHORT_NAMES: ReadonlyMap<string, string> = new Map([
  ["2.5.4.3", "CN"],
  ["2.5.4.4", "SN"],
  ["2.5.4.5", "serialNumber"],
  ["2.5.4.6", "C"],
  ["2.5.4.7", "L"],
  ["2.5.4.8", "ST"],
  ["2.5.4.9", "street"],
  ["2.5.4.10", "O"],
  ["2.5.4.11", "OU"],
  ["2.5.4.12", "title"],
  ["2.5.4.13", "description"],
  ["2.5.4.15", "businessCategory"],
  ["2.5.4.17", "postalCode"],
  ["2.5.4.41", "name"],
  ["2.5.4.42", "GN"],
  ["2.5.4.43", "initials"],
  ["2.5.4.44", "generationQualifier"],
  ["2.5.4.46", "dnQualifier"],
  ["2.5.4.65", "pseudonym"],
  ["2.5.4.97", "organizationIdentifier"],
  ["1.2.840.113549.1.9.1", "emailAddress"],
  ["0.9.2342.19200300.100.1.1", "UID"],
  ["0.9.2342.19200300.100.1.25", "DC"],
]);

const OIDS_BY_NAME: ReadonlyMap<string, string> = new Map(
  [...SHORT_NAMES].map(([oid, name]) => [name.toLowerCase(), oid]),
);

/** Types RFC 5280 (and OpenSSL's tables) want as PrintableString or IA5String, not UTF8String. */
const PRINTABLE_TYPES = new Set(["2.5.4.6", "2.5.4.5", "2.5.4.46"]);
const IA5_TYPES = new Set(["1.2.840.113549.1.9.1", "0.9.2342.19200300.100.1.25"]);

/** Bytes per character of the ASN.1 string types OpenSSL prints as text (the rest are dumped). */
const CHAR_WIDTH: ReadonlyMap<number, 1 | 2 | 4> = new Map([
  [12, 1], // UTF8String: its bytes, each ≥ 0x80 escaped, as OpenSSL does
  [18, 1], // NumericString
  [19, 1], // PrintableString
  [20, 1], // T61String (read as Latin-1)
  [22, 1], // IA5String
  [23, 1], // UTCTime
  [24, 1], // GeneralizedTime
  [26, 1], // VisibleString
  [28, 4], // UniversalString
  [30, 2], // BMPString
]);

/** A subject the tool cannot print exactly as the proxy would, or cannot parse. */
export class NameError extends Error {
  override name = "NameError";
}

const HEX = (b: number) => b.toString(16).toUpperCase().padStart(2, "0");

/** The value as OpenSSL reads it: UTF-8 bytes (UTF8String raw; other string types converted). */
function valueBytes(tag: number, content: Uint8Array): Uint8Array {
  const width = CHAR_WIDTH.get(tag)!;
  if (tag === 12) return content;
  const codePoints: number[] = [];
  for (let i = 0; i + width <= content.length; i += width) {
    let c = 0;
    for (let j = 0; j < width; j++) c = c * 256 + content[i + j];
    codePoints.push(c);
  }
  if (width === 1 && codePoints.every((c) => c < 0x80)) return content;
  return new TextEncoder().encode(String.fromCodePoint(...codePoints));
}

const RFC2253_SPECIAL = new Set([...'",+;<>\\'].map((c) => c.charCodeAt(0)));

/**
 * RFC 2253 escaping exactly as OpenSSL's do_buf/do_esc_char with ASN1_STRFLGS_RFC2253. OpenSSL
 * gives the last character only the "last" flag, so a one-character value "#" stays unescaped.
 */
function escapeValue(bytes: Uint8Array): string {
  let out = "";
  bytes.forEach((b, i) => {
    const last = i === bytes.length - 1, first = i === 0 && !last;
    if (b >= 0x80 || b < 0x20 || b === 0x7f) out += "\\" + HEX(b);
    else if (
      RFC2253_SPECIAL.has(b) || (first && (b === 0x20 || b === 0x23)) || (last && b === 0x20)
    ) out += "\\" + String.fromCharCode(b);
    else out += String.fromCharCode(b);
  });
  return out;
}

function attributeValue(
  value: asn1js.AsnType,
): { tag: number; content: Uint8Array; der: Uint8Array } {
  const block = value as asn1js.BaseBlock;
  const der = new Uint8Array(block.toBER());
  const universal = block.idBlock.tagClass === 1 && !block.idBlock.isConstructed;
  const tag = universal ? block.idBlock.tagNumber : -1;
  const content = new Uint8Array(
    (block.valueBlock as unknown as { valueHexView?: Uint8Array }).valueHexView ?? [],
  );
  return { tag, content, der };
}

function shortName(oid: string): string {
  const name = SHORT_NAMES.get(oid);
  if (name === undefined) {
    throw new NameError(
      `subject attribute ${oid} is not one svcd can print as the proxy does; use only ` +
        [...SHORT_NAMES.values()].join(", "),
    );
  }
  return name;
}

/** The RDNs of a Name in DER order, each a list of type/value pairs. */
function rdns(name: pkijs.RelativeDistinguishedNames): pkijs.AttributeTypeAndValue[][] {
  // pkijs flattens the SET structure; the raw schema keeps it, so multi-valued RDNs survive.
  const raw = name.valueBeforeDecode;
  if (raw && raw.byteLength > 0) {
    const parsed = asn1js.fromBER(raw);
    if (parsed.offset !== -1 && parsed.result instanceof asn1js.Sequence) {
      return parsed.result.valueBlock.value.map((set) =>
        (set as asn1js.Set).valueBlock.value.map((atv) =>
          new pkijs.AttributeTypeAndValue({ schema: atv })
        )
      );
    }
  }
  return name.typesAndValues.map((atv) => [atv]);
}

/**
 * The subject as nginx's `$ssl_client_s_dn` (and `openssl x509 -nameopt RFC2253`) prints it.
 * Throws NameError for an attribute type outside the known table.
 *
 * @example
 * ```ts
 * import type * as pkijs from "pkijs";
 * declare const certificate: pkijs.Certificate;
 * nginxSubject(certificate.subject); // → "CN=alice,O=Example,C=DE"
 * ```
 */
export function nginxSubject(name: pkijs.RelativeDistinguishedNames): string {
  // OpenSSL reverses the flat list of entries, so a multi-valued RDN's members come out reversed.
  return joinEntries(entries(name).reverse(), "", ",", (atv) => {
    const { tag, content, der } = attributeValue(atv.value);
    const type = shortName(atv.type);
    if (!CHAR_WIDTH.has(tag)) return `${type}=#${Array.from(der, HEX).join("")}`;
    return `${type}=${escapeValue(valueBytes(tag, content))}`;
  });
}

interface Entry {
  atv: pkijs.AttributeTypeAndValue;
  set: number;
}

function entries(name: pkijs.RelativeDistinguishedNames): Entry[] {
  return rdns(name).flatMap((rdn, set) => rdn.map((atv) => ({ atv, set })));
}

/** Joins entries: `+` between members of one RDN, `separator` between RDNs. */
function joinEntries(
  list: Entry[],
  lead: string,
  separator: string,
  show: (atv: pkijs.AttributeTypeAndValue) => string,
): string {
  return list.map((e, i) =>
    (i === 0 ? lead : list[i - 1].set === e.set ? "+" : separator) + show(e.atv)
  ).join("");
}

/**
 * The legacy slash form `openssl ca` writes into index.txt (X509_NAME_oneline): DER order, bytes
 * outside printable ASCII as `\xHH`.
 *
 * @example
 * ```ts
 * import type * as pkijs from "pkijs";
 * declare const certificate: pkijs.Certificate;
 * slashSubject(certificate.subject); // → "/C=DE/O=Example/CN=alice"
 * ```
 */
export function slashSubject(name: pkijs.RelativeDistinguishedNames): string {
  return joinEntries(entries(name), "/", "/", (atv) => {
    const { tag, content, der } = attributeValue(atv.value);
    const bytes = CHAR_WIDTH.has(tag) ? valueBytes(tag, content) : der;
    const text = Array.from(
      bytes,
      (b) => b < 0x20 || b > 0x7e ? `\\x${HEX(b)}` : String.fromCharCode(b),
    ).join("");
    return `${shortName(atv.type)}=${text}`;
  });
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** Splits on an unescaped separator character. */
function splitUnescaped(text: string, separator: string): string[] {
  const parts: string[] = [];
  let current = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length) {
      current += c + text[i + 1];
      i++;
    } else if (c === separator) {
      parts.push(current);
      current = "";
    } else current += c;
  }
  parts.push(current);
  return parts;
}

/** RFC 4514 value unescaping: `\X` for a special character, `\HH` for a byte. */
function unescapeValue(text: string, component: string): Uint8Array {
  const bytes: number[] = [];
  const encoder = new TextEncoder();
  const chars = Array.from(text);
  for (let i = 0; i < chars.length; i++) {
    if (chars[i] !== "\\") {
      bytes.push(...encoder.encode(chars[i]));
      continue;
    }
    const pair = (chars[i + 1] ?? "") + (chars[i + 2] ?? "");
    if (/^[0-9A-Fa-f]{2}$/.test(pair)) {
      bytes.push(parseInt(pair, 16));
      i += 2;
    } else if (i + 1 < chars.length) {
      bytes.push(...encoder.encode(chars[++i]));
    } else throw new NameError(`'${component}' ends with a lone backslash`);
  }
  return Uint8Array.from(bytes);
}

function stringValue(
  oid: string,
  bytes: Uint8Array,
  component: string,
): pkijs.AttributeValueType {
  const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  if (PRINTABLE_TYPES.has(oid)) {
    if (!/^[A-Za-z0-9 '()+,\-./:=?]*$/.test(text)) {
      throw new NameError(`'${component}': this attribute is a PrintableString; '${text}' is not`);
    }
    if (oid === "2.5.4.6" && !/^[A-Z]{2}$/.test(text)) {
      throw new NameError(`'${component}': a country is two capital letters (ISO 3166), e.g. C=DE`);
    }
    return new asn1js.PrintableString({ value: text });
  }
  if (IA5_TYPES.has(oid)) {
    if ([...text].some((c) => c.charCodeAt(0) > 0x7f)) {
      throw new NameError(`'${component}' must be ASCII`);
    }
    return new asn1js.IA5String({ value: text });
  }
  return new asn1js.Utf8String({ value: text });
}

/**
 * Parses an RFC 4514 subject (the form nginx writes: most specific first, comma separated, `+`
 * for multi-valued RDNs) into a Name. The slash form is refused with the RFC 4514 spelling to use.
 *
 * @example
 * ```ts
 * nameFromRfc4514("CN=alice,O=Example\\, Inc.,C=DE");
 * ```
 */
export function nameFromRfc4514(subject: string): pkijs.RelativeDistinguishedNames {
  if (subject.startsWith("/")) {
    throw new NameError(
      `'${subject}' is the legacy slash form; give the subject as the proxy writes it (RFC 4514), ` +
        `e.g. '${legacyToRfc4514(subject)}'`,
    );
  }
  const advice = subjectFormAdvice(subject);
  if (advice) throw new NameError(advice);
  const set: asn1js.Set[] = [];
  for (const rdnText of splitUnescaped(subject, ",").reverse()) {
    const atvs = splitUnescaped(rdnText, "+").map((component) => {
      const eq = component.indexOf("=");
      if (eq <= 0) throw new NameError(`'${component}' is not TYPE=value`);
      const typeText = component.slice(0, eq).trim();
      const oid = /^\d+(\.\d+)+$/.test(typeText)
        ? typeText
        : OIDS_BY_NAME.get(typeText.toLowerCase());
      if (oid === undefined || !SHORT_NAMES.has(oid)) {
        throw new NameError(
          `unknown attribute type '${typeText}'; use one of ${
            [...SHORT_NAMES.values()].join(", ")
          }`,
        );
      }
      const valueText = component.slice(eq + 1);
      if (valueText.startsWith("#")) {
        throw new NameError(`'${component}': hex-encoded (#…) values are not accepted here`);
      }
      const value = stringValue(oid, unescapeValue(valueText, component), component);
      return new pkijs.AttributeTypeAndValue({ type: oid, value }).toSchema();
    });
    // DER: the members of a SET OF are sorted by their encodings (X.690 §11.6).
    atvs.sort((a, b) => compareBytes(new Uint8Array(a.toBER()), new Uint8Array(b.toBER())));
    set.push(new asn1js.Set({ value: atvs }));
  }
  if (set.length === 0) throw new NameError("the subject is empty");
  const der = new asn1js.Sequence({ value: set }).toBER();
  return pkijs.RelativeDistinguishedNames.fromBER(der);
}
