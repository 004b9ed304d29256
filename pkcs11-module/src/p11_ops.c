/* Objects (a private and a public key per label /token lists), finding them, and signing and
 * verifying. A signature is one POST /sign: the message (message mode) or a digest made here
 * (digest mode, where /token lists it for the key: X-SVC-Digest). */
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "p11_ops.h"
#include "state.h"

#define EXPORT __attribute__((visibility("default")))

/* ---- object handles: slot, key index and class ------------------------------------------------- */

static CK_OBJECT_HANDLE handle_of(unsigned slot, size_t index, int is_private) {
  return ((CK_ULONG)(slot + 1) << 24) | ((CK_ULONG)index << 1) | (CK_ULONG)is_private;
}

/* The key behind a handle of the session's slot, or NULL (unknown or no longer listed). */
static remote_key *key_of(const session_t *s, CK_OBJECT_HANDLE h, int *is_private) {
  if ((h >> 24) != (CK_ULONG)s->slot + 1) return NULL;
  size_t index = (h & 0xffffffUL) >> 1;
  slot_t *slot = &g.slots[s->slot];
  pthread_mutex_lock(&slot->lock);
  remote_key *k = index < slot->nkeys && !slot->keys[index]->gone ? slot->keys[index] : NULL;
  pthread_mutex_unlock(&slot->lock);
  *is_private = (int)(h & 1);
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

static CK_KEY_TYPE ck_key_type(key_type t) {
  switch (t) {
    case KT_EC_P256:
    case KT_EC_P384:
      return CKK_EC;
    case KT_ED25519:
      return CKK_EC_EDWARDS;
    case KT_RSA_3072:
      return CKK_RSA;
    case KT_COMPOSITE:
      return CKK_COMPOSITE_MLDSA65_ED25519;
    default:
      return CKK_ML_DSA;
  }
}

static CK_ULONG parameter_set(key_type t) {
  return t == KT_ML_DSA_44 ? CKP_ML_DSA_44 : t == KT_ML_DSA_65 ? CKP_ML_DSA_65 : CKP_ML_DSA_87;
}

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
      if (ck_key_type(k->type) != CKK_ML_DSA) return 0;
      sc->ul = parameter_set(k->type);
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

/* The value of attribute `t` of the key's private or public object; 0 when the object has none. */
static int attr_get(const remote_key *k, int is_private, CK_ATTRIBUTE_TYPE t, scratch *sc,
                    attr_value *v) {
  switch (t) {
    case CKA_CLASS:
      sc->ul = is_private ? CKO_PRIVATE_KEY : CKO_PUBLIC_KEY;
      break;
    case CKA_KEY_TYPE:
      sc->ul = ck_key_type(k->type);
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

EXPORT CK_RV C_GetAttributeValue(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject,
                                 CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  if (pTemplate == NULL && ulCount > 0) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  int is_private;
  remote_key *k = key_of(s, hObject, &is_private);
  if (k == NULL) {
    session_leave(s);
    return CKR_OBJECT_HANDLE_INVALID;
  }
  for (CK_ULONG i = 0; i < ulCount; i++) {
    CK_ATTRIBUTE *a = &pTemplate[i];
    scratch sc;
    attr_value v;
    if (!attr_get(k, is_private, a->type, &sc, &v)) {
      debug_log("C_GetAttributeValue: '%s' has no attribute 0x%lx", k->label, a->type);
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
            is_private ? "private" : "public", ulCount, ulCount ? pTemplate[0].type : 0UL, rv);
  session_leave(s);
  return rv;
}

/* ---- finding objects ---------------------------------------------------------------------------- */

static int matches(const remote_key *k, int is_private, const CK_ATTRIBUTE *tpl, CK_ULONG n) {
  for (CK_ULONG i = 0; i < n; i++) {
    scratch sc;
    attr_value v;
    if (!attr_get(k, is_private, tpl[i].type, &sc, &v) || v.sensitive) return 0;
    if (v.len != tpl[i].ulValueLen) return 0;
    if (v.len > 0 && (tpl[i].pValue == NULL || memcmp(v.p, tpl[i].pValue, v.len) != 0)) return 0;
  }
  return 1;
}

EXPORT CK_RV C_FindObjectsInit(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  if (pTemplate == NULL && ulCount > 0) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (s->finding) {
    session_leave(s);
    return CKR_OPERATION_ACTIVE;
  }
  slot_t *slot = &g.slots[s->slot];
  pthread_mutex_lock(&slot->lock);
  s->found = calloc(slot->nkeys * 2 + 1, sizeof *s->found);
  s->nfound = s->pos = 0;
  for (size_t i = 0; s->found != NULL && i < slot->nkeys; i++) {
    if (slot->keys[i]->gone) continue;
    for (int is_private = 1; is_private >= 0; is_private--)
      if (matches(slot->keys[i], is_private, pTemplate, ulCount))
        s->found[s->nfound++] = handle_of(s->slot, i, is_private);
  }
  pthread_mutex_unlock(&slot->lock);
  debug_log("C_FindObjectsInit: %lu attribute(s), %zu object(s) match", ulCount, s->nfound);
  if (s->found == NULL)
    rv = CKR_HOST_MEMORY;
  else
    s->finding = 1;
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_FindObjects(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE *phObject,
                           CK_ULONG ulMaxObjectCount, CK_ULONG *pulObjectCount) {
  if (phObject == NULL || pulObjectCount == NULL) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (!s->finding) {
    session_leave(s);
    return CKR_OPERATION_NOT_INITIALIZED;
  }
  CK_ULONG n = 0;
  while (n < ulMaxObjectCount && s->pos < s->nfound) phObject[n++] = s->found[s->pos++];
  *pulObjectCount = n;
  session_leave(s);
  return CKR_OK;
}

EXPORT CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (!s->finding) rv = CKR_OPERATION_NOT_INITIALIZED;
  free(s->found);
  s->found = NULL;
  s->finding = 0;
  session_leave(s);
  return rv;
}

/* ---- operations: taking the data ---------------------------------------------------------------- */

static void op_end(operation *op) {
  EVP_MD_CTX_free(op->md);
  free(op->buf);
  memset(op, 0, sizeof *op);
}

void session_free(session_t *s) {
  op_end(&s->sign);
  op_end(&s->verify);
  free(s->found);
  free(s);
}

static int is_verified_here(const operation *op, int verifying) {
  return verifying && verify_local_possible(op->key);
}

/* ML-DSA's μ with an empty context: SHAKE256(SHAKE256(pk, 64) ‖ 0x00 ‖ 0x00 ‖ M, 64). This starts
 * it; the message follows as it comes. */
static CK_RV mu_start(operation *op) {
  unsigned char tr[64];
  const unsigned char prefix[2] = {0, 0};
  EVP_MD_CTX *t = EVP_MD_CTX_new();
  int ok = t != NULL && EVP_DigestInit_ex(t, EVP_shake256(), NULL) == 1 &&
           EVP_DigestUpdate(t, op->key->raw, op->key->raw_len) == 1 &&
           EVP_DigestFinalXOF(t, tr, sizeof tr) == 1;
  EVP_MD_CTX_free(t);
  op->md = ok ? EVP_MD_CTX_new() : NULL;
  if (op->md == NULL || EVP_DigestInit_ex(op->md, EVP_shake256(), NULL) != 1 ||
      EVP_DigestUpdate(op->md, tr, sizeof tr) != 1 ||
      EVP_DigestUpdate(op->md, prefix, sizeof prefix) != 1)
    return CKR_HOST_MEMORY;
  return CKR_OK;
}

/* The most message bytes one request may carry: the daemon's --max-body as /token states it
 * (lowered by a configured max_body, e.g. a proxy's smaller limit), else the configured one. */
static unsigned long body_limit(const slot_t *s) {
  unsigned long stated = __atomic_load_n(&s->stated_max_body, __ATOMIC_RELAXED);
  if (stated == 0) return s->cfg.max_body;
  return s->cfg.max_body_set && s->cfg.max_body < stated ? s->cfg.max_body : stated;
}

/* Decides how the data is taken: `total` is its length when given all at once, else 0. */
static CK_RV acc_start(operation *op, int verifying, int multipart, size_t total) {
  const sign_plan *p = &op->plan;
  unsigned long max_body = body_limit(op->slot);
  op->acc = ACC_BUFFER;
  op->limit = max_body;
  if (p->raw_digest) {
    op->limit = 64;
  } else if (is_verified_here(op, verifying)) {
    op->acc = p->hash_nid != 0 ? ACC_HASH : ACC_BUFFER;
    op->limit = (size_t)1 << 30; /* Ed25519 verified here: the message is never sent */
  } else if (p->mode == MODE_DIGEST && p->hash_nid != 0) {
    op->acc = ACC_HASH;
  } else if (p->mu && (multipart || total > max_body)) {
    op->acc = ACC_MU;
  }
  if (op->acc == ACC_MU) return mu_start(op);
  if (op->acc == ACC_HASH) {
    op->md = EVP_MD_CTX_new();
    if (op->md == NULL || EVP_DigestInit_ex(op->md, EVP_get_digestbynid(p->hash_nid), NULL) != 1)
      return CKR_HOST_MEMORY;
  }
  return CKR_OK;
}

static CK_RV acc_add(operation *op, const unsigned char *data, size_t len) {
  if (op->acc == ACC_HASH || op->acc == ACC_MU)
    return EVP_DigestUpdate(op->md, data, len) == 1 ? CKR_OK : CKR_FUNCTION_FAILED;
  if (len > op->limit - op->len) return CKR_DATA_LEN_RANGE; /* more than the service takes */
  if (op->len + len > op->cap) {
    size_t cap = op->cap ? op->cap : 4096;
    while (cap < op->len + len) cap *= 2;
    unsigned char *b = realloc(op->buf, cap);
    if (b == NULL) return CKR_HOST_MEMORY;
    op->buf = b;
    op->cap = cap;
  }
  if (len > 0) memcpy(op->buf + op->len, data, len);
  op->len += len;
  return CKR_OK;
}

/* What goes to the service (or to the local verifier): a digest and its name, or the message. */
typedef struct {
  const char *digest; /* NULL: message mode */
  int md_nid;
  unsigned char dg[64];
  const unsigned char *data;
  size_t len;
} payload;

static CK_RV raw_digest_name(const operation *op, size_t len, payload *out) {
  const sign_plan *p = &op->plan;
  if (p->digest_len != 0) { /* RSA-PSS: the parameters named the hash */
    if (len != p->digest_len) return CKR_DATA_LEN_RANGE;
    out->digest = p->digest;
    out->md_nid = p->hash_nid;
    return CKR_OK;
  }
  unsigned flag = len == 32 ? DG_SHA256 : len == 48 ? DG_SHA384 : len == 64 ? DG_SHA512 : 0;
  if (flag == 0 || !(op->key->digests & flag)) return CKR_DATA_LEN_RANGE;
  out->digest = len == 32 ? "sha-256" : len == 48 ? "sha-384" : "sha-512";
  out->md_nid = len == 32 ? NID_sha256 : len == 48 ? NID_sha384 : NID_sha512;
  return CKR_OK;
}

static CK_RV acc_finish(operation *op, payload *out) {
  memset(out, 0, sizeof *out);
  if (op->acc == ACC_HASH) {
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(op->md, out->dg, &n) != 1) return CKR_FUNCTION_FAILED;
    out->digest = op->plan.digest;
    out->md_nid = op->plan.hash_nid;
    out->len = n;
    return CKR_OK;
  }
  if (op->acc == ACC_MU) {
    if (EVP_DigestFinalXOF(op->md, out->dg, 64) != 1) return CKR_FUNCTION_FAILED;
    out->digest = "ml-dsa-mu";
    out->len = 64;
    return CKR_OK;
  }
  out->data = op->buf != NULL ? op->buf : (const unsigned char *)"";
  out->len = op->len;
  if (op->plan.raw_digest) return raw_digest_name(op, op->len, out);
  return CKR_OK;
}

static const unsigned char *payload_bytes(const payload *p) {
  return p->data != NULL ? p->data : p->dg;
}

/* ---- operations: the service --------------------------------------------------------------------- */

static int header_safe(const char *s) { return strpbrk(s, "\r\n") == NULL; }

static CK_RV remote_sign(const operation *op, const payload *p, unsigned char *sig, size_t sig_len) {
  char key_header[512], digest_header[64];
  if (!header_safe(op->key->label) ||
      (size_t)snprintf(key_header, sizeof key_header, "X-SVC-Key: %s", op->key->label) >= sizeof key_header)
    return CKR_KEY_HANDLE_INVALID;
  const char *headers[3] = {key_header, NULL, NULL};
  if (p->digest != NULL) {
    snprintf(digest_header, sizeof digest_header, "X-SVC-Digest: %s", p->digest);
    headers[1] = digest_header;
  }
  http_answer a;
  CK_RV rv = http_call(op->slot->http, "POST", "/sign", headers, payload_bytes(p), p->len, &a);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "sign");
  if (rv == CKR_OK && a.len != sig_len) {
    debug_log("/sign answered %zu bytes, expected %zu", a.len, sig_len);
    rv = CKR_DEVICE_ERROR;
  }
  if (rv == CKR_OK) memcpy(sig, a.body, sig_len);
  http_answer_free(&a);
  return rv;
}

static CK_RV remote_verify(const operation *op, const payload *p, const unsigned char *sig,
                           size_t sig_len) {
  char key_header[512], len_header[64], digest_header[64];
  if (!header_safe(op->key->label) ||
      (size_t)snprintf(key_header, sizeof key_header, "X-SVC-Key: %s", op->key->label) >= sizeof key_header)
    return CKR_KEY_HANDLE_INVALID;
  snprintf(len_header, sizeof len_header, "X-SVC-Signature-Length: %zu", sig_len);
  const char *headers[4] = {key_header, len_header, NULL, NULL};
  if (p->digest != NULL) {
    snprintf(digest_header, sizeof digest_header, "X-SVC-Digest: %s", p->digest);
    headers[2] = digest_header;
  }
  unsigned char *body = malloc(sig_len + p->len + 1);
  if (body == NULL) return CKR_HOST_MEMORY;
  memcpy(body, sig, sig_len);
  memcpy(body + sig_len, payload_bytes(p), p->len);
  http_answer a;
  CK_RV rv = http_call(op->slot->http, "POST", "/verify", headers, body, sig_len + p->len, &a);
  free(body);
  if (rv == CKR_OK) rv = status_to_rv(a.status, "verify");
  http_answer_free(&a);
  return rv;
}

/* ---- sign ------------------------------------------------------------------------------------------ */

static CK_RV op_init(session_t *s, operation *op, CK_MECHANISM *mech, CK_OBJECT_HANDLE hKey,
                     int signing) {
  if (mech == NULL) return CKR_ARGUMENTS_BAD;
  if (op->active) return CKR_OPERATION_ACTIVE;
  int is_private;
  remote_key *k = key_of(s, hKey, &is_private);
  if (k == NULL) return CKR_KEY_HANDLE_INVALID;
  if (signing && !is_private) return CKR_KEY_FUNCTION_NOT_PERMITTED;
  slot_t *slot = &g.slots[s->slot];
  sign_plan plan;
  pthread_mutex_lock(&slot->lock);
  CK_RV rv = mech_plan(k, mech, &plan);
  pthread_mutex_unlock(&slot->lock);
  if (rv == CKR_KEY_TYPE_INCONSISTENT) {
    /* A mechanism no key here signs with is invalid; one for other key types is inconsistent. */
    CK_MECHANISM_INFO info;
    pthread_mutex_lock(&slot->lock);
    token_listing all = slot_view(slot);
    if (mech_info(&all, mech->mechanism, &info) != CKR_OK) rv = CKR_MECHANISM_INVALID;
    pthread_mutex_unlock(&slot->lock);
  }
  if (rv != CKR_OK) return rv;
  memset(op, 0, sizeof *op);
  op->active = 1;
  op->key = k;
  op->slot = slot;
  op->plan = plan;
  return CKR_OK;
}

EXPORT CK_RV C_SignInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = op_init(s, &s->sign, pMechanism, hKey, 1);
  session_leave(s);
  return rv;
}

/* Length query and buffer check: CKR_OK with *len set and `done` 0 when the caller only asked. */
static CK_RV sig_buffer(const operation *op, CK_BYTE *sig, CK_ULONG *len, int *proceed) {
  size_t need = key_signature_length(op->key);
  *proceed = 0;
  if (sig == NULL) {
    *len = need;
    return CKR_OK;
  }
  if (*len < need) {
    *len = need;
    return CKR_BUFFER_TOO_SMALL;
  }
  *proceed = 1;
  return CKR_OK;
}

static CK_RV sign_finish(operation *op, CK_BYTE *sig, CK_ULONG *len) {
  payload p;
  CK_RV rv = acc_finish(op, &p);
  size_t need = key_signature_length(op->key);
  if (rv == CKR_OK) rv = remote_sign(op, &p, sig, need);
  if (rv == CKR_OK) *len = need;
  return rv;
}

EXPORT CK_RV C_Sign(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                    CK_BYTE *pSignature, CK_ULONG *pulSignatureLen) {
  if (pulSignatureLen == NULL || (pData == NULL && ulDataLen > 0)) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->sign;
  int proceed = 0;
  if (!op->active)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (op->acc != ACC_NONE)
    rv = CKR_OPERATION_ACTIVE; /* a multi-part signature is under way */
  else
    rv = sig_buffer(op, pSignature, pulSignatureLen, &proceed);
  if (proceed) {
    rv = acc_start(op, 0, 0, ulDataLen);
    if (rv == CKR_OK) rv = acc_add(op, pData, ulDataLen);
    if (rv == CKR_OK) rv = sign_finish(op, pSignature, pulSignatureLen);
    op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_SignUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  if (pPart == NULL && ulPartLen > 0) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->sign;
  if (!op->active) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else {
    if (op->acc == ACC_NONE) rv = acc_start(op, 0, 1, 0);
    if (rv == CKR_OK) rv = acc_add(op, pPart, ulPartLen);
    if (rv != CKR_OK) op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_SignFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG *pulSignatureLen) {
  if (pulSignatureLen == NULL) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->sign;
  int proceed = 0;
  rv = op->active ? sig_buffer(op, pSignature, pulSignatureLen, &proceed)
                  : CKR_OPERATION_NOT_INITIALIZED;
  if (proceed) {
    if (op->acc == ACC_NONE) rv = acc_start(op, 0, 1, 0);
    if (rv == CKR_OK) rv = sign_finish(op, pSignature, pulSignatureLen);
    op_end(op);
  }
  session_leave(s);
  return rv;
}

/* ---- verify ---------------------------------------------------------------------------------------- */

EXPORT CK_RV C_VerifyInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = op_init(s, &s->verify, pMechanism, hKey, 0);
  session_leave(s);
  return rv;
}

static CK_RV verify_finish(operation *op, const CK_BYTE *sig, CK_ULONG sig_len) {
  payload p;
  CK_RV rv = acc_finish(op, &p);
  if (rv != CKR_OK) return rv;
  if (sig_len != key_signature_length(op->key)) return CKR_SIGNATURE_LEN_RANGE;
  if (verify_local_possible(op->key))
    return verify_local(op->key, p.md_nid, payload_bytes(&p), p.len, sig, sig_len);
  return remote_verify(op, &p, sig, sig_len);
}

EXPORT CK_RV C_Verify(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                      CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  if ((pData == NULL && ulDataLen > 0) || pSignature == NULL) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->verify;
  if (!op->active) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else if (op->acc != ACC_NONE) {
    rv = CKR_OPERATION_ACTIVE;
  } else {
    rv = acc_start(op, 1, 0, ulDataLen);
    if (rv == CKR_OK) rv = acc_add(op, pData, ulDataLen);
    if (rv == CKR_OK) rv = verify_finish(op, pSignature, ulSignatureLen);
    op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifyUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  if (pPart == NULL && ulPartLen > 0) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->verify;
  if (!op->active) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else {
    if (op->acc == ACC_NONE) rv = acc_start(op, 1, 1, 0);
    if (rv == CKR_OK) rv = acc_add(op, pPart, ulPartLen);
    if (rv != CKR_OK) op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifyFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  if (pSignature == NULL) return CKR_ARGUMENTS_BAD;
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  operation *op = &s->verify;
  if (!op->active) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else {
    if (op->acc == ACC_NONE) rv = acc_start(op, 1, 1, 0);
    if (rv == CKR_OK) rv = verify_finish(op, pSignature, ulSignatureLen);
    op_end(op);
  }
  session_leave(s);
  return rv;
}
