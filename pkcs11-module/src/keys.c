/* The caller's keys as GET /token lists them: {"token": {"label", "serialNumber", …}, "keys":
 * [{"label", "key_type", "mechanism", "public_key" (SPKI base64 or null), "public_key_raw"
 * (base64), "digests" (digest mode names; absent before the daemon had digest mode), "certificate"
 * (base64 DER; absent when the key has none), "chain"}]. A key the daemon cannot use comes as
 * {"label", "error"} and is left out. */
#include <json-c/json.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "debug.h"
#include "keys.h"

static unsigned digest_flag(const char *name) {
  if (strcmp(name, "sha-256") == 0) return DG_SHA256;
  if (strcmp(name, "sha-384") == 0) return DG_SHA384;
  if (strcmp(name, "sha-512") == 0) return DG_SHA512;
  if (strcmp(name, "ml-dsa-mu") == 0) return DG_MLDSA_MU;
  return 0;
}

size_t key_signature_length(const remote_key *k) {
  switch (k->type) {
    case KT_EC_P256:
    case KT_ED25519:
      return 64;
    case KT_EC_P384:
      return 96;
    case KT_RSA_3072:
      return k->pkey != NULL ? (size_t)EVP_PKEY_get_size(k->pkey) : 384;
    case KT_ML_DSA_44:
      return 2420;
    case KT_ML_DSA_65:
      return 3309;
    case KT_ML_DSA_87:
      return 4627;
    case KT_COMPOSITE:
      return 3309 + 64;
    default:
      return 0;
  }
}

static int base64_decode(const char *s, unsigned char **out, size_t *len) {
  size_t n = strlen(s);
  if (n % 4 != 0) return -1;
  unsigned char *buf = malloc(n / 4 * 3 + 1);
  if (buf == NULL) return -1;
  int got = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)n);
  if (got < 0) {
    free(buf);
    return -1;
  }
  size_t pad = (n > 0 && s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
  *out = buf;
  *len = (size_t)got - pad;
  return 0;
}

static void *pkey_from_spki(const unsigned char *spki, size_t len) {
  const unsigned char *p = spki;
  return d2i_PUBKEY(NULL, &p, (long)len);
}

