/* Objects: attribute lists, visibility, C_GetAttributeValue semantics, template checks and the
 * sealing of key material under the token's master key.
 *
 * Key material (object_t.secret) per key type, never shown as an attribute:
 *   CKK_ML_DSA private          seed(32) || encoded secret key
 *   composite private           ML-DSA-65 seed(32) || Ed25519 private(32) || ML-DSA-65 secret key
 *   CKK_EC_EDWARDS private      Ed25519 private(32) || public(32)
 *   CKK_EC private (P-256)      d(32) || uncompressed public point(65)
 *   CKK_GENERIC_SECRET          the key bytes */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "svcmod.h"

void hex_encode(char *out, const uint8_t *in, size_t n) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = 0;
}

static int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int hex_decode_into(const char *hex, size_t hexlen, uint8_t *out) {
  if (hexlen % 2) return -1;
  for (size_t i = 0; i < hexlen / 2; i++) {
    int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (uint8_t)(hi * 16 + lo);
  }
  return 0;
}

/* ---- the object list --------------------------------------------------------------------- */

object_t *object_find(CK_OBJECT_HANDLE h) {
  for (object_t *o = g.objects; o; o = o->next)
    if (o->handle == h) return o;
  return NULL;
}

int object_visible(const object_t *o) { return !o->is_private || g.role == (long)CKU_USER; }

void object_link(object_t *o) {
  o->next = g.objects;
  g.objects = o;
}

void object_free(object_t *o) {
  for (size_t i = 0; i < o->nattrs; i++) free(o->attrs[i].val);
  free(o->attrs);
  if (o->secret) {
    OPENSSL_cleanse(o->secret, o->secret_len);
    free(o->secret);
  }
  free(o->sealed);
  free(o);
}

void object_unlink_free(object_t *o) {
  for (object_t **pp = &g.objects; *pp; pp = &(*pp)->next) {
    if (*pp == o) {
      *pp = o->next;
      break;
    }
  }
  object_free(o);
}

/* ---- attributes --------------------------------------------------------------------------- */

const attr_t *object_attr(const object_t *o, CK_ATTRIBUTE_TYPE type) {
  for (size_t i = 0; i < o->nattrs; i++)
    if (o->attrs[i].type == type) return &o->attrs[i];
  return NULL;
}

int object_bool(const object_t *o, CK_ATTRIBUTE_TYPE type) {
  const attr_t *a = object_attr(o, type);
  return a != NULL && a->len == 1 && a->val[0] != 0;
}

CK_ULONG object_ulong(const object_t *o, CK_ATTRIBUTE_TYPE type) {
  const attr_t *a = object_attr(o, type);
  CK_ULONG v = CK_UNAVAILABLE_INFORMATION;
  if (a != NULL && a->len == sizeof v) memcpy(&v, a->val, sizeof v);
  return v;
}

CK_RV object_set_attr(object_t *o, CK_ATTRIBUTE_TYPE type, const void *val, CK_ULONG len) {
  uint8_t *copy = malloc(len ? len : 1);
  if (copy == NULL) return CKR_HOST_MEMORY;
  if (len) memcpy(copy, val, len);
  for (size_t i = 0; i < o->nattrs; i++) {
    if (o->attrs[i].type == type) {
      free(o->attrs[i].val);
      o->attrs[i].val = copy;
      o->attrs[i].len = len;
      return CKR_OK;
    }
  }
  attr_t *na = realloc(o->attrs, (o->nattrs + 1) * sizeof *na);
  if (na == NULL) {
    free(copy);
    return CKR_HOST_MEMORY;
  }
  o->attrs = na;
  o->attrs[o->nattrs++] = (attr_t){type, len, copy};
  return CKR_OK;
}

/* Private and secret keys hold their value (and ML-DSA seed) but never show it. */
static int attr_is_sensitive(const object_t *o, CK_ATTRIBUTE_TYPE type) {
  if (o->cls != CKO_PRIVATE_KEY && o->cls != CKO_SECRET_KEY) return 0;
  return type == CKA_VALUE || type == CKA_SEED;
}

CK_RV object_get_attributes(const object_t *o, CK_ATTRIBUTE *t, CK_ULONG n) {
  CK_RV rv = CKR_OK;
  for (CK_ULONG i = 0; i < n; i++) {
    const attr_t *a = object_attr(o, t[i].type);
    if (attr_is_sensitive(o, t[i].type)) {
      t[i].ulValueLen = CK_UNAVAILABLE_INFORMATION;
      rv = CKR_ATTRIBUTE_SENSITIVE;
    } else if (a == NULL) {
      t[i].ulValueLen = CK_UNAVAILABLE_INFORMATION;
      rv = CKR_ATTRIBUTE_TYPE_INVALID;
    } else if (t[i].pValue == NULL) {
      t[i].ulValueLen = a->len;
    } else if (t[i].ulValueLen < a->len) {
      t[i].ulValueLen = CK_UNAVAILABLE_INFORMATION;
      rv = CKR_BUFFER_TOO_SMALL;
    } else {
      if (a->len) memcpy(t[i].pValue, a->val, a->len);
      t[i].ulValueLen = a->len;
    }
  }
  return rv;
}

int object_matches(const object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n) {
  for (CK_ULONG i = 0; i < n; i++) {
    if (attr_is_sensitive(o, t[i].type)) return 0;
    const attr_t *a = object_attr(o, t[i].type);
    if (a == NULL || a->len != t[i].ulValueLen) return 0;
    if (a->len && (t[i].pValue == NULL || memcmp(a->val, t[i].pValue, a->len) != 0)) return 0;
  }
  return 1;
}

/* ---- sealing under the master key -------------------------------------------------------------- */

static void object_aad(const object_t *o, char aad[64]) {
  snprintf(aad, 64, "svcmod-object-%lu", o->file_id);
}

CK_RV object_seal(object_t *o) {
  char aad[64];
  object_aad(o, aad);
  uint8_t *s = malloc(o->secret_len + SEAL_OVERHEAD);
  if (s == NULL) return CKR_HOST_MEMORY;
  if (seal(g.master, (const uint8_t *)aad, strlen(aad), o->secret, o->secret_len, s) != 0) {
    free(s);
    return CKR_FUNCTION_FAILED;
  }
  free(o->sealed);
  o->sealed = s;
  o->sealed_len = o->secret_len + SEAL_OVERHEAD;
  return CKR_OK;
}

int object_unlock(object_t *o) {
  if (o->sealed == NULL || o->secret != NULL || o->sealed_len < SEAL_OVERHEAD) return 0;
  char aad[64];
  object_aad(o, aad);
  size_t len = o->sealed_len - SEAL_OVERHEAD;
  uint8_t *plain = malloc(len ? len : 1);
  if (plain == NULL) return -1;
  if (unseal(g.master, (const uint8_t *)aad, strlen(aad), o->sealed, o->sealed_len, plain) != 0) {
    free(plain);
    fprintf(stderr, "svcmod: object %lu does not decrypt with this token's key\n", o->file_id);
    return -1;
  }
  o->secret = plain;
  o->secret_len = len;
  return 0;
}

void object_lock(object_t *o) {
  if (o->on_token && o->sealed && o->secret) {
    OPENSSL_cleanse(o->secret, o->secret_len);
    free(o->secret);
    o->secret = NULL;
    o->secret_len = 0;
  }
}
