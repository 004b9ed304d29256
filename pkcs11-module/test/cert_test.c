/* The certificate walk (der.c, cert.c) and /token's "certificate" member (keys.c): certificates
 * made here with libcrypto, whose own encoder is the oracle for the fields the walk finds; every
 * truncation and many byte changes of them, and hand-made malformed DER, are refused or read
 * within their bytes, never past them (built with AddressSanitizer and UBSan). */
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cert.h"
#include "check.h"
#include "der.h"
#include "keys.h"


typedef struct {
  unsigned char *p;
  size_t len;
} bytes;

static void bytes_free(bytes *b) {
  OPENSSL_free(b->p);
  *b = (bytes){0};
}

static int span_is(der_span s, const bytes *want) {
  return s.len == want->len && memcmp(s.p, want->p, want->len) == 0;
}

/* libcrypto's DER of a value of the ASN.1 type `item` (a Name, an INTEGER, a Certificate). */
static bytes der_of(const void *value, const ASN1_ITEM *item) {
  bytes b = {0};
  int len = ASN1_item_i2d((const ASN1_VALUE *)value, &b.p, item);
  b.len = len > 0 ? (size_t)len : 0;
  return b;
}

static bytes der_of_pubkey(EVP_PKEY *k) {
  bytes b = {0};
  int len = i2d_PUBKEY(k, &b.p);
  b.len = len > 0 ? (size_t)len : 0;
  return b;
}

static X509_NAME *name_of(const char *cn) {
  X509_NAME *n = X509_NAME_new();
  X509_NAME_add_entry_by_txt(n, "C", MBSTRING_ASC, (const unsigned char *)"DE", -1, -1, 0);
  X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"Example", -1, -1, 0);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
  return n;
}

/* A v3 certificate of `key` issued by `ca` (a random 20-byte serial, top bit set, so its INTEGER
 * carries a leading zero), with one extension. */
static X509 *make_cert(EVP_PKEY *key, EVP_PKEY *ca) {
  X509 *x = X509_new();
  BIGNUM *bn = BN_new();
  BN_rand(bn, 160, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY);
  ASN1_INTEGER *serial = BN_to_ASN1_INTEGER(bn, NULL);
  X509_set_version(x, X509_VERSION_3);
  X509_set_serialNumber(x, serial);
  X509_NAME *subject = name_of("alice"), *issuer = name_of("Test CA");
  X509_set_subject_name(x, subject);
  X509_set_issuer_name(x, issuer);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, NULL, NID_key_usage, "critical,digitalSignature");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  X509_sign(x, ca, EVP_PKEY_get_id(ca) == EVP_PKEY_ED25519 ? NULL : EVP_sha256());
  X509_NAME_free(subject);
  X509_NAME_free(issuer);
  ASN1_INTEGER_free(serial);
  BN_free(bn);
  return x;
}

/* The walk finds what libcrypto's encoder says the fields are. */
static void test_fields(EVP_PKEY *key, EVP_PKEY *ca) {
  X509 *x = make_cert(key, ca);
  bytes der = der_of(x, ASN1_ITEM_rptr(X509));
  bytes subject = der_of(X509_get_subject_name(x), ASN1_ITEM_rptr(X509_NAME));
  bytes issuer = der_of(X509_get_issuer_name(x), ASN1_ITEM_rptr(X509_NAME));
  bytes serial = der_of(X509_get0_serialNumber(x), ASN1_ITEM_rptr(ASN1_INTEGER));
  bytes spki = der_of_pubkey(key);
  cert_fields f;
  CHECK(der.len > 0 && cert_parse(der.p, der.len, &f) == 0);
  CHECK(span_is(f.subject, &subject));
  CHECK(span_is(f.issuer, &issuer));
  CHECK(span_is(f.serial, &serial) && serial.p[1] == 21 && serial.p[2] == 0);
  CHECK(span_is(f.spki, &spki));
  CHECK(f.public_key.p + f.public_key.len == f.spki.p + f.spki.len);
  bytes_free(&der);
  bytes_free(&subject);
  bytes_free(&issuer);
  bytes_free(&serial);
  bytes_free(&spki);
  X509_free(x);
}

static int span_inside(der_span s, const unsigned char *p, size_t len) {
  return s.len == 0 || (s.p >= p && s.len <= len && (size_t)(s.p - p) <= len - s.len);
}

/* Parses a copy of exactly `len` bytes (so the sanitizer sees any read past them). */
static int parse_copy(const unsigned char *src, size_t len) {
  unsigned char *copy = malloc(len ? len : 1);
  memcpy(copy, src, len);
  cert_fields f;
  int r = cert_parse(copy, len, &f);
  if (r == 0)
    CHECK(span_inside(f.subject, copy, len) && span_inside(f.issuer, copy, len) &&
          span_inside(f.serial, copy, len) && span_inside(f.spki, copy, len) &&
          span_inside(f.public_key, copy, len));
  free(copy);
  return r;
}

