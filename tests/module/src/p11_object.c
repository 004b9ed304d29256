/* Object functions: C_CreateObject, C_DestroyObject, C_GetAttributeValue, C_FindObjectsInit,
 * C_FindObjects, C_FindObjectsFinal. */
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "mldsa.h"
#include "pkcs11_functions.h"
#include "svcmod.h"

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
    if (rv == CKR_OK && !(kt == CKK_EC ? tmpl_is_p256_params(params) : tmpl_is_ed25519_params(params)))
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
  if (rv == CKR_OK) rv = object_set_secret(o, value->pValue, len, NULL, 0);
  if (rv != CKR_OK && o) object_free(o);
  *out = rv == CKR_OK ? o : NULL;
  return rv;
}

CK_RV C_CreateObject(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount,
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
  if (rv == CKR_OK && has_cls && cls == CKO_CERTIFICATE) {
    rv = certificate_build(pTemplate, ulCount, &o);
  } else if (rv == CKR_OK && (!has_cls || !has_kt)) {
    rv = CKR_TEMPLATE_INCOMPLETE;
  } else if (rv == CKR_OK) {
    if (cls == CKO_PUBLIC_KEY)
      rv = create_public(pTemplate, ulCount, kt, &o);
    else if (cls == CKO_SECRET_KEY)
      rv = create_secret(pTemplate, ulCount, kt, &o);
    else
      rv = CKR_TEMPLATE_INCONSISTENT; /* private keys are generated here, never imported */
  }
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    rv = object_register(s, &o, 1, phObject);
    pthread_mutex_unlock(&g.lock);
    if (rv != CKR_OK) object_free(o);
  }
  session_leave(s);
  return rv;
}

CK_RV C_DestroyObject(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject) {
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

CK_RV C_GetAttributeValue(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE hObject,
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

CK_RV C_FindObjectsInit(CK_SESSION_HANDLE hSession, CK_ATTRIBUTE *pTemplate, CK_ULONG ulCount) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  if (s->search.active)
    rv = CKR_OPERATION_ACTIVE;
  else if (pTemplate == NULL && ulCount > 0)
    rv = CKR_ARGUMENTS_BAD;
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    store_refresh(0);
    size_t n = 0;
    for (object_t *o = g.objects; o; o = o->next) n++;
    rv = pkcs11_search_start(&s->search, n);
    for (object_t *o = g.objects; o && rv == CKR_OK; o = o->next)
      if (object_visible(o) && object_matches(o, pTemplate, ulCount))
        pkcs11_search_add(&s->search, o->handle);
    pthread_mutex_unlock(&g.lock);
  }
  session_leave(s);
  return rv;
}

CK_RV C_FindObjects(CK_SESSION_HANDLE hSession, CK_OBJECT_HANDLE *phObject,
                    CK_ULONG ulMaxObjectCount, CK_ULONG *pulObjectCount) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_search_next(&s->search, phObject, ulMaxObjectCount, pulObjectCount);
  session_leave(s);
  return rv;
}

CK_RV C_FindObjectsFinal(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_search_end(&s->search);
  session_leave(s);
  return rv;
}
