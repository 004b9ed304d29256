/**
 * CRLs and the revocation pointers of certificates, read by independent tools: `openssl crl
 * -verify`, GnuTLS `certtool --verify-crl`, Python `cryptography`, and `openssl verify -crl_check`
 * for a certificate against a CRL.
 *
 * @example
 * ```ts
 * declare const caPem: string, crlDer: Uint8Array, dir: string;
 * const read = await checkCrl(caPem, crlDer, dir);
 * read.serials; // ["4F1A…", …]
 * ```
 */
import assert from "node:assert/strict";
import { runCommand } from "./command.ts";
import { pem } from "../../lib/der/mod.ts";

/** What Python cryptography read from a CRL whose signature every tool verified. */
export interface CrlRead {
  number: bigint;
  thisUpdate: number;
  nextUpdate: number;
  /** Serials listed, upper-case hex. */
  serials: string[];
  /** Each listed serial's reason as pyca names it (e.g. key_compromise); null without one. */
  reasons: Record<string, string | null>;
  /** The issuingDistributionPoint's URI, with its criticality; null without one. */
  idp: { uri: string; critical: boolean } | null;
}

const PY_CRL = `
import sys, json
from datetime import timezone
from cryptography import x509
from cryptography.x509.oid import ExtensionOID
ca = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
crl = x509.load_der_x509_crl(open(sys.argv[2], "rb").read())
assert crl.is_signature_valid(ca.public_key()), "CRL signature does not verify"
assert crl.issuer == ca.subject
aki = crl.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier
assert aki == ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
idp = None
try:
    e = crl.extensions.get_extension_for_oid(ExtensionOID.ISSUING_DISTRIBUTION_POINT)
    idp = {"uri": e.value.full_name[0].value, "critical": e.critical}
except x509.ExtensionNotFound:
    pass
def reason(r):
    try:
        return r.extensions.get_extension_for_class(x509.CRLReason).value.reason.name
    except x509.ExtensionNotFound:
        return None
print(json.dumps({
    "number": str(crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number),
    "thisUpdate": crl.last_update.replace(tzinfo=timezone.utc).timestamp(),
    "nextUpdate": crl.next_update.replace(tzinfo=timezone.utc).timestamp(),
    "serials": ["%X" % r.serial_number for r in crl],
    "reasons": {"%X" % r.serial_number: reason(r) for r in crl},
    "idp": idp,
}))
`;

/**
 * Verifies a DER CRL with openssl, certtool and Python cryptography against the CA (PEM file) and
 * returns what Python read.
 */
export async function checkCrl(caPem: string, der: Uint8Array, dir: string): Promise<CrlRead> {
  const derPath = `${dir}/check-${crypto.randomUUID()}.crl`;
  const pemPath = `${derPath}.pem`;
  await Deno.writeFile(derPath, der);
  await Deno.writeTextFile(pemPath, pem("X509 CRL", der));
  try {
    const o = await runCommand("openssl", [
      "crl",
      "-inform",
      "DER",
      "-in",
      derPath,
      "-CAfile",
      caPem,
      "-noout",
      "-verify",
    ]);
    assert.equal(o.code, 0, o.text);
    assert.match(o.text, /verify OK/);
    const g = await runCommand("certtool", [
      "--verify-crl",
      "--load-ca-certificate",
      caPem,
      "--infile",
      pemPath,
    ]);
    assert.equal(g.code, 0, `certtool --verify-crl: ${g.text}`);
    const p = await runCommand("/usr/bin/python3", ["-c", PY_CRL, caPem, derPath]);
    assert.equal(p.code, 0, p.text);
    const read = JSON.parse(p.stdout);
    return {
      number: BigInt(read.number),
      thisUpdate: read.thisUpdate * 1000,
      nextUpdate: read.nextUpdate * 1000,
      serials: read.serials,
      reasons: read.reasons,
      idp: read.idp,
    };
  } finally {
    await Deno.remove(derPath).catch(() => {});
    await Deno.remove(pemPath).catch(() => {});
  }
}

/** `openssl verify -crl_check` of a certificate with one CRL (DER): OK, revoked, or another error. */
export async function verifyWithCrl(
  caPem: string,
  certPem: string,
  crlDer: Uint8Array,
  dir: string,
): Promise<"ok" | "revoked" | string> {
  const crlPath = `${dir}/verify-${crypto.randomUUID()}.pem`;
  await Deno.writeTextFile(crlPath, pem("X509 CRL", crlDer));
  try {
    const r = await runCommand("openssl", [
      "verify",
      "-crl_check",
      "-CRLfile",
      crlPath,
      "-CAfile",
      caPem,
      certPem,
    ]);
    if (r.code === 0 && /: OK\n/.test(r.stdout)) return "ok";
    if (/certificate revoked/.test(r.text)) return "revoked";
    return r.text;
  } finally {
    await Deno.remove(crlPath).catch(() => {});
  }
}

/** What Python cryptography reads from a certificate's AIA and CDP. */
export interface Pointers {
  ocsp: string[];
  caIssuers: string[];
  crl: string[];
}

const PY_POINTERS = `
import sys, json
from cryptography import x509
from cryptography.x509.oid import AuthorityInformationAccessOID as A
c = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
out = {"ocsp": [], "caIssuers": [], "crl": []}
try:
    for d in c.extensions.get_extension_for_class(x509.AuthorityInformationAccess).value:
        out["ocsp" if d.access_method == A.OCSP else "caIssuers"].append(d.access_location.value)
except x509.ExtensionNotFound:
    pass
try:
    for p in c.extensions.get_extension_for_class(x509.CRLDistributionPoints).value:
        out["crl"] += [n.value for n in p.full_name]
except x509.ExtensionNotFound:
    pass
print(json.dumps(out))
`;

/** The AIA and CDP URLs of a certificate (PEM file), as Python cryptography reads them. */
export async function pythonPointers(certPem: string): Promise<Pointers> {
  const r = await runCommand("/usr/bin/python3", ["-c", PY_POINTERS, certPem]);
  assert.equal(r.code, 0, r.text);
  return JSON.parse(r.stdout);
}
