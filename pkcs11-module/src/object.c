#include "object.h"

#include <pthread.h>
#include <string.h>

#include "cert.h"
#include "debug.h"
#include "key_type.h"
#include "mech.h"
#include "slot.h"

/* ---- handles: slot, key index and which of its objects ----------------------------------------- */

static CK_OBJECT_HANDLE handle_of(CK_SLOT_ID slot_id, size_t index, object_kind kind) {
  return ((CK_ULONG)(slot_id + 1) << 24) | ((CK_ULONG)index << 2) | (CK_ULONG)kind;
}

/* The key has the object: every key its two key objects, a key with a certificate that too. */
static int key_has(const remote_key *k, object_kind kind) {
  return kind != OBJ_CERTIFICATE || k->cert != NULL;
}

remote_key *object_key(CK_SLOT_ID slot_id, CK_OBJECT_HANDLE h, object_kind *kind) {
  if ((h >> 24) != slot_id + 1 || (h & 3) > OBJ_CERTIFICATE) return NULL;
  size_t index = (h & 0xffffffUL) >> 2;
  *kind = (object_kind)(h & 3);
  slot_t *slot = slot_by_id(slot_id);
  pthread_mutex_lock(&slot->lock);
  remote_key *k = index < slot->nkeys ? slot->keys[index] : NULL;
  if (k != NULL && (k->gone || !key_has(k, *kind))) k = NULL;
  pthread_mutex_unlock(&slot->lock);
  return k;
}

/* ---- attributes ---------------------------------------------------------------------------------- */

typedef struct {
  const void *p;
  CK_ULONG len;
  int sensitive;
} attr_value;

typedef union {
  CK_ULONG ul;
  CK_BBOOL b;
  CK_MECHANISM_TYPE mechs[16];
} scratch;

static int attr_bool(CK_ATTRIBUTE_TYPE t, int is_private, CK_BBOOL *out) {
  switch (t) {
    case CKA_TOKEN:
    case CKA_LOCAL:
      *out = CK_TRUE;
      return 1;
    case CKA_PRIVATE: /* visible without a login: no PIN exists */
    case CKA_MODIFIABLE:
    case CKA_COPYABLE:
    case CKA_DESTROYABLE:
    case CKA_DERIVE:
    case CKA_ENCRYPT:
    case CKA_DECRYPT:
    case CKA_WRAP:
    case CKA_UNWRAP:
    case CKA_SIGN_RECOVER:
    case CKA_VERIFY_RECOVER:
    case CKA_TRUSTED:
    case CKA_WRAP_WITH_TRUSTED:
    case CKA_ALWAYS_AUTHENTICATE:
    case CKA_EXTRACTABLE:
      *out = CK_FALSE;
      return 1;
    case CKA_SIGN:
      *out = is_private ? CK_TRUE : CK_FALSE;
      return 1;
    case CKA_VERIFY:
      *out = is_private ? CK_FALSE : CK_TRUE;
      return 1;
    case CKA_SENSITIVE:
    case CKA_ALWAYS_SENSITIVE:
    case CKA_NEVER_EXTRACTABLE:
      *out = is_private ? CK_TRUE : CK_FALSE;
      return 1;
    default:
      return 0;
  }
}

/* Attributes that depend on the key type. */
static int attr_typed(const remote_key *k, int is_private, CK_ATTRIBUTE_TYPE t, scratch *sc,
                      attr_value *v) {
  size_t len = 0;
  const unsigned char *params = key_ec_params(k->type, &len);
  switch (t) {
    case CKA_EC_PARAMS:
      if (params == NULL) return 0;
      *v = (attr_value){params, len, 0};
      return 1;
    case CKA_EC_POINT:
      if (k->ec_point == NULL) return 0;
      *v = (attr_value){k->ec_point, k->ec_point_len, 0};
      return 1;
    case CKA_MODULUS:
      if (k->modulus == NULL) return 0;
      *v = (attr_value){k->modulus, k->modulus_len, 0};
      return 1;
    case CKA_PUBLIC_EXPONENT:
      if (k->exponent == NULL) return 0;
      *v = (attr_value){k->exponent, k->exponent_len, 0};
      return 1;
    case CKA_MODULUS_BITS:
      if (k->modulus == NULL || is_private) return 0;
      sc->ul = k->modulus_len * 8;
      *v = (attr_value){&sc->ul, sizeof sc->ul, 0};
      return 1;
    case CKA_PARAMETER_SET:
      if (key_type_ckk(k->type) != CKK_ML_DSA) return 0;
      sc->ul = key_type_parameter_set(k->type);
      *v = (attr_value){&sc->ul, sizeof sc->ul, 0};
      return 1;
    case CKA_VALUE:
      if (is_private) {
        *v = (attr_value){NULL, 0, 1};
        return 1;
      }
      if (params != NULL || k->type == KT_RSA_3072) return 0; /* EC and RSA have no CKA_VALUE */
      *v = (attr_value){k->raw, k->raw_len, 0};
      return 1;
    case CKA_SEED:
      if (!is_private || params != NULL || k->type == KT_RSA_3072) return 0;
      *v = (attr_value){NULL, 0, 1};
      return 1;
    default:
      return 0;
  }
}

