/* Object management, digests, signing and verification, key generation and random numbers. */
#include "p11_ops.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "mldsa.h"
#include "svcmod.h"

#define EXPORT __attribute__((visibility("default")))

static const uint8_t OID_P256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const uint8_t OID_ED25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
static const uint8_t NAME_ED25519[] = {0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd',
                                       's',  '2',  '5', '5', '1', '9'};
static const uint8_t EMPTY[1];

static int level_of_set(CK_ULONG set) {
  return set == CKP_ML_DSA_44 ? 44 : set == CKP_ML_DSA_65 ? 65 : set == CKP_ML_DSA_87 ? 87 : 0;
}

static int attr_is(const CK_ATTRIBUTE *a, const uint8_t *v, size_t n) {
  return a != NULL && a->ulValueLen == n && a->pValue != NULL && memcmp(a->pValue, v, n) == 0;
}

static int is_ed25519_params(const CK_ATTRIBUTE *a) {
  return attr_is(a, OID_ED25519, sizeof OID_ED25519) ||
         attr_is(a, NAME_ED25519, sizeof NAME_ED25519);
}

static int is_p256_params(const CK_ATTRIBUTE *a) { return attr_is(a, OID_P256, sizeof OID_P256); }

/* CKA_EC_POINT is a DER OCTET STRING of the raw point (as SoftHSM2 shows it); a raw point is
 * accepted on input and wrapped. */
static CK_RV ec_point_der(const CK_ATTRIBUTE *a, size_t rawlen, uint8_t *der) {
  if (a == NULL || a->pValue == NULL) return CKR_TEMPLATE_INCOMPLETE;
  const uint8_t *p = a->pValue;
  if (a->ulValueLen == rawlen + 2 && p[0] == 0x04 && p[1] == rawlen) {
    memcpy(der, p, rawlen + 2);
  } else if (a->ulValueLen == rawlen) {
    der[0] = 0x04;
    der[1] = (uint8_t)rawlen;
    memcpy(der + 2, p, rawlen);
  } else {
    return CKR_ATTRIBUTE_VALUE_INVALID;
  }
  return CKR_OK;
}

/* ---- creating and registering objects ----------------------------------------------------------- */

static CK_RV may_create(const session_t *s, int token, int priv) {
  if (token && !(s->flags & CKF_RW_SESSION)) return CKR_SESSION_READ_ONLY;
  if (priv && g.role != (long)CKU_USER) return CKR_USER_NOT_LOGGED_IN;
  return CKR_OK;
}

/* Gives the objects handles and, for token objects, file ids and files (key material sealed under
 * the master key). Called with g.lock held; on failure nothing is linked and nothing stays on
 * disk, and the caller still owns the objects. */
static CK_RV register_objects(session_t *s, object_t **objs, size_t n, CK_OBJECT_HANDLE *out) {
  CK_RV rv = CKR_OK;
  size_t ntoken = 0;
  for (size_t i = 0; i < n && rv == CKR_OK; i++) {
    rv = may_create(s, objs[i]->on_token, objs[i]->is_private);
    ntoken += objs[i]->on_token;
  }
  if (rv != CKR_OK) return rv;
  if (ntoken > 0) {
    int fd = store_lock();
    token_state t;
    rv = fd < 0 ? CKR_DEVICE_ERROR : store_read_token(&t);
    if (rv == CKR_OK && !t.initialized) rv = CKR_TOKEN_NOT_INITIALIZED;
    if (rv == CKR_OK) {
      for (size_t i = 0; i < n; i++)
        if (objs[i]->on_token) objs[i]->file_id = objs[i]->handle = t.next_id++;
      rv = store_write_token(&t);
    }
    size_t written = 0;
    for (size_t i = 0; i < n && rv == CKR_OK; i++) {
      if (!objs[i]->on_token) continue;
      if (objs[i]->secret) rv = object_seal(objs[i]);
      if (rv == CKR_OK) rv = store_write_object(objs[i]);
      if (rv == CKR_OK) written = i + 1;
    }
    if (rv != CKR_OK)
      for (size_t i = 0; i < written; i++)
        if (objs[i]->on_token) store_delete_object(objs[i]->file_id);
    OPENSSL_cleanse(&t, sizeof t);
    store_unlock(fd);
    if (rv != CKR_OK) return rv;
  }
  for (size_t i = 0; i < n; i++) {
    if (!objs[i]->on_token) {
      objs[i]->handle = g.next_session_object++;
      objs[i]->owner = s->handle;
    }
    object_link(objs[i]);
    out[i] = objs[i]->handle;
  }
  return CKR_OK;
}

static CK_RV set_secret(object_t *o, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
  o->secret = malloc(alen + blen);
  if (o->secret == NULL) return CKR_HOST_MEMORY;
  memcpy(o->secret, a, alen);
  if (blen) memcpy(o->secret + alen, b, blen);
  o->secret_len = alen + blen;
  return CKR_OK;
}