static const char *string_field(json_object *o, const char *name) {
  json_object *v;
  if (!json_object_object_get_ex(o, name, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

static unsigned digests_field(json_object *o, int *present) {
  json_object *v;
  if (!json_object_object_get_ex(o, "digests", &v) || !json_object_is_type(v, json_type_array))
    return 0;
  *present = 1;
  unsigned flags = 0;
  for (size_t i = 0; i < json_object_array_length(v); i++) {
    json_object *e = json_object_array_get_idx(v, i);
    if (json_object_is_type(e, json_type_string)) flags |= digest_flag(json_object_get_string(e));
  }
  return flags;
}

void key_free(remote_key *k) {
  if (k == NULL) return;
  free(k->label);
  free(k->raw);
  free(k->spki);
  free(k->ec_point);
  free(k->modulus);
  free(k->exponent);
  free(k->cert);
  EVP_PKEY_free(k->pkey);
  free(k);
}

/* CKA_EC_POINT as the standard says: a DER OCTET STRING around the point (all lengths < 128). */
static int derive_ec_point(remote_key *k) {
  k->ec_point = malloc(k->raw_len + 2);
  if (k->ec_point == NULL) return -1;
  k->ec_point[0] = 0x04;
  k->ec_point[1] = (unsigned char)k->raw_len;
  memcpy(k->ec_point + 2, k->raw, k->raw_len);
  k->ec_point_len = k->raw_len + 2;
  return 0;
}

static int bn_param(EVP_PKEY *pkey, const char *name, unsigned char **out, size_t *len) {
  BIGNUM *bn = NULL;
  if (EVP_PKEY_get_bn_param(pkey, name, &bn) != 1) return -1;
  *len = (size_t)BN_num_bytes(bn);
  *out = malloc(*len ? *len : 1);
  if (*out != NULL) BN_bn2bin(bn, *out);
  BN_free(bn);
  return *out != NULL ? 0 : -1;
}

/* The attributes tools read that follow from the public key. */
static int derive_attributes(remote_key *k) {
  if (k->type == KT_EC_P256 || k->type == KT_EC_P384 || k->type == KT_ED25519)
    return derive_ec_point(k);
  if (k->type == KT_RSA_3072) {
    if (k->pkey == NULL) return -1;
    if (bn_param(k->pkey, "n", &k->modulus, &k->modulus_len) != 0) return -1;
    return bn_param(k->pkey, "e", &k->exponent, &k->exponent_len);
  }
  return 0;
}

/* The certificate shows only when it is the key's: its SubjectPublicKeyInfo is the key's (or, for
 * a key listed without one, its public key bits are the raw public key). */
static int cert_is_keys(const cert_fields *f, const remote_key *k) {
  const der_span want = k->spki != NULL ? (der_span){k->spki, k->spki_len}
                                        : (der_span){k->raw, k->raw_len};
  const der_span got = k->spki != NULL ? f->spki : f->public_key;
  return got.len == want.len && memcmp(got.p, want.p, want.len) == 0;
}

/* The entry's "certificate", when it is one and the key's; otherwise the key has none (and the
 * module says why on debug). */
static void cert_from_json(json_object *o, remote_key *k) {
  const char *b64 = string_field(o, "certificate");
  if (b64 == NULL) return;
  unsigned char *der = NULL;
  size_t len = 0;
  cert_fields f;
  const char *why = NULL;
  if (strlen(b64) > CERT_MAX_LENGTH / 3 * 4 + 4 || base64_decode(b64, &der, &len) != 0)
    why = "not base64 of at most 64 KiB";
  else if (cert_parse(der, len, &f) != 0)
    why = "not an X.509 certificate in DER";
  else if (!cert_is_keys(&f, k))
    why = "its public key is not the key's";
  if (why != NULL) {
    debug_log("key '%s': certificate left out: %s", k->label, why);
    free(der);
    return;
  }
  unsigned char sha1[SHA_DIGEST_LENGTH];
  SHA1(der, len, sha1);
  memcpy(k->cert_check, sha1, sizeof k->cert_check);
  k->cert = der;
  k->cert_len = len;
  k->cert_fields = f;
}

/* One entry of "keys"; 1 when it is a usable key (in *out), 0 when it is left out, -1 on memory
 * failure. */
static int key_from_json(json_object *o, remote_key **out, int *has_digests) {
  remote_key *k = calloc(1, sizeof *k);
  if (k == NULL) return -1;
  const char *label = string_field(o, "label");
  const char *type = string_field(o, "key_type");
  const char *raw = string_field(o, "public_key_raw");
  const char *spki = string_field(o, "public_key");
  if (label == NULL || type == NULL || raw == NULL) {
    key_free(k);
    return 0;
  }
  k->type = key_type_from_name(type);
  if (k->type == KT_UNKNOWN) {
    debug_log("key '%s': key type '%s' unknown to this module, left out", label, type);
    key_free(k);
    return 0;
  }
  if (base64_decode(raw, &k->raw, &k->raw_len) != 0 ||
      (key_type_raw_length(k->type) != 0 && k->raw_len != key_type_raw_length(k->type)) ||
      (spki != NULL && base64_decode(spki, &k->spki, &k->spki_len) != 0)) {
    debug_log("key '%s': unreadable public key, left out", label);
    key_free(k);
    return 0;
  }
  k->label = strdup(label);
  if (k->label == NULL) {
    key_free(k);
    return -1;
  }
  k->digests = digests_field(o, has_digests);
  SHA1(k->raw, k->raw_len, k->id);
  if (k->spki != NULL && key_type_verified_here(k->type))
    k->pkey = pkey_from_spki(k->spki, k->spki_len);
  if ((key_type_verified_here(k->type) && k->pkey == NULL) || derive_attributes(k) != 0) {
    debug_log("key '%s': its public key does not parse, left out", label);
    key_free(k);
    return 0;
  }
  cert_from_json(o, k);
  *out = k;
  return 1;
}

static void copy_padded(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src != NULL ? src : "");
}

CK_RV token_parse(const char *json, size_t len, token_listing *out) {
  memset(out, 0, sizeof *out);
  json_tokener *tok = json_tokener_new();
  if (tok == NULL) return CKR_HOST_MEMORY;
  json_object *root = json_tokener_parse_ex(tok, json, (int)len);
  int complete = json_tokener_get_error(tok) == json_tokener_success;
  json_tokener_free(tok);
  json_object *keys, *token;
  if (!complete || root == NULL || !json_object_object_get_ex(root, "keys", &keys) ||
      !json_object_is_type(keys, json_type_array)) {
    json_object_put(root);
    debug_log("/token: not the expected JSON");
    return CKR_DEVICE_ERROR;
  }
  json_object *max_body;
  if (json_object_object_get_ex(root, "max_body", &max_body) &&
      json_object_is_type(max_body, json_type_int) && json_object_get_int64(max_body) > 0)
    out->max_body = (unsigned long)json_object_get_int64(max_body);
  if (json_object_object_get_ex(root, "token", &token)) {
    copy_padded(out->token_label, sizeof out->token_label, string_field(token, "label"));
    copy_padded(out->serial, sizeof out->serial, string_field(token, "serialNumber"));
  }
  size_t n = json_object_array_length(keys);
  out->keys = calloc(n ? n : 1, sizeof *out->keys);
  if (out->keys == NULL) {
    json_object_put(root);
    return CKR_HOST_MEMORY;
  }
  CK_RV rv = CKR_OK;
  for (size_t i = 0; i < n; i++) {
    int r = key_from_json(json_object_array_get_idx(keys, i), &out->keys[out->count],
                          &out->has_digests_field);
    if (r > 0) out->count++;
    if (r >= 0) continue;
    rv = CKR_HOST_MEMORY;
    break;
  }
  json_object_put(root);
  if (rv != CKR_OK) token_listing_free(out);
  return rv;
}

void token_listing_free(token_listing *t) {
  for (size_t i = 0; i < t->count; i++) key_free(t->keys[i]);
  free(t->keys);
  memset(t, 0, sizeof *t);
}

int key_same(const remote_key *a, const remote_key *b) {
  return a->type == b->type && a->raw_len == b->raw_len && memcmp(a->raw, b->raw, a->raw_len) == 0;
}

int key_cert_same(const remote_key *a, const remote_key *b) {
  if (a->cert_len != b->cert_len) return 0;
  return a->cert_len == 0 || memcmp(a->cert, b->cert, a->cert_len) == 0;
}