/* The attributes of the key's certificate object (an X.509 certificate, PKCS#11 3.2 §4.6). */
static int cert_attr_get(const remote_key *k, CK_ATTRIBUTE_TYPE t, scratch *sc, attr_value *v) {
  const cert_fields *f = &k->cert_fields;
  switch (t) {
    case CKA_CLASS:
      sc->ul = CKO_CERTIFICATE;
      break;
    case CKA_CERTIFICATE_TYPE:
      sc->ul = CKC_X_509;
      break;
    case CKA_CERTIFICATE_CATEGORY: /* the token's user holds its private key */
      sc->ul = CK_CERTIFICATE_CATEGORY_TOKEN_USER;
      break;
    case CKA_JAVA_MIDP_SECURITY_DOMAIN:
      sc->ul = CK_SECURITY_DOMAIN_UNSPECIFIED;
      break;
    case CKA_TOKEN:
      sc->b = CK_TRUE;
      *v = (attr_value){&sc->b, sizeof sc->b, 0};
      return 1;
    case CKA_PRIVATE: /* readable without a login, as the keys are */
    case CKA_MODIFIABLE:
    case CKA_COPYABLE:
    case CKA_DESTROYABLE:
    case CKA_TRUSTED: /* trust is the verifier's CA file, never the signer's token */
      sc->b = CK_FALSE;
      *v = (attr_value){&sc->b, sizeof sc->b, 0};
      return 1;
    case CKA_LABEL:
      *v = (attr_value){k->label, strlen(k->label), 0};
      return 1;
    case CKA_ID:
      *v = (attr_value){k->id, sizeof k->id, 0};
      return 1;
    case CKA_VALUE:
      *v = (attr_value){k->cert, k->cert_len, 0};
      return 1;
    case CKA_SUBJECT:
      *v = (attr_value){f->subject.p, f->subject.len, 0};
      return 1;
    case CKA_ISSUER:
      *v = (attr_value){f->issuer.p, f->issuer.len, 0};
      return 1;
    case CKA_SERIAL_NUMBER:
      *v = (attr_value){f->serial.p, f->serial.len, 0};
      return 1;
    case CKA_PUBLIC_KEY_INFO:
      *v = (attr_value){f->spki.p, f->spki.len, 0};
      return 1;
    case CKA_CHECK_VALUE:
      *v = (attr_value){k->cert_check, sizeof k->cert_check, 0};
      return 1;
    case CKA_START_DATE: /* empty, as the standard allows: the dates are in CKA_VALUE */
    case CKA_END_DATE:
    case CKA_URL: /* the certificate is in CKA_VALUE, not behind a URL */
    case CKA_HASH_OF_SUBJECT_PUBLIC_KEY:
    case CKA_HASH_OF_ISSUER_PUBLIC_KEY:
      *v = (attr_value){"", 0, 0};
      return 1;
    default:
      return 0;
  }
  *v = (attr_value){&sc->ul, sizeof sc->ul, 0};
  return 1;
}

/* The value of attribute `t` of the key's private or public object; 0 when the object has none. */
static int key_attr_get(const remote_key *k, int is_private, CK_ATTRIBUTE_TYPE t, scratch *sc,
                        attr_value *v) {
  switch (t) {
    case CKA_CLASS:
      sc->ul = is_private ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY;
      break;
    case CKA_KEY_TYPE:
      sc->ul = key_type_ckk(k->type);
      break;
    case CKA_KEY_GEN_MECHANISM:
      sc->ul = CK_UNAVAILABLE_INFORMATION;
      break;
    case CKA_LABEL:
      *v = (attr_value){k->label, strlen(k->label), 0};
      return 1;
    case CKA_ID:
      *v = (attr_value){k->id, sizeof k->id, 0};
      return 1;
    case CKA_SUBJECT:
    case CKA_START_DATE:
    case CKA_END_DATE:
      *v = (attr_value){"", 0, 0};
      return 1;
    case CKA_PUBLIC_KEY_INFO:
      *v = (attr_value){k->spki, k->spki != NULL ? k->spki_len : 0, 0};
      return 1;
    case CKA_ALLOWED_MECHANISMS: {
      size_t n = mech_allowed_list(k, sc->mechs, sizeof sc->mechs / sizeof sc->mechs[0]);
      *v = (attr_value){sc->mechs, n * sizeof(CK_MECHANISM_TYPE), 0};
      return 1;
    }
    default:
      if (attr_bool(t, is_private, &sc->b)) {
        *v = (attr_value){&sc->b, sizeof sc->b, 0};
        return 1;
      }
      return attr_typed(k, is_private, t, sc, v);
  }
  *v = (attr_value){&sc->ul, sizeof sc->ul, 0};
  return 1;
}