static CK_RV create_public(const CK_ATTRIBUTE *t, CK_ULONG n, CK_KEY_TYPE kt, object_t **out) {
  static const CK_ATTRIBUTE_TYPE mldsa[] = {CKA_PARAMETER_SET, CKA_VALUE};
  static const CK_ATTRIBUTE_TYPE ec[] = {CKA_EC_PARAMS, CKA_EC_POINT};
  object_t *o = NULL;
  CK_RV rv;
  const CK_ATTRIBUTE *value = tmpl_find(t, n, CKA_VALUE);
  if (kt == CKK_ML_DSA) {
    rv = object_build(CKO_PUBLIC_KEY, kt, CK_UNAVAILABLE_INFORMATION, t, n, mldsa, 2, &o);
    CK_ULONG set = 0;
    int present = 0;
    if (rv == CKR_OK) rv = tmpl_ulong(t, n, CKA_PARAMETER_SET, &set, &present);
    const mldsa_params *p = mldsa_params_by_level(level_of_set(set));
    if (rv == CKR_OK && (!present || value == NULL)) rv = CKR_TEMPLATE_INCOMPLETE;
    if (rv == CKR_OK && p == NULL) rv = CKR_PARAMETER_SET_NOT_SUPPORTED;
    if (rv == CKR_OK && value->ulValueLen != p->pk_bytes) rv = CKR_ATTRIBUTE_VALUE_INVALID;
    if (rv == CKR_OK) rv = object_set_attr(o, CKA_PARAMETER_SET, &set, sizeof set);
    if (rv == CKR_OK) rv = object_set_attr(o, CKA_VALUE, value->pValue, value->ulValueLen);
  } else if (kt == CKK_COMPOSITE_MLDSA65_ED25519) {
    rv = object_build(CKO_PUBLIC_KEY, kt, CK_UNAVAILABLE_INFORMATION, t, n, mldsa + 1, 1, &o);
    if (rv == CKR_OK && value == NULL) rv = CKR_TEMPLATE_INCOMPLETE;
    if (rv == CKR_OK && value->ulValueLen != COMPOSITE_PK_BYTES) rv = CKR_ATTRIBUTE_VALUE_INVALID;
    if (rv == CKR_OK) rv = object_set_attr(o, CKA_VALUE, value->pValue, value->ulValueLen);
  } else if (kt == CKK_EC_EDWARDS || kt == CKK_EC) {
    rv = object_build(CKO_PUBLIC_KEY, kt, CK_UNAVAILABLE_INFORMATION, t, n, ec, 2, &o);
    const CK_ATTRIBUTE *params = tmpl_find(t, n, CKA_EC_PARAMS);
    size_t raw = kt == CKK_EC ? P256_POINT_BYTES : ED25519_KEY_BYTES;
    uint8_t der[P256_POINT_BYTES + 2];
    if (rv == CKR_OK && params == NULL) rv = CKR_TEMPLATE_INCOMPLETE;
    if (rv == CKR_OK && !(kt == CKK_EC ? is_p256_params(params) : is_ed25519_params(params)))
      rv = CKR_CURVE_NOT_SUPPORTED;
    if (rv == CKR_OK) rv = ec_point_der(tmpl_find(t, n, CKA_EC_POINT), raw, der);
    if (rv == CKR_OK && kt == CKK_EC && !p256_point_valid(der + 2, raw))
      rv = CKR_ATTRIBUTE_VALUE_INVALID;
    if (rv == CKR_OK) rv = object_set_attr(o, CKA_EC_PARAMS, params->pValue, params->ulValueLen);
    if (rv == CKR_OK) rv = object_set_attr(o, CKA_EC_POINT, der, raw + 2);
  } else {
    return CKR_ATTRIBUTE_VALUE_INVALID; /* key type not offered */
  }
  if (rv != CKR_OK && o) object_free(o);
  *out = rv == CKR_OK ? o : NULL;
  return rv;
}

static CK_RV create_secret(const CK_ATTRIBUTE *t, CK_ULONG n, CK_KEY_TYPE kt, object_t **out) {
  static const CK_ATTRIBUTE_TYPE extra[] = {CKA_VALUE, CKA_VALUE_LEN};
  if (kt != CKK_GENERIC_SECRET) return CKR_ATTRIBUTE_VALUE_INVALID;
  object_t *o = NULL;
  CK_RV rv = object_build(CKO_SECRET_KEY, kt, CK_UNAVAILABLE_INFORMATION, t, n, extra, 2, &o);
  const CK_ATTRIBUTE *value = tmpl_find(t, n, CKA_VALUE);
  CK_ULONG len = value ? value->ulValueLen : 0, given = 0;
  int present = 0;
  if (rv == CKR_OK && value == NULL) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK && (len == 0 || len > 1024)) rv = CKR_ATTRIBUTE_VALUE_INVALID;
  if (rv == CKR_OK) rv = tmpl_ulong(t, n, CKA_VALUE_LEN, &given, &present);
  if (rv == CKR_OK && present && given != len) rv = CKR_TEMPLATE_INCONSISTENT;
  if (rv == CKR_OK) rv = object_set_attr(o, CKA_VALUE_LEN, &len, sizeof len);
  if (rv == CKR_OK) rv = set_secret(o, value->pValue, len, NULL, 0);
  if (rv != CKR_OK && o) object_free(o);
  *out = rv == CKR_OK ? o : NULL;
  return rv;
}