/* Every truncation, a byte after the end, and each byte changed three ways. */
static void test_damaged(EVP_PKEY *key, EVP_PKEY *ca) {
  X509 *x = make_cert(key, ca);
  bytes der = der_of(x, ASN1_ITEM_rptr(X509));
  for (size_t n = 0; n < der.len; n++) CHECK(parse_copy(der.p, n) != 0);
  unsigned char *longer = malloc(der.len + 1);
  memcpy(longer, der.p, der.len);
  longer[der.len] = 0;
  CHECK(parse_copy(longer, der.len + 1) != 0);
  free(longer);
  unsigned char *copy = malloc(der.len);
  static const unsigned char CHANGES[] = {0x80, 0xff, 0x1f};
  size_t refused = 0;
  for (size_t i = 0; i < der.len; i++)
    for (size_t c = 0; c < sizeof CHANGES; c++) {
      memcpy(copy, der.p, der.len);
      copy[i] = copy[i] == CHANGES[c] ? 0 : CHANGES[c];
      refused += parse_copy(copy, der.len) != 0;
    }
  /* The structure's bytes (tags, lengths) are refused when changed; the contents' need not be. */
  CHECK(refused > 0);
  CHECK(parse_copy(der.p, der.len) == 0);
  free(copy);
  bytes_free(&der);
  X509_free(x);
}

/* DER the reader refuses, each against one rule. */
static void test_reader(void) {
  static const struct {
    const char *why;
    unsigned char der[8];
    size_t len;
  } BAD[] = {
      {"indefinite length", {0x30, 0x80, 0x00, 0x00}, 4},
      {"long form for a short length", {0x04, 0x81, 0x01, 0xaa}, 4},
      {"five length octets", {0x04, 0x85, 0x01, 0x00, 0x00, 0x00, 0x00}, 7},
      {"length past the end", {0x04, 0x84, 0xff, 0xff, 0xff, 0xff, 0x00}, 7},
      {"length octets missing", {0x04, 0x82, 0x01}, 3},
      {"contents past the end", {0x04, 0x03, 0xaa}, 3},
      {"high tag number", {0x1f, 0x81, 0x01, 0x00}, 4},
      {"tag alone", {0x04}, 1},
  };
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    der_span in = {BAD[i].der, BAD[i].len};
    der_item it;
    int r = der_next(&in, &it);
    if (r == 0) fprintf(stderr, "der_next took: %s\n", BAD[i].why);
    CHECK(r != 0 && in.p == BAD[i].der && in.len == BAD[i].len);
  }
  unsigned char ok[200] = {0x04, 0x81, 0x80};
  der_span in = {ok, 3 + 0x80};
  der_item it;
  CHECK(der_next(&in, &it) == 0 && it.value.len == 0x80 && in.len == 0);
  /* The same contents behind a length with a leading zero octet (82 00 80): all bytes present. */
  unsigned char padded[200] = {0x04, 0x82, 0x00, 0x80};
  in = (der_span){padded, 4 + 0x80};
  CHECK(der_next(&in, &it) != 0);
  /* A Certificate whose serial is not the shortest INTEGER, or whose outer SEQUENCE is empty. */
  static const unsigned char EMPTY[] = {0x30, 0x00};
  cert_fields f;
  CHECK(cert_parse(EMPTY, sizeof EMPTY, &f) != 0);
  CHECK(cert_parse(NULL, 0, &f) != 0);
}

/* A certificate whose serial INTEGER carries a needless leading zero is refused: serial 1 as
 * 02 02 00 01, the two SEQUENCE lengths around it one longer. */
static void test_serial_not_shortest(EVP_PKEY *key, EVP_PKEY *ca) {
  X509 *x = make_cert(key, ca);
  ASN1_INTEGER *one = ASN1_INTEGER_new();
  ASN1_INTEGER_set(one, 1);
  X509_set_serialNumber(x, one);
  X509_sign(x, ca, EVP_PKEY_get_id(ca) == EVP_PKEY_ED25519 ? NULL : EVP_sha256());
  bytes der = der_of(x, ASN1_ITEM_rptr(X509));
  /* 30 82 L L | 30 82 L L | a0 03 02 01 02 | 02 01 01 … */
  static const unsigned char HEAD[] = {0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x01, 0x01};
  CHECK(parse_copy(der.p, der.len) == 0);
  CHECK(der.p[1] == 0x82 && der.p[5] == 0x82 && memcmp(der.p + 8, HEAD, sizeof HEAD) == 0);
  unsigned char *bad = malloc(der.len + 1);
  memcpy(bad, der.p, 14);
  bad[14] = 0x02;
  bad[15] = 0x00;
  bad[16] = 0x01;
  memcpy(bad + 17, der.p + 16, der.len - 16);
  for (size_t at = 2; at <= 6; at += 4) {
    unsigned v = (unsigned)(bad[at] << 8 | bad[at + 1]) + 1;
    bad[at] = (unsigned char)(v >> 8);
    bad[at + 1] = (unsigned char)v;
  }
  CHECK(parse_copy(bad, der.len + 1) != 0);
  /* The same splice with a shortest INTEGER (02 02 01 01) is taken: only the zero was wrong. */
  bad[15] = 0x01;
  CHECK(parse_copy(bad, der.len + 1) == 0);
  free(bad);
  ASN1_INTEGER_free(one);
  bytes_free(&der);
  X509_free(x);
}

