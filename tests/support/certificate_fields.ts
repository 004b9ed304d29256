/**
 * A certificate's extensions as Python cryptography (Debian python3-cryptography) reads them: an
 * independent parser for what `svcd ca` writes (key usage by name, purposes and access methods by
 * OID, DNS names, CRL URLs).
 *
 * @example
 * ```ts
 * const fields = certificateFields("/tmp/k.pem");
 * fields.extendedKeyUsage; // ["1.3.6.1.5.5.7.3.3"]
 * ```
 */

/** What Python cryptography reads from a certificate. */
export interface CertificateFields {
  /** The key usage bits set, by cryptography's names (e.g. "digital_signature"). */
  keyUsage: string[];
  keyUsageCritical: boolean;
  /** extendedKeyUsage purposes, dotted OIDs; [] without the extension. */
  extendedKeyUsage: string[];
  dnsNames: string[];
  /** AIA: [access method OID, URL]. */
  authorityInfoAccess: [string, string][];
  crlUrls: string[];
  basicConstraintsCa: boolean | null;
  /** The subjectPublicKeyInfo, DER hex (where cryptography knows the key type, else null). */
  spkiHex: string | null;
}

const SCRIPT = `
import json, sys
from cryptography import x509
from cryptography.x509.oid import ExtensionOID
from cryptography.hazmat.primitives import serialization
data = open(sys.argv[1], "rb").read()
cert = x509.load_pem_x509_certificate(data) if data.startswith(b"-----") else x509.load_der_x509_certificate(data)
def ext(oid):
    try:
        return cert.extensions.get_extension_for_oid(oid)
    except x509.ExtensionNotFound:
        return None
out = {"keyUsage": [], "keyUsageCritical": False, "extendedKeyUsage": [], "dnsNames": [],
       "authorityInfoAccess": [], "crlUrls": [], "basicConstraintsCa": None, "spkiHex": None}
ku = ext(ExtensionOID.KEY_USAGE)
if ku:
    out["keyUsageCritical"] = ku.critical
    for name in ["digital_signature", "content_commitment", "key_encipherment", "data_encipherment",
                 "key_agreement", "key_cert_sign", "crl_sign"]:
        if getattr(ku.value, name):
            out["keyUsage"].append(name)
eku = ext(ExtensionOID.EXTENDED_KEY_USAGE)
if eku:
    out["extendedKeyUsage"] = [o.dotted_string for o in eku.value]
san = ext(ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
if san:
    out["dnsNames"] = san.value.get_values_for_type(x509.DNSName)
aia = ext(ExtensionOID.AUTHORITY_INFORMATION_ACCESS)
if aia:
    out["authorityInfoAccess"] = [[d.access_method.dotted_string, d.access_location.value] for d in aia.value]
cdp = ext(ExtensionOID.CRL_DISTRIBUTION_POINTS)
if cdp:
    out["crlUrls"] = [n.value for p in cdp.value for n in (p.full_name or [])]
bc = ext(ExtensionOID.BASIC_CONSTRAINTS)
if bc:
    out["basicConstraintsCa"] = bc.value.ca
try:
    out["spkiHex"] = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo).hex()
except Exception:
    pass
print(json.dumps(out))
`;

/** The fields of the certificate in `path` (PEM or DER). Throws when Python cannot read it. */
export function certificateFields(path: string): CertificateFields {
  const out = new Deno.Command("/usr/bin/python3", { args: ["-c", SCRIPT, path] }).outputSync();
  if (!out.success) {
    throw new Error(
      `python3 cryptography cannot read ${path}: ${new TextDecoder().decode(out.stderr)}`,
    );
  }
  return JSON.parse(new TextDecoder().decode(out.stdout));
}