EXPORT CK_RV C_CreateObject(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount,
                            CK_OBJECT_HANDLE *phObject) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  CK_ULONG cls = 0, kt = 0;
  int has_cls = 0, has_kt = 0;
  object_t *o = NULL;
  if (phObject == NULL || (pTemplate == NULL && ulCount > 0)) rv = CKR_ARGUMENTS_BAD;
  if (rv == CKR_OK) rv = tmpl_ulong(pTemplate, ulCount, CKA_CLASS, &cls, &has_cls);
  if (rv == CKR_OK) rv = tmpl_ulong(pTemplate, ulCount, CKA_KEY_TYPE, &kt, &has_kt);
  if (rv == CKR_OK && (!has_cls || !has_kt)) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK) {
    if (cls == CKO_PUBLIC_KEY)
      rv = create_public(pTemplate, ulCount, kt, &o);
    else if (cls == CKO_SECRET_KEY)
      rv = create_secret(pTemplate, ulCount, kt, &o);
    else
      rv = CKR_TEMPLATE_INCONSISTENT; /* private keys are generated here, never imported */
  }
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    rv = register_objects(s, &o, 1, phObject);
    pthread_mutex_unlock(&g.lock);
    if (rv != CKR_OK) object_free(o);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_DestroyObject(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pthread_mutex_lock(&g.lock);
  object_t *o = object_find(hObject);
  if (o == NULL || !object_visible(o))
    rv = CKR_OBJECT_HANDLE_INVALID;
  else if (o->on_token && !(s->flags & CKF_RW_SESSION))
    rv = CKR_SESSION_READ_ONLY;
  if (rv == CKR_OK && o->on_token) {
    int fd = store_lock();
    rv = fd < 0 ? CKR_DEVICE_ERROR : store_delete_object(o->file_id);
    store_unlock(fd);
  }
  if (rv == CKR_OK) object_unlink_free(o);
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_GetAttributeValue(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject,
                                 CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (pTemplate == NULL && ulCount > 0) rv = CKR_ARGUMENTS_BAD;
  pthread_mutex_lock(&g.lock);
  object_t *o = rv == CKR_OK ? object_find(hObject) : NULL;
  if (rv == CKR_OK && (o == NULL || !object_visible(o))) rv = CKR_OBJECT_HANDLE_INVALID;
  if (rv == CKR_OK) rv = object_get_attributes(o, pTemplate, ulCount);
  pthread_mutex_unlock(&g.lock);
  session_leave(s);
  return rv;
}

/* ---- finding -------------------------------------------------------------------------------------- */

EXPORT CK_RV C_FindObjectsInit(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate,
                               CK_ULONG ulCount) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (s->finding)
    rv = CKR_OPERATION_ACTIVE;
  else if (pTemplate == NULL && ulCount > 0)
    rv = CKR_ARGUMENTS_BAD;
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    store_refresh(0);
    size_t n = 0;
    for (object_t *o = g.objects; o; o = o->next) n++;
    s->found = malloc((n ? n : 1) * sizeof *s->found);
    s->nfound = s->foundpos = 0;
    if (s->found == NULL) rv = CKR_HOST_MEMORY;
    for (object_t *o = g.objects; o && rv == CKR_OK; o = o->next)
      if (object_visible(o) && object_matches(o, pTemplate, ulCount))
        s->found[s->nfound++] = o->handle;
    s->finding = rv == CKR_OK;
    pthread_mutex_unlock(&g.lock);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_FindObjects(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE *phObject,
                           CK_ULONG ulMaxObjectCount, CK_ULONG *pulObjectCount) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (!s->finding)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (pulObjectCount == NULL || (phObject == NULL && ulMaxObjectCount > 0))
    rv = CKR_ARGUMENTS_BAD;
  if (rv == CKR_OK) {
    CK_ULONG k = 0;
    while (k < ulMaxObjectCount && s->foundpos < s->nfound) phObject[k++] = s->found[s->foundpos++];
    *pulObjectCount = k;
  }
  session_leave(s);
  return rv;
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

/* ---- digests ------------------------------------------------------------------------------------- */

EXPORT CK_RV C_DigestInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  const EVP_MD *md = NULL;
  if (s->digest)
    rv = CKR_OPERATION_ACTIVE;
  else if (pMechanism == NULL)
    rv = CKR_ARGUMENTS_BAD;
  else if (pMechanism->mechanism == CKM_SHA256)
    md = EVP_sha256();
  else if (pMechanism->mechanism == CKM_SHA384)
    md = EVP_sha384();
  else if (pMechanism->mechanism == CKM_SHA512)
    md = EVP_sha512();
  else
    rv = CKR_MECHANISM_INVALID;
  if (rv == CKR_OK && pMechanism->pParameter != NULL) rv = CKR_MECHANISM_PARAM_INVALID;
  if (rv == CKR_OK) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    if (c == NULL || EVP_DigestInit_ex(c, md, NULL) != 1) {
      EVP_MD_CTX_free(c);
      rv = CKR_HOST_MEMORY;
    } else {
      s->digest = c;
    }
  }
  session_leave(s);
  return rv;
}

static void digest_end(session_t *s) {
  EVP_MD_CTX_free(s->digest);
  s->digest = NULL;
}

/* Two-call convention: a NULL output (or one too small) reports the length and keeps the
 * operation; anything else ends it. */
static CK_RV digest_out(session_t *s, const CK_BYTE *data, CK_ULONG len, CK_BYTE *out,
                        CK_ULONG *outlen) {
  if (!s->digest) return CKR_OPERATION_NOT_INITIALIZED;
  if (outlen == NULL || (data == NULL && len > 0)) {
    digest_end(s);
    return CKR_ARGUMENTS_BAD;
  }
  CK_ULONG need = (CK_ULONG)EVP_MD_CTX_get_size((EVP_MD_CTX *)s->digest);
  if (out == NULL) {
    *outlen = need;
    return CKR_OK;
  }
  if (*outlen < need) {
    *outlen = need;
    return CKR_BUFFER_TOO_SMALL;
  }
  int ok = (len == 0 || EVP_DigestUpdate(s->digest, data, len) == 1) &&
           EVP_DigestFinal_ex(s->digest, out, NULL) == 1;
  *outlen = need;
  digest_end(s);
  return ok ? CKR_OK : CKR_FUNCTION_FAILED;
}