static char *base64_of(const unsigned char *p, size_t len) {
  char *out = malloc(len / 3 * 4 + 8);
  EVP_EncodeBlock((unsigned char *)out, p, (int)len);
  return out;
}

/* The raw P-256 point: the SPKI's last 65 bytes. */
static char *token_json_ec(EVP_PKEY *key, const char *cert_member) {
  bytes spki = der_of_pubkey(key);
  char *spki64 = base64_of(spki.p, spki.len), *raw64 = base64_of(spki.p + spki.len - 65, 65);
  size_t cap = strlen(spki64) + strlen(raw64) + strlen(cert_member) + 256;
  char *json = malloc(cap);
  snprintf(json, cap,
           "{\"keys\":[{\"label\":\"ec\",\"key_type\":\"ec-p256\",\"public_key\":\"%s\","
           "\"public_key_raw\":\"%s\"%s}]}",
           spki64, raw64, cert_member);
  free(spki64);
  free(raw64);
  bytes_free(&spki);
  return json;
}

/* /token's certificate: kept when it is the key's and DER; otherwise the key is listed without. */
static void test_token_certificate(EVP_PKEY *key, EVP_PKEY *other, EVP_PKEY *ca) {
  X509 *mine = make_cert(key, ca), *theirs = make_cert(other, ca);
  bytes der = der_of(mine, ASN1_ITEM_rptr(X509)), wrong = der_of(theirs, ASN1_ITEM_rptr(X509));
  char *good64 = base64_of(der.p, der.len), *wrong64 = base64_of(wrong.p, wrong.len);
  char *cut64 = base64_of(der.p, der.len - 3);
  char member[8192];
  const struct {
    const char *b64;
    int kept;
  } CASES[] = {{good64, 1}, {wrong64, 0}, {cut64, 0}, {"not base64!", 0}, {"", 0}};
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    snprintf(member, sizeof member, ",\"certificate\":\"%s\",\"chain\":[]", CASES[i].b64);
    char *json = token_json_ec(key, member);
    token_listing t;
    CHECK(token_parse(json, strlen(json), &t) == CKR_OK && t.count == 1);
    if (t.count == 1) {
      const remote_key *k = t.keys[0];
      CHECK((k->cert != NULL) == CASES[i].kept);
      if (CASES[i].kept) {
        unsigned char sha1[SHA_DIGEST_LENGTH];
        SHA1(der.p, der.len, sha1);
        CHECK(k->cert_len == der.len && memcmp(k->cert, der.p, der.len) == 0);
        CHECK(memcmp(k->cert_check, sha1, 3) == 0);
        CHECK(k->cert_fields.subject.p >= k->cert && k->cert_fields.subject.len > 0);
      }
    }
    token_listing_free(&t);
    free(json);
  }
  char *json = token_json_ec(key, "");
  token_listing t;
  CHECK(token_parse(json, strlen(json), &t) == CKR_OK && t.count == 1 && t.keys[0]->cert == NULL);
  token_listing_free(&t);
  free(json);
  free(good64);
  free(wrong64);
  free(cut64);
  bytes_free(&der);
  bytes_free(&wrong);
  X509_free(mine);
  X509_free(theirs);
}

int main(void) {
  EVP_PKEY *ec = EVP_EC_gen("P-256"), *ec2 = EVP_EC_gen("P-256");
  EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
  test_reader();
  test_fields(ec, ec);
  test_fields(ed, ec);
  test_fields(ec, ed);
  test_damaged(ec, ec);
  test_damaged(ed, ed);
  test_serial_not_shortest(ec, ec);
  test_token_certificate(ec, ec2, ed);
  EVP_PKEY_free(ec);
  EVP_PKEY_free(ec2);
  EVP_PKEY_free(ed);
  if (failures) {
    fprintf(stderr, "cert_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("cert_test: ok\n");
  return 0;
}
