/* The caller's keys as GET /token lists them, and what each key's public key gives: CKA_ID, the
 * attributes tools read, the libcrypto key for local verification. */
#ifndef SVCP11_KEYS_H
#define SVCP11_KEYS_H

#include <stddef.h>

#include "cert.h"
#include "key_type.h"
#include "pkcs11.h"

/* The daemon's digest mode names, as bits: which digests it signs for a key. */
enum { DG_SHA256 = 1, DG_SHA384 = 2, DG_SHA512 = 4, DG_MLDSA_MU = 8 };

typedef struct {
  char *label;
  key_type type;
  unsigned digests; /* DG_* the daemon takes for this key in digest mode */
  int gone;         /* listed once, absent from the latest /token: its handles answer invalid */
  unsigned char *raw;
  size_t raw_len;
  unsigned char *spki;
  size_t spki_len;
  unsigned char id[20];    /* CKA_ID: SHA-1 of the raw public key */
  void *pkey;              /* EVP_PKEY for local verification (EC, RSA, Ed25519), else NULL */
  unsigned char *ec_point; /* CKA_EC_POINT: DER OCTET STRING of the point (EC, Ed25519) */
  size_t ec_point_len;
  unsigned char *modulus, *exponent; /* RSA, big-endian */
  size_t modulus_len, exponent_len;
  unsigned char *cert;         /* the key's X.509 certificate (DER) from /token; NULL: none */
  size_t cert_len;
  cert_fields cert_fields;     /* spans into `cert` */
  unsigned char cert_check[3]; /* CKA_CHECK_VALUE: the first bytes of SHA-1 of `cert` */
} remote_key;

/* Keys are allocated one by one and never move: a handle or an operation holds a pointer. */
typedef struct {
  remote_key **keys;
  size_t count;
  char token_label[33];
  char serial[17];
  int has_digests_field;  /* the daemon's /token names "digests": it has digest mode */
  unsigned long max_body; /* the daemon's --max-body as /token states it; 0: not stated */
} token_listing;

/* Parses /token's JSON into `out` (exposed for the unit tests). */
CK_RV token_parse(const char *json, size_t len, token_listing *out);
void token_listing_free(token_listing *t);
void key_free(remote_key *k);
/* Signature length of the key (ML-DSA and composite fixed; RSA from the modulus). */
size_t key_signature_length(const remote_key *k);
/* The same key: type and raw public key. */
int key_same(const remote_key *a, const remote_key *b);
/* The same certificate, or neither has one. */
int key_cert_same(const remote_key *a, const remote_key *b);

#endif
