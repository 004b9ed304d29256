/* The fields of an X.509 certificate (RFC 5280) its certificate object shows: walked in its DER
 * with the strict reader of der.h, so a malformed certificate is refused, never half read. */
#ifndef SVCP11_CERT_H
#define SVCP11_CERT_H

#include <stddef.h>

#include "der.h"

/* The most bytes a certificate may have (an ML-DSA-87 one is under 8 KiB). */
#define CERT_MAX_LENGTH 65536

/* Spans into the certificate's DER. */
typedef struct {
  der_span serial;     /* the serialNumber INTEGER, tag and length included (CKA_SERIAL_NUMBER) */
  der_span issuer;     /* the issuer Name's DER (CKA_ISSUER) */
  der_span subject;    /* the subject Name's DER (CKA_SUBJECT) */
  der_span spki;       /* the SubjectPublicKeyInfo's DER */
  der_span public_key; /* subjectPublicKey's bits, without the unused-bits octet */
} cert_fields;

/* Walks `der` as one Certificate and nothing after it; -1 when it is not one. */
int cert_parse(const unsigned char *der, size_t len, cert_fields *out);

#endif