/* The value of attribute `t` of one of the key's objects; 0 when the object has none. */
static int attr_get(const remote_key *k, object_kind kind, CK_ATTRIBUTE_TYPE t, scratch *sc,
                    attr_value *v) {
  if (kind == OBJ_CERTIFICATE) return cert_attr_get(k, t, sc, v);
  return key_attr_get(k, kind == OBJ_PRIVATE_KEY, t, sc, v);
}

static const char *kind_name(object_kind kind) {
  if (kind == OBJ_CERTIFICATE) return "certificate";
  return kind == OBJ_PRIVATE_KEY ? "private key" : "public key";
}

CK_RV object_attributes(const remote_key *k, object_kind kind, CK_ATTRIBUTE *tpl, CK_ULONG n) {
  CK_RV rv = CKR_OK;
  for (CK_ULONG i = 0; i < n; i++) {
    CK_ATTRIBUTE *a = &tpl[i];
    scratch sc;
    attr_value v;
    if (!attr_get(k, kind, a->type, &sc, &v)) {
      debug_log("C_GetAttributeValue: '%s' %s has no attribute 0x%lx", k->label, kind_name(kind),
                a->type);
      a->ulValueLen = CK_UNAVAILABLE_INFORMATION;
      rv = CKR_ATTRIBUTE_TYPE_INVALID;
    } else if (v.sensitive) {
      a->ulValueLen = CK_UNAVAILABLE_INFORMATION;
      if (rv == CKR_OK || rv == CKR_BUFFER_TOO_SMALL) rv = CKR_ATTRIBUTE_SENSITIVE;
    } else if (a->pValue == NULL) {
      a->ulValueLen = v.len;
    } else if (a->ulValueLen < v.len) {
      a->ulValueLen = CK_UNAVAILABLE_INFORMATION;
      if (rv == CKR_OK) rv = CKR_BUFFER_TOO_SMALL;
    } else {
      memcpy(a->pValue, v.p, v.len);
      a->ulValueLen = v.len;
    }
  }
  debug_log("C_GetAttributeValue: '%s' %s, %lu attribute(s) (first 0x%lx): 0x%lx", k->label,
            kind_name(kind), n, n ? tpl[0].type : 0UL, rv);
  return rv;
}

/* ---- finding ------------------------------------------------------------------------------------ */

static int matches(const remote_key *k, object_kind kind, const CK_ATTRIBUTE *tpl, CK_ULONG n) {
  for (CK_ULONG i = 0; i < n; i++) {
    scratch sc;
    attr_value v;
    if (!attr_get(k, kind, tpl[i].type, &sc, &v) || v.sensitive) return 0;
    if (v.len != tpl[i].ulValueLen) return 0;
    if (v.len > 0 && (tpl[i].pValue == NULL || memcmp(v.p, tpl[i].pValue, v.len) != 0)) return 0;
  }
  return 1;
}

CK_RV objects_find(CK_SLOT_ID slot_id, const CK_ATTRIBUTE *tpl, CK_ULONG n,
                   pkcs11_search *search) {
  slot_t *slot = slot_by_id(slot_id);
  pthread_mutex_lock(&slot->lock);
  /* Per key: its private key, its public key, its certificate. */
  static const object_kind KINDS[] = {OBJ_PRIVATE_KEY, OBJ_PUBLIC_KEY, OBJ_CERTIFICATE};
  const size_t nkinds = sizeof KINDS / sizeof KINDS[0];
  CK_RV rv = pkcs11_search_start(search, slot->nkeys * nkinds);
  for (size_t i = 0; rv == CKR_OK && i < slot->nkeys; i++) {
    const remote_key *k = slot->keys[i];
    if (k->gone) continue;
    for (size_t j = 0; j < nkinds; j++)
      if (key_has(k, KINDS[j]) && matches(k, KINDS[j], tpl, n))
        pkcs11_search_add(search, handle_of(slot_id, i, KINDS[j]));
  }
  pthread_mutex_unlock(&slot->lock);
  debug_log("C_FindObjectsInit: %lu attribute(s), %zu object(s) match", n, search->count);
  return rv;
}
