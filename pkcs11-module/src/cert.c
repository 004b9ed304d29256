#include "cert.h"

/* An INTEGER in its shortest two's-complement form. */
static int integer_ok(const der_item *it) {
  const unsigned char *v = it->value.p;
  if (it->value.len == 0) return -1;
  if (it->value.len > 1 && ((v[0] == 0 && v[1] < 0x80) || (v[0] == 0xff && v[1] >= 0x80)))
    return -1;
  return 0;
}

static int oid_ok(const der_item *it) { return it->value.len > 0 ? 0 : -1; }

/* AlgorithmIdentifier ::= SEQUENCE { algorithm OID, parameters ANY OPTIONAL } */
static int algorithm_ok(const der_item *alg) {
  der_span in = alg->value;
  der_item oid, params;
  if (der_expect(&in, DER_OID, &oid) != 0 || oid_ok(&oid) != 0) return -1;
  if (in.len > 0 && der_next(&in, &params) != 0) return -1;
  return in.len == 0 ? 0 : -1;
}

/* AttributeTypeAndValue ::= SEQUENCE { type OID, value ANY } */
static int attribute_ok(const der_item *atv) {
  der_span in = atv->value;
  der_item oid, value;
  if (der_expect(&in, DER_OID, &oid) != 0 || oid_ok(&oid) != 0) return -1;
  if (der_next(&in, &value) != 0) return -1;
  return in.len == 0 ? 0 : -1;
}

/* Name ::= SEQUENCE OF RelativeDistinguishedName, each a non-empty SET OF AttributeTypeAndValue. */
static int name_ok(const der_item *name) {
  der_span rdns = name->value;
  while (rdns.len > 0) {
    der_item rdn, atv;
    if (der_expect(&rdns, DER_SET, &rdn) != 0 || rdn.value.len == 0) return -1;
    der_span atvs = rdn.value;
    while (atvs.len > 0)
      if (der_expect(&atvs, DER_SEQUENCE, &atv) != 0 || attribute_ok(&atv) != 0) return -1;
  }
  return 0;
}

static int time_next(der_span *in) {
  der_item t;
  if (der_next(in, &t) != 0) return -1;
  return t.tag == DER_UTC_TIME || t.tag == DER_GENERALIZED_TIME ? 0 : -1;
}

/* Validity ::= SEQUENCE { notBefore Time, notAfter Time } */
static int validity_ok(const der_item *v) {
  der_span in = v->value;
  if (time_next(&in) != 0 || time_next(&in) != 0) return -1;
  return in.len == 0 ? 0 : -1;
}

/* SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier,
 *                                    subjectPublicKey BIT STRING } */
static int spki_read(const der_item *spki, cert_fields *out) {
  der_span in = spki->value;
  der_item alg, bits;
  if (der_expect(&in, DER_SEQUENCE, &alg) != 0 || algorithm_ok(&alg) != 0) return -1;
  if (der_expect(&in, DER_BIT_STRING, &bits) != 0 || in.len != 0) return -1;
  /* A key is whole octets: no unused bits. */
  if (bits.value.len < 2 || bits.value.p[0] != 0) return -1;
  out->spki = spki->whole;
  out->public_key = (der_span){bits.value.p + 1, bits.value.len - 1};
  return 0;
}

/* What may follow the key in a TBSCertificate: issuerUniqueID [1], subjectUniqueID [2],
 * extensions [3], each at most once and in that order. */
static int tbs_tail_ok(der_span in) {
  static const unsigned char TAIL[] = {0x81, 0x82, 0xa3};
  size_t next = 0;
  while (in.len > 0) {
    der_item it;
    if (der_next(&in, &it) != 0) return -1;
    while (next < sizeof TAIL && TAIL[next] != it.tag) next++;
    if (next == sizeof TAIL) return -1;
    next++;
  }
  return 0;
}

/* The optional version [0] EXPLICIT INTEGER at the start of a TBSCertificate. */
static int version_skip(der_span *in) {
  der_span peek = *in;
  der_item v, n;
  if (der_next(&peek, &v) != 0 || v.tag != 0xa0) return 0;
  der_span inner = v.value;
  if (der_expect(&inner, DER_INTEGER, &n) != 0 || integer_ok(&n) != 0 || inner.len != 0) return -1;
  *in = peek;
  return 0;
}

/* TBSCertificate ::= SEQUENCE { version, serialNumber, signature, issuer, validity, subject,
 * subjectPublicKeyInfo, … } */
static int tbs_read(const der_item *tbs, cert_fields *out) {
  der_span in = tbs->value;
  der_item serial, alg, issuer, validity, subject, spki;
  if (version_skip(&in) != 0) return -1;
  if (der_expect(&in, DER_INTEGER, &serial) != 0 || integer_ok(&serial) != 0) return -1;
  if (der_expect(&in, DER_SEQUENCE, &alg) != 0 || algorithm_ok(&alg) != 0) return -1;
  if (der_expect(&in, DER_SEQUENCE, &issuer) != 0 || name_ok(&issuer) != 0) return -1;
  if (der_expect(&in, DER_SEQUENCE, &validity) != 0 || validity_ok(&validity) != 0) return -1;
  if (der_expect(&in, DER_SEQUENCE, &subject) != 0 || name_ok(&subject) != 0) return -1;
  if (der_expect(&in, DER_SEQUENCE, &spki) != 0 || spki_read(&spki, out) != 0) return -1;
  if (tbs_tail_ok(in) != 0) return -1;
  out->serial = serial.whole;
  out->issuer = issuer.whole;
  out->subject = subject.whole;
  return 0;
}

/* Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue BIT STRING } */
int cert_parse(const unsigned char *der, size_t len, cert_fields *out) {
  if (der == NULL || len > CERT_MAX_LENGTH) return -1;
  der_span in = {der, len};
  der_item cert, tbs, alg, sig;
  if (der_expect(&in, DER_SEQUENCE, &cert) != 0 || in.len != 0) return -1;
  der_span parts = cert.value;
  cert_fields f = {0};
  if (der_expect(&parts, DER_SEQUENCE, &tbs) != 0 || tbs_read(&tbs, &f) != 0) return -1;
  if (der_expect(&parts, DER_SEQUENCE, &alg) != 0 || algorithm_ok(&alg) != 0) return -1;
  if (der_expect(&parts, DER_BIT_STRING, &sig) != 0 || sig.value.len < 1) return -1;
  if (parts.len != 0) return -1;
  *out = f;
  return 0;
}