EXPORT CK_RV C_Digest(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                      CK_BYTE *pDigest, CK_ULONG *pulDigestLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = digest_out(s, pData, ulDataLen, pDigest, pulDigestLen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_DigestUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (!s->digest)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (pPart == NULL && ulPartLen > 0)
    rv = CKR_ARGUMENTS_BAD;
  else if (ulPartLen > 0 && EVP_DigestUpdate(s->digest, pPart, ulPartLen) != 1)
    rv = CKR_FUNCTION_FAILED;
  if (rv != CKR_OK && rv != CKR_OPERATION_NOT_INITIALIZED) digest_end(s);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_DigestFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pDigest, CK_ULONG *pulDigestLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = digest_out(s, NULL, 0, pDigest, pulDigestLen);
  session_leave(s);
  return rv;
}

/* ---- signing and verification ------------------------------------------------------------------- */

static CK_RV mech_fits_key(CK_MECHANISM_TYPE m, CK_KEY_TYPE kt) {
  if (config_hides(&g.cfg, m)) return CKR_MECHANISM_INVALID;
  CK_KEY_TYPE want;
  switch (m) {
    case CKM_ML_DSA:
    case CKM_ML_DSA_EXTERNAL_MU: want = CKK_ML_DSA; break;
    case CKM_COMPOSITE_MLDSA65_ED25519: want = CKK_COMPOSITE_MLDSA65_ED25519; break;
    case CKM_EDDSA: want = CKK_EC_EDWARDS; break;
    case CKM_ECDSA:
    case CKM_ECDSA_SHA256: want = CKK_EC; break;
    case CKM_SHA256_HMAC: want = CKK_GENERIC_SECRET; break;
    default: return CKR_MECHANISM_INVALID;
  }
  return kt == want ? CKR_OK : CKR_KEY_TYPE_INCONSISTENT;
}

/* CKM_ML_DSA and the composite take an optional CK_SIGN_ADDITIONAL_CONTEXT; CKM_EDDSA an optional
 * CK_EDDSA_PARAMS for pure Ed25519 only; the others no parameter. CKM_ML_DSA_EXTERNAL_MU takes the
 * same parameter for its hedge only: mu already holds the context, so a context is refused. */
static CK_RV parse_params(const CK_MECHANISM *m, op_t *op) {
  op->deterministic = 0;
  op->ctxlen = 0;
  if (m->mechanism == CKM_ML_DSA || m->mechanism == CKM_COMPOSITE_MLDSA65_ED25519 ||
      m->mechanism == CKM_ML_DSA_EXTERNAL_MU) {
    if (m->pParameter == NULL) return m->ulParameterLen == 0 ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
    if (m->ulParameterLen != sizeof(CK_SIGN_ADDITIONAL_CONTEXT)) return CKR_MECHANISM_PARAM_INVALID;
    const CK_SIGN_ADDITIONAL_CONTEXT *p = m->pParameter;
    if (p->hedgeVariant > CKH_DETERMINISTIC_REQUIRED) return CKR_MECHANISM_PARAM_INVALID;
    if (p->ulContextLen > 255 || (p->pContext == NULL && p->ulContextLen > 0))
      return CKR_MECHANISM_PARAM_INVALID;
    if (m->mechanism == CKM_ML_DSA_EXTERNAL_MU && p->ulContextLen > 0)
      return CKR_MECHANISM_PARAM_INVALID;
    op->deterministic = p->hedgeVariant == CKH_DETERMINISTIC_REQUIRED;
    op->ctxlen = p->ulContextLen;
    if (op->ctxlen) memcpy(op->ctx, p->pContext, op->ctxlen);
    return CKR_OK;
  }
  if (m->mechanism == CKM_EDDSA && m->pParameter != NULL) {
    if (m->ulParameterLen != sizeof(CK_EDDSA_PARAMS)) return CKR_MECHANISM_PARAM_INVALID;
    const CK_EDDSA_PARAMS *p = m->pParameter;
    return !p->phFlag && p->ulContextDataLen == 0 ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
  }
  return m->pParameter == NULL && m->ulParameterLen == 0 ? CKR_OK : CKR_MECHANISM_PARAM_INVALID;
}

static size_t signature_bytes(const op_t *op) {
  switch (op->mech) {
    case CKM_ML_DSA:
    case CKM_ML_DSA_EXTERNAL_MU: return mldsa_params_by_level(op->level)->sig_bytes;
    case CKM_COMPOSITE_MLDSA65_ED25519: return COMPOSITE_SIG_BYTES;
    case CKM_EDDSA: return ED25519_SIG_BYTES;
    case CKM_SHA256_HMAC: return 32;
    default: return P256_SIG_BYTES;
  }
}

static CK_RV copy_key(op_t *op, const uint8_t *k, size_t len) {
  if (k == NULL || len > OP_KEY_MAX) return CKR_DEVICE_ERROR;
  memcpy(op->key, k, len);
  op->keylen = len;
  return CKR_OK;
}

/* Checks the key and copies what the operation needs into the session's reservation, so signing
 * runs without the module lock and survives a logout of another session. */
static CK_RV op_start(op_t *op, const CK_MECHANISM *m, CK_OBJECT_HANDLE hKey, int signing) {
  if (op->active) return CKR_OPERATION_ACTIVE;
  if (m == NULL) return CKR_ARGUMENTS_BAD;
  memset(op, 0, offsetof(op_t, key));
  op->mech = m->mechanism;
  /* An unknown mechanism is named as such before anything about the key. */
  if (mech_fits_key(m->mechanism, CK_UNAVAILABLE_INFORMATION) == CKR_MECHANISM_INVALID)
    return CKR_MECHANISM_INVALID;
  CK_RV rv = parse_params(m, op);
  pthread_mutex_lock(&g.lock);
  object_t *o = object_find(hKey);
  if (rv == CKR_OK && (o == NULL || !object_visible(o))) rv = CKR_KEY_HANDLE_INVALID;
  if (rv == CKR_OK) rv = mech_fits_key(m->mechanism, o->ktype);
  if (rv == CKR_OK && !object_bool(o, signing ? CKA_SIGN : CKA_VERIFY))
    rv = CKR_KEY_FUNCTION_NOT_PERMITTED;
  if (rv == CKR_OK) {
    op->ktype = o->ktype;
    op->level = level_of_set(object_ulong(o, CKA_PARAMETER_SET));
    if (o->ktype == CKK_ML_DSA && op->level == 0) rv = CKR_DEVICE_ERROR;
  }
  if (rv == CKR_OK) {
    if (o->cls == CKO_PUBLIC_KEY) {
      const attr_t *a = object_attr(o, o->ktype == CKK_EC || o->ktype == CKK_EC_EDWARDS
                                           ? CKA_EC_POINT
                                           : CKA_VALUE);
      int der = o->ktype == CKK_EC || o->ktype == CKK_EC_EDWARDS; /* strip 04 len */
      rv = a == NULL || (der && a->len < 2) ? CKR_DEVICE_ERROR
                                            : copy_key(op, a->val + 2 * der, a->len - 2 * der);
    } else if (o->secret == NULL) {
      rv = g.role == (long)CKU_USER ? CKR_DEVICE_ERROR : CKR_USER_NOT_LOGGED_IN;
    } else {
      rv = copy_key(op, o->secret, o->secret_len);
    }
  }
  pthread_mutex_unlock(&g.lock);
  if (rv == CKR_OK)
    op->active = 1;
  else
    OPENSSL_cleanse(op, sizeof *op);
  return rv;
}

static CK_RV do_sign(const op_t *op, const uint8_t *data, size_t len, uint8_t *out) {
  if (data == NULL) data = EMPTY;
  uint8_t rnd[32] = {0}, digest[32];
  int r = -1;
  switch (op->mech) {
    case CKM_ML_DSA:
      if (!op->deterministic && random_bytes(rnd, 32) != 0) return CKR_FUNCTION_FAILED;
      r = mldsa_sign(mldsa_params_by_level(op->level), op->key + MLDSA_SEED_BYTES, data, len,
                     op->ctx, op->ctxlen, rnd, out);
      break;
    case CKM_ML_DSA_EXTERNAL_MU:
      if (len != MLDSA_MU_BYTES) return CKR_DATA_LEN_RANGE;
      if (!op->deterministic && random_bytes(rnd, 32) != 0) return CKR_FUNCTION_FAILED;
      r = mldsa_sign_mu(mldsa_params_by_level(op->level), op->key + MLDSA_SEED_BYTES, data, rnd,
                        out);
      break;
    case CKM_COMPOSITE_MLDSA65_ED25519:
      if (!op->deterministic && random_bytes(rnd, 32) != 0) return CKR_FUNCTION_FAILED;
      r = composite_sign(op->key, op->key + COMPOSITE_SECRET_BYTES, data, len, op->ctx, op->ctxlen,
                         rnd, out);
      break;
    case CKM_EDDSA: r = ed25519_sign(op->key, data, len, out); break;
    case CKM_ECDSA:
      if (len == 0 || len > 64) return CKR_DATA_LEN_RANGE;
      r = p256_sign_digest(op->key, op->key + P256_PRIV_BYTES, data, len, out);
      break;
    case CKM_ECDSA_SHA256:
      r = sha2(256, data, len, digest);
      if (r == 0) r = p256_sign_digest(op->key, op->key + P256_PRIV_BYTES, digest, 32, out);
      break;
    case CKM_SHA256_HMAC: r = hmac_sha256(op->key, op->keylen, data, len, out); break;
  }
  OPENSSL_cleanse(rnd, sizeof rnd);
  return r == 0 ? CKR_OK : CKR_FUNCTION_FAILED;
}

static CK_RV do_verify(const op_t *op, const uint8_t *data, size_t len, const uint8_t *sig,
                       size_t siglen) {
  if (siglen != signature_bytes(op)) return CKR_SIGNATURE_LEN_RANGE;
  if (data == NULL) data = EMPTY;
  uint8_t digest[32], mac[32];
  int r = -1;
  switch (op->mech) {
    case CKM_ML_DSA:
      r = mldsa_verify(mldsa_params_by_level(op->level), op->key, op->keylen, data, len, op->ctx,
                       op->ctxlen, sig, siglen);
      break;
    case CKM_ML_DSA_EXTERNAL_MU:
      if (len != MLDSA_MU_BYTES) return CKR_DATA_LEN_RANGE;
      r = mldsa_verify_mu(mldsa_params_by_level(op->level), op->key, op->keylen, data, sig, siglen);
      break;
    case CKM_COMPOSITE_MLDSA65_ED25519:
      r = composite_verify(op->key, op->keylen, data, len, op->ctx, op->ctxlen, sig, siglen);
      break;
    case CKM_EDDSA:
      r = op->keylen == ED25519_KEY_BYTES ? ed25519_verify(op->key, data, len, sig, siglen) : -1;
      break;
    case CKM_ECDSA:
      if (len == 0 || len > 64) return CKR_DATA_LEN_RANGE;
      r = p256_verify_digest(op->key + (op->keylen - P256_POINT_BYTES), data, len, sig, siglen);
      break;
    case CKM_ECDSA_SHA256:
      if (sha2(256, data, len, digest) == 0)
        r = p256_verify_digest(op->key + (op->keylen - P256_POINT_BYTES), digest, 32, sig, siglen);
      break;
    case CKM_SHA256_HMAC:
      if (hmac_sha256(op->key, op->keylen, data, len, mac) == 0)
        r = CRYPTO_memcmp(mac, sig, 32) == 0;
      OPENSSL_cleanse(mac, sizeof mac);
      break;
  }
  return r == 1 ? CKR_OK : r == 0 ? CKR_SIGNATURE_INVALID : CKR_FUNCTION_FAILED;
}

static CK_RV op_append(op_t *op, const CK_BYTE *part, CK_ULONG len) {
  if (part == NULL && len > 0) return CKR_ARGUMENTS_BAD;
  /* CKM_ML_DSA_EXTERNAL_MU is single-part: its input is mu, not a message to stream. */
  if (op->mech == CKM_ML_DSA_EXTERNAL_MU) return CKR_FUNCTION_NOT_SUPPORTED;
  if (op->datalen + len > OP_DATA_MAX) return CKR_DATA_LEN_RANGE;
  if (op->datalen + len > op->datacap) {
    size_t cap = op->datacap ? op->datacap : 4096;
    while (cap < op->datalen + len) cap *= 2;
    uint8_t *nd = realloc(op->data, cap);
    if (nd == NULL) return CKR_HOST_MEMORY;
    op->data = nd;
    op->datacap = cap;
  }
  if (len) memcpy(op->data + op->datalen, part, len);
  op->datalen += len;
  op->updated = 1;
  return CKR_OK;
}

/* Sign with the two-call length convention; any other outcome ends the operation. */
static CK_RV sign_out(op_t *op, const CK_BYTE *data, CK_ULONG len, CK_BYTE *sig, CK_ULONG *siglen) {
  if (siglen == NULL || (data == NULL && len > 0)) {
    op_end(op);
    return CKR_ARGUMENTS_BAD;
  }
  CK_ULONG need = signature_bytes(op);
  if (sig == NULL) {
    *siglen = need;
    return CKR_OK;
  }
  if (*siglen < need) {
    *siglen = need;
    return CKR_BUFFER_TOO_SMALL;
  }
  CK_RV rv = do_sign(op, data, len, sig);
  *siglen = need;
  op_end(op);
  return rv;
}

EXPORT CK_RV C_SignInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                        CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = fault_injected("C_SignInit");
  if (rv == CKR_OK) rv = op_start(&s->ops->sign, pMechanism, hKey, 1);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_Sign(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                    CK_BYTE *pSignature, CK_ULONG *pulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->sign;
  CK_RV injected = fault_injected("C_Sign");
  if (!op->active)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (op->updated)
    rv = CKR_OPERATION_ACTIVE; /* a multi-part signature ends with C_SignFinal */
  else if (injected != CKR_OK) {
    op_end(op); /* a failed C_Sign ends the operation, as PKCS#11 says */
    rv = injected;
  } else
    rv = sign_out(op, pData, ulDataLen, pSignature, pulSignatureLen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_SignUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->sign;
  if (!op->active) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else {
    rv = op_append(op, pPart, ulPartLen);
    if (rv != CKR_OK) op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_SignFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature,
                         CK_ULONG *pulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->sign;
  if (!op->active)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else
    rv = sign_out(op, op->data, op->datalen, pSignature, pulSignatureLen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifyInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                          CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = op_start(&s->ops->verify, pMechanism, hKey, 0);
  session_leave(s);
  return rv;
}

/* Runs a verification that ends the operation whatever the outcome. */
static CK_RV verify_now(op_t *op, const CK_BYTE *data, CK_ULONG len, const CK_BYTE *sig,
                        CK_ULONG siglen) {
  CK_RV rv = (data == NULL && len > 0) || (sig == NULL && siglen > 0)
                 ? CKR_ARGUMENTS_BAD
                 : do_verify(op, data, len, sig, siglen);
  op_end(op);
  return rv;
}

EXPORT CK_RV C_Verify(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
                      CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (!op->active || op->verify_signature)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (op->updated)
    rv = CKR_OPERATION_ACTIVE;
  else
    rv = verify_now(op, pData, ulDataLen, pSignature, ulSignatureLen);
  session_leave(s);
  return rv;
}

static CK_RV verify_update(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen,
                           int verify_signature) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (!op->active || op->verify_signature != verify_signature) {
    rv = CKR_OPERATION_NOT_INITIALIZED;
  } else {
    rv = op_append(op, pPart, ulPartLen);
    if (rv != CKR_OK) op_end(op);
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifyUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return verify_update(hSession, pPart, ulPartLen, 0);
}

EXPORT CK_RV C_VerifyFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature,
                           CK_ULONG ulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (!op->active || op->verify_signature)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else
    rv = verify_now(op, op->data, op->datalen, pSignature, ulSignatureLen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifySignatureInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                                   CK_OBJECT_HANDLE hKey, CK_BYTE *pSignature,
                                   CK_ULONG ulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (pSignature == NULL && ulSignatureLen > 0) rv = CKR_ARGUMENTS_BAD;
  if (rv == CKR_OK) rv = op_start(op, pMechanism, hKey, 0);
  if (rv == CKR_OK && ulSignatureLen != signature_bytes(op)) {
    op_end(op);
    rv = CKR_SIGNATURE_LEN_RANGE;
  }
  if (rv == CKR_OK) {
    op->verify_signature = 1;
    memcpy(op->sig, pSignature, ulSignatureLen);
    op->siglen = ulSignatureLen;
  }
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifySignature(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (!op->active || !op->verify_signature)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else if (op->updated)
    rv = CKR_OPERATION_ACTIVE;
  else
    rv = verify_now(op, pData, ulDataLen, op->sig, op->siglen);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_VerifySignatureUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart,
                                     CK_ULONG ulPartLen) {
  return verify_update(hSession, pPart, ulPartLen, 1);
}

EXPORT CK_RV C_VerifySignatureFinal(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  if (!op->active || !op->verify_signature)
    rv = CKR_OPERATION_NOT_INITIALIZED;
  else
    rv = verify_now(op, op->data, op->datalen, op->sig, op->siglen);
  session_leave(s);
  return rv;
}

/* ---- key generation ------------------------------------------------------------------------------ */

typedef struct {
  const CK_ATTRIBUTE *pub, *priv;
  CK_ULONG npub, npriv;
} pair_templates;

/* Builds both halves with their generic attributes; the caller adds the key-specific ones. */
static CK_RV build_pair(const pair_templates *t, CK_KEY_TYPE kt, CK_MECHANISM_TYPE mech,
                        const CK_ATTRIBUTE_TYPE *pub_extra, size_t npe,
                        const CK_ATTRIBUTE_TYPE *priv_extra, size_t npre, object_t **pub,
                        object_t **priv) {
  *pub = *priv = NULL;
  CK_RV rv = object_build(CKO_PUBLIC_KEY, kt, mech, t->pub, t->npub, pub_extra, npe, pub);
  if (rv == CKR_OK)
    rv = object_build(CKO_PRIVATE_KEY, kt, mech, t->priv, t->npriv, priv_extra, npre, priv);
  return rv;
}

static CK_RV seed_from(const CK_ATTRIBUTE *t, CK_ULONG n, uint8_t *seed, size_t len) {
  const CK_ATTRIBUTE *a = tmpl_find(t, n, CKA_SEED);
  if (a == NULL) return random_bytes(seed, len) == 0 ? CKR_OK : CKR_FUNCTION_FAILED;
  if (a->ulValueLen != len || a->pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  memcpy(seed, a->pValue, len);
  return CKR_OK;
}

static CK_RV gen_mldsa(const pair_templates *t, object_t **pub, object_t **priv) {
  static const CK_ATTRIBUTE_TYPE pe[] = {CKA_PARAMETER_SET};
  static const CK_ATTRIBUTE_TYPE pre[] = {CKA_PARAMETER_SET, CKA_SEED};
  CK_RV rv = build_pair(t, CKK_ML_DSA, CKM_ML_DSA_KEY_PAIR_GEN, pe, 1, pre, 2, pub, priv);
  CK_ULONG set = 0, set2 = 0;
  int present = 0, present2 = 0;
  if (rv == CKR_OK) rv = tmpl_ulong(t->pub, t->npub, CKA_PARAMETER_SET, &set, &present);
  if (rv == CKR_OK) rv = tmpl_ulong(t->priv, t->npriv, CKA_PARAMETER_SET, &set2, &present2);
  if (rv == CKR_OK && !present) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK && present2 && set2 != set) rv = CKR_TEMPLATE_INCONSISTENT;
  const mldsa_params *p = mldsa_params_by_level(level_of_set(set));
  if (rv == CKR_OK && p == NULL) rv = CKR_PARAMETER_SET_NOT_SUPPORTED;
  uint8_t seed[32], pk[MLDSA_MAX_PK_BYTES], *sk = NULL;
  if (rv == CKR_OK) rv = seed_from(t->priv, t->npriv, seed, sizeof seed);
  if (rv == CKR_OK && (sk = malloc(p->sk_bytes)) == NULL) rv = CKR_HOST_MEMORY;
  if (rv == CKR_OK && mldsa_keygen(p, seed, pk, sk) != 0) rv = CKR_FUNCTION_FAILED;
  if (rv == CKR_OK) rv = object_set_attr(*pub, CKA_PARAMETER_SET, &set, sizeof set);
  if (rv == CKR_OK) rv = object_set_attr(*pub, CKA_VALUE, pk, p->pk_bytes);
  if (rv == CKR_OK) rv = object_set_attr(*priv, CKA_PARAMETER_SET, &set, sizeof set);
  if (rv == CKR_OK) rv = set_secret(*priv, seed, sizeof seed, sk, p->sk_bytes);
  if (sk) {
    OPENSSL_cleanse(sk, p->sk_bytes);
    free(sk);
  }
  OPENSSL_cleanse(seed, sizeof seed);
  return rv;
}

static CK_RV gen_composite(const pair_templates *t, object_t **pub, object_t **priv) {
  static const CK_ATTRIBUTE_TYPE pre[] = {CKA_SEED};
  CK_RV rv = build_pair(t, CKK_COMPOSITE_MLDSA65_ED25519, CKM_COMPOSITE_MLDSA65_ED25519, NULL, 0,
                        pre, 1, pub, priv);
  uint8_t secret[COMPOSITE_SECRET_BYTES], pk[COMPOSITE_PK_BYTES], sk[COMPOSITE_MLDSA_SK_BYTES];
  if (rv == CKR_OK) rv = seed_from(t->priv, t->npriv, secret, sizeof secret);
  if (rv == CKR_OK && composite_keygen(secret, pk, sk) != 0) rv = CKR_FUNCTION_FAILED;
  if (rv == CKR_OK) rv = object_set_attr(*pub, CKA_VALUE, pk, sizeof pk);
  if (rv == CKR_OK) rv = set_secret(*priv, secret, sizeof secret, sk, sizeof sk);
  OPENSSL_cleanse(secret, sizeof secret);
  OPENSSL_cleanse(sk, sizeof sk);
  return rv;
}

static CK_RV gen_ec(const pair_templates *t, CK_KEY_TYPE kt, object_t **pub, object_t **priv) {
  static const CK_ATTRIBUTE_TYPE pe[] = {CKA_EC_PARAMS};
  CK_MECHANISM_TYPE mech = kt == CKK_EC ? CKM_EC_KEY_PAIR_GEN : CKM_EC_EDWARDS_KEY_PAIR_GEN;
  CK_RV rv = build_pair(t, kt, mech, pe, 1, pe, 1, pub, priv);
  const CK_ATTRIBUTE *params = tmpl_find(t->pub, t->npub, CKA_EC_PARAMS);
  if (rv == CKR_OK && params == NULL) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK && !(kt == CKK_EC ? is_p256_params(params) : is_ed25519_params(params)))
    rv = CKR_CURVE_NOT_SUPPORTED;
  uint8_t secret[P256_PRIV_BYTES + P256_POINT_BYTES], point[2 + P256_POINT_BYTES];
  size_t privlen = kt == CKK_EC ? P256_PRIV_BYTES : ED25519_KEY_BYTES;
  size_t publen = kt == CKK_EC ? P256_POINT_BYTES : ED25519_KEY_BYTES;
  if (rv == CKR_OK) {
    int r = kt == CKK_EC ? p256_keygen(secret, secret + privlen)
                         : (random_bytes(secret, privlen) || ed25519_public(secret, secret + privlen));
    if (r != 0) rv = CKR_FUNCTION_FAILED;
  }
  point[0] = 0x04;
  point[1] = (uint8_t)publen;
  if (rv == CKR_OK) memcpy(point + 2, secret + privlen, publen);
  if (rv == CKR_OK) rv = object_set_attr(*pub, CKA_EC_PARAMS, params->pValue, params->ulValueLen);
  if (rv == CKR_OK) rv = object_set_attr(*pub, CKA_EC_POINT, point, publen + 2);
  if (rv == CKR_OK) rv = object_set_attr(*priv, CKA_EC_PARAMS, params->pValue, params->ulValueLen);
  if (rv == CKR_OK) rv = set_secret(*priv, secret, privlen + publen, NULL, 0);
  OPENSSL_cleanse(secret, sizeof secret);
  return rv;
}

EXPORT CK_RV C_GenerateKeyPair(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                               CK_ATTRIBUTE *pPublicKeyTemplate, CK_ULONG ulPublicKeyAttributeCount,
                               CK_ATTRIBUTE *pPrivateKeyTemplate,
                               CK_ULONG ulPrivateKeyAttributeCount, CK_OBJECT_HANDLE *phPublicKey,
                               CK_OBJECT_HANDLE *phPrivateKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  pair_templates t = {pPublicKeyTemplate, pPrivateKeyTemplate, ulPublicKeyAttributeCount,
                      ulPrivateKeyAttributeCount};
  object_t *objs[2] = {NULL, NULL};
  if (pMechanism == NULL || phPublicKey == NULL || phPrivateKey == NULL ||
      (t.pub == NULL && t.npub > 0) || (t.priv == NULL && t.npriv > 0))
    rv = CKR_ARGUMENTS_BAD;
  else if (pMechanism->pParameter != NULL || pMechanism->ulParameterLen != 0)
    rv = CKR_MECHANISM_PARAM_INVALID;
  if (rv == CKR_OK) {
    switch (pMechanism->mechanism) {
      case CKM_ML_DSA_KEY_PAIR_GEN: rv = gen_mldsa(&t, &objs[0], &objs[1]); break;
      case CKM_COMPOSITE_MLDSA65_ED25519: rv = gen_composite(&t, &objs[0], &objs[1]); break;
      case CKM_EC_EDWARDS_KEY_PAIR_GEN: rv = gen_ec(&t, CKK_EC_EDWARDS, &objs[0], &objs[1]); break;
      case CKM_EC_KEY_PAIR_GEN: rv = gen_ec(&t, CKK_EC, &objs[0], &objs[1]); break;
      default: rv = CKR_MECHANISM_INVALID;
    }
  }
  if (rv == CKR_OK) {
    CK_OBJECT_HANDLE h[2];
    pthread_mutex_lock(&g.lock);
    rv = register_objects(s, objs, 2, h);
    pthread_mutex_unlock(&g.lock);
    if (rv == CKR_OK) {
      *phPublicKey = h[0];
      *phPrivateKey = h[1];
    }
  }
  if (rv != CKR_OK)
    for (int i = 0; i < 2; i++)
      if (objs[i]) object_free(objs[i]);
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_GenerateKey(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                           CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount, CK_OBJECT_HANDLE *phKey) {
  static const CK_ATTRIBUTE_TYPE extra[] = {CKA_VALUE_LEN};
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  object_t *o = NULL;
  CK_ULONG len = 0;
  int present = 0;
  if (pMechanism == NULL || phKey == NULL || (pTemplate == NULL && ulCount > 0))
    rv = CKR_ARGUMENTS_BAD;
  else if (pMechanism->mechanism != CKM_GENERIC_SECRET_KEY_GEN)
    rv = CKR_MECHANISM_INVALID;
  else if (pMechanism->pParameter != NULL || pMechanism->ulParameterLen != 0)
    rv = CKR_MECHANISM_PARAM_INVALID;
  if (rv == CKR_OK)
    rv = object_build(CKO_SECRET_KEY, CKK_GENERIC_SECRET, CKM_GENERIC_SECRET_KEY_GEN, pTemplate,
                      ulCount, extra, 1, &o);
  if (rv == CKR_OK) rv = tmpl_ulong(pTemplate, ulCount, CKA_VALUE_LEN, &len, &present);
  if (rv == CKR_OK && !present) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK && (len == 0 || len > 1024)) rv = CKR_ATTRIBUTE_VALUE_INVALID;
  uint8_t key[1024];
  if (rv == CKR_OK && random_bytes(key, len) != 0) rv = CKR_FUNCTION_FAILED;
  if (rv == CKR_OK) rv = object_set_attr(o, CKA_VALUE_LEN, &len, sizeof len);
  if (rv == CKR_OK) rv = set_secret(o, key, len, NULL, 0);
  OPENSSL_cleanse(key, sizeof key);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    rv = register_objects(s, &o, 1, phKey);
    pthread_mutex_unlock(&g.lock);
  }
  if (rv != CKR_OK && o) object_free(o);
  session_leave(s);
  return rv;
}

/* ---- random ------------------------------------------------------------------------------------ */

EXPORT CK_RV C_SeedRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pSeed, CK_ULONG ulSeedLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (pSeed == NULL && ulSeedLen > 0)
    rv = CKR_ARGUMENTS_BAD;
  else if (ulSeedLen > 0)
    RAND_add(pSeed, (int)ulSeedLen, 0.0); /* mixed in, credited with no entropy */
  session_leave(s);
  return rv;
}

EXPORT CK_RV C_GenerateRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pRandomData,
                              CK_ULONG ulRandomLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (pRandomData == NULL && ulRandomLen > 0)
    rv = CKR_ARGUMENTS_BAD;
  else if (ulRandomLen > 0 && RAND_bytes(pRandomData, (int)ulRandomLen) != 1)
    rv = CKR_FUNCTION_FAILED;
  session_leave(s);
  return rv;
}
