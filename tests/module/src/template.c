/* Templates of C_CreateObject, C_GenerateKey and C_GenerateKeyPair: which attributes a caller may
 * set, their sizes, and the defaults of a new object. Private and secret keys are always
 * sensitive, private to the user and non-extractable. */
#include <stdlib.h>
#include <string.h>

#include "svcmod.h"

const CK_ATTRIBUTE *tmpl_find(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type) {
  for (CK_ULONG i = 0; i < n; i++)
    if (t[i].type == type) return &t[i];
  return NULL;
}

/* CK_BBOOL attribute: absent → def; present with length 1 → its value. */
CK_RV tmpl_bool(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type, int def, int *out) {
  const CK_ATTRIBUTE *a = tmpl_find(t, n, type);
  if (a == NULL) {
    *out = def;
    return CKR_OK;
  }
  if (a->ulValueLen != 1 || a->pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  *out = *(const CK_BBOOL *)a->pValue != 0;
  return CKR_OK;
}

/* CK_ULONG attribute (length 8): *present tells whether it was there. */
CK_RV tmpl_ulong(const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type, CK_ULONG *out,
                 int *present) {
  const CK_ATTRIBUTE *a = tmpl_find(t, n, type);
  *present = a != NULL;
  if (a == NULL) return CKR_OK;
  if (a->ulValueLen != sizeof(CK_ULONG) || a->pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  memcpy(out, a->pValue, sizeof(CK_ULONG));
  return CKR_OK;
}

static const CK_ATTRIBUTE_TYPE COMMON[] = {
    CKA_CLASS,      CKA_KEY_TYPE, CKA_TOKEN,      CKA_PRIVATE,  CKA_MODIFIABLE, CKA_COPYABLE,
    CKA_DESTROYABLE, CKA_LABEL,   CKA_ID,         CKA_START_DATE, CKA_END_DATE, CKA_DERIVE,
};
static const CK_ATTRIBUTE_TYPE PUBLIC[] = {CKA_SUBJECT, CKA_ENCRYPT, CKA_VERIFY, CKA_VERIFY_RECOVER,
                                           CKA_WRAP, CKA_TRUSTED};
static const CK_ATTRIBUTE_TYPE PRIVATE[] = {
    CKA_SUBJECT,     CKA_SENSITIVE,          CKA_DECRYPT,          CKA_SIGN,
    CKA_SIGN_RECOVER, CKA_UNWRAP,            CKA_EXTRACTABLE,      CKA_WRAP_WITH_TRUSTED,
    CKA_ALWAYS_AUTHENTICATE};
static const CK_ATTRIBUTE_TYPE SECRET[] = {CKA_SENSITIVE, CKA_ENCRYPT,     CKA_DECRYPT,
                                           CKA_SIGN,      CKA_VERIFY,      CKA_WRAP,
                                           CKA_UNWRAP,    CKA_EXTRACTABLE, CKA_WRAP_WITH_TRUSTED,
                                           CKA_TRUSTED};

static int listed(CK_ATTRIBUTE_TYPE type, const CK_ATTRIBUTE_TYPE *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (list[i] == type) return 1;
  return 0;
}
#define LISTED(type, arr) listed(type, arr, sizeof arr / sizeof arr[0])

/* Booleans copied from the template (or defaulted) into the new object, per class. */
typedef struct {
  CK_ATTRIBUTE_TYPE type;
  int def;
} bool_default;

static const bool_default PUBLIC_BOOLS[] = {{CKA_ENCRYPT, 0}, {CKA_VERIFY, 1},
                                            {CKA_VERIFY_RECOVER, 0}, {CKA_WRAP, 0},
                                            {CKA_TRUSTED, 0}};
static const bool_default PRIVATE_BOOLS[] = {{CKA_DECRYPT, 0}, {CKA_SIGN, 1},
                                             {CKA_SIGN_RECOVER, 0}, {CKA_UNWRAP, 0},
                                             {CKA_WRAP_WITH_TRUSTED, 0}};
static const bool_default SECRET_BOOLS[] = {{CKA_ENCRYPT, 0}, {CKA_DECRYPT, 0}, {CKA_SIGN, 1},
                                            {CKA_VERIFY, 1},  {CKA_WRAP, 0},    {CKA_UNWRAP, 0},
                                            {CKA_WRAP_WITH_TRUSTED, 0}, {CKA_TRUSTED, 0}};

static CK_RV set_bool(object_t *o, CK_ATTRIBUTE_TYPE type, int v) {
  CK_BBOOL b = v ? CK_TRUE : CK_FALSE;
  return object_set_attr(o, type, &b, 1);
}

static CK_RV set_ulong(object_t *o, CK_ATTRIBUTE_TYPE type, CK_ULONG v) {
  return object_set_attr(o, type, &v, sizeof v);
}

static CK_RV copy_bools(object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n, const bool_default *b,
                        size_t nb) {
  CK_RV rv = CKR_OK;
  for (size_t i = 0; i < nb && rv == CKR_OK; i++) {
    int v;
    rv = tmpl_bool(t, n, b[i].type, b[i].def, &v);
    if (rv == CKR_OK) rv = set_bool(o, b[i].type, v);
  }
  return rv;
}

static CK_RV copy_bytes(object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n, CK_ATTRIBUTE_TYPE type) {
  const CK_ATTRIBUTE *a = tmpl_find(t, n, type);
  if (a == NULL) return object_set_attr(o, type, NULL, 0);
  if (a->ulValueLen > 0 && a->pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  if (a->ulValueLen > 1024) return CKR_ATTRIBUTE_VALUE_INVALID;
  return object_set_attr(o, type, a->pValue, a->ulValueLen);
}

/* Private and secret keys are sensitive and never leave the module; a template asking otherwise is
 * refused rather than silently overridden. */
static CK_RV secret_policy(object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n) {
  int sensitive, extractable, always_auth;
  CK_RV rv = tmpl_bool(t, n, CKA_SENSITIVE, 1, &sensitive);
  if (rv == CKR_OK) rv = tmpl_bool(t, n, CKA_EXTRACTABLE, 0, &extractable);
  if (rv == CKR_OK) rv = tmpl_bool(t, n, CKA_ALWAYS_AUTHENTICATE, 0, &always_auth);
  if (rv != CKR_OK) return rv;
  if (!sensitive || extractable || always_auth) return CKR_ATTRIBUTE_VALUE_INVALID;
  rv = set_bool(o, CKA_SENSITIVE, 1);
  if (rv == CKR_OK) rv = set_bool(o, CKA_EXTRACTABLE, 0);
  if (rv == CKR_OK) rv = set_bool(o, CKA_ALWAYS_SENSITIVE, 1);
  if (rv == CKR_OK) rv = set_bool(o, CKA_NEVER_EXTRACTABLE, 1);
  if (rv == CKR_OK && o->cls == CKO_PRIVATE_KEY) rv = set_bool(o, CKA_ALWAYS_AUTHENTICATE, 0);
  return rv;
}

/* CKA_TOKEN, CKA_PRIVATE (default `private_default`) and CKA_TRUSTED of a template; a trusted
 * object is refused: only the SO may mark one trusted. */
static CK_RV storage_flags(const CK_ATTRIBUTE *t, CK_ULONG n, int private_default, int *token,
                           int *priv) {
  int trusted = 0;
  CK_RV rv = tmpl_bool(t, n, CKA_TOKEN, 0, token);
  if (rv == CKR_OK) rv = tmpl_bool(t, n, CKA_PRIVATE, private_default, priv);
  if (rv == CKR_OK) rv = tmpl_bool(t, n, CKA_TRUSTED, 0, &trusted);
  if (rv == CKR_OK && trusted) rv = CKR_ATTRIBUTE_READ_ONLY;
  return rv;
}

/* A new object of class `cls` with CKA_CLASS, CKA_TOKEN and CKA_PRIVATE set; NULL with *rv set
 * when it cannot be made. */
static object_t *object_begin(CK_OBJECT_CLASS cls, CK_KEY_TYPE kt, int token, int priv,
                              CK_RV *rv) {
  object_t *o = calloc(1, sizeof *o);
  if (o == NULL) {
    *rv = CKR_HOST_MEMORY;
    return NULL;
  }
  o->cls = cls;
  o->ktype = kt;
  o->on_token = token;
  o->is_private = priv;
  *rv = set_ulong(o, CKA_CLASS, cls);
  if (*rv == CKR_OK) *rv = set_bool(o, CKA_TOKEN, token);
  if (*rv == CKR_OK) *rv = set_bool(o, CKA_PRIVATE, priv);
  if (*rv != CKR_OK) {
    object_free(o);
    return NULL;
  }
  return o;
}

CK_RV object_build(CK_OBJECT_CLASS cls, CK_KEY_TYPE kt, CK_MECHANISM_TYPE genmech,
                   const CK_ATTRIBUTE *t, CK_ULONG n, const CK_ATTRIBUTE_TYPE *extra,
                   size_t nextra, object_t **out) {
  *out = NULL;
  if (n > 0 && t == NULL) return CKR_ARGUMENTS_BAD;
  for (CK_ULONG i = 0; i < n; i++) {
    CK_ATTRIBUTE_TYPE ty = t[i].type;
    int ok = LISTED(ty, COMMON) || listed(ty, extra, nextra) ||
             (cls == CKO_PUBLIC_KEY && LISTED(ty, PUBLIC)) ||
             (cls == CKO_PRIVATE_KEY && LISTED(ty, PRIVATE)) ||
             (cls == CKO_SECRET_KEY && LISTED(ty, SECRET));
    if (!ok) return CKR_ATTRIBUTE_TYPE_INVALID;
    if (t[i].ulValueLen > 0 && t[i].pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  }
  CK_ULONG v;
  int present;
  CK_RV rv = tmpl_ulong(t, n, CKA_CLASS, &v, &present);
  if (rv != CKR_OK) return rv;
  if (present && v != cls) return CKR_TEMPLATE_INCONSISTENT;
  rv = tmpl_ulong(t, n, CKA_KEY_TYPE, &v, &present);
  if (rv != CKR_OK) return rv;
  if (present && v != kt) return CKR_TEMPLATE_INCONSISTENT;
  int token, priv;
  rv = storage_flags(t, n, cls != CKO_PUBLIC_KEY, &token, &priv);
  if (rv != CKR_OK) return rv;
  /* Key material is only ever stored encrypted under the user's PIN, so it is private. */
  if (cls != CKO_PUBLIC_KEY && !priv) return CKR_ATTRIBUTE_VALUE_INVALID;

  object_t *o = object_begin(cls, kt, token, priv, &rv);
  if (o == NULL) return rv;
  rv = set_ulong(o, CKA_KEY_TYPE, kt);
  static const bool_default common[] = {
      {CKA_MODIFIABLE, 1}, {CKA_COPYABLE, 1}, {CKA_DESTROYABLE, 1}, {CKA_DERIVE, 0}};
  if (rv == CKR_OK) rv = copy_bools(o, t, n, common, 4);
  if (rv == CKR_OK) rv = copy_bytes(o, t, n, CKA_LABEL);
  if (rv == CKR_OK) rv = copy_bytes(o, t, n, CKA_ID);
  if (rv == CKR_OK) rv = copy_bytes(o, t, n, CKA_START_DATE);
  if (rv == CKR_OK) rv = copy_bytes(o, t, n, CKA_END_DATE);
  if (rv == CKR_OK) rv = set_bool(o, CKA_LOCAL, genmech != CK_UNAVAILABLE_INFORMATION);
  if (rv == CKR_OK) rv = set_ulong(o, CKA_KEY_GEN_MECHANISM, genmech);
  if (rv == CKR_OK && cls != CKO_SECRET_KEY) rv = copy_bytes(o, t, n, CKA_SUBJECT);
  if (rv == CKR_OK && cls == CKO_PUBLIC_KEY)
    rv = copy_bools(o, t, n, PUBLIC_BOOLS, sizeof PUBLIC_BOOLS / sizeof PUBLIC_BOOLS[0]);
  if (rv == CKR_OK && cls == CKO_PRIVATE_KEY)
    rv = copy_bools(o, t, n, PRIVATE_BOOLS, sizeof PRIVATE_BOOLS / sizeof PRIVATE_BOOLS[0]);
  if (rv == CKR_OK && cls == CKO_SECRET_KEY)
    rv = copy_bools(o, t, n, SECRET_BOOLS, sizeof SECRET_BOOLS / sizeof SECRET_BOOLS[0]);
  if (rv == CKR_OK && cls != CKO_PUBLIC_KEY) rv = secret_policy(o, t, n);
  if (rv != CKR_OK) {
    object_free(o);
    return rv;
  }
  *out = o;
  return CKR_OK;
}

/* ---- certificates ------------------------------------------------------------------------------ */

static const CK_ATTRIBUTE_TYPE CERTIFICATE[] = {
    CKA_CLASS,   CKA_CERTIFICATE_TYPE, CKA_TOKEN,         CKA_PRIVATE,    CKA_MODIFIABLE,
    CKA_COPYABLE, CKA_DESTROYABLE,     CKA_LABEL,         CKA_ID,         CKA_VALUE,
    CKA_SUBJECT, CKA_ISSUER,           CKA_SERIAL_NUMBER, CKA_TRUSTED,    CKA_CERTIFICATE_CATEGORY,
    CKA_START_DATE, CKA_END_DATE};

/* A byte attribute of a certificate: absent → empty; longer than `max` → invalid. */
static CK_RV copy_cert_bytes(object_t *o, const CK_ATTRIBUTE *t, CK_ULONG n,
                             CK_ATTRIBUTE_TYPE type, CK_ULONG max) {
  const CK_ATTRIBUTE *a = tmpl_find(t, n, type);
  if (a == NULL) return object_set_attr(o, type, NULL, 0);
  if (a->ulValueLen > max) return CKR_ATTRIBUTE_VALUE_INVALID;
  return object_set_attr(o, type, a->pValue, a->ulValueLen);
}

CK_RV certificate_build(const CK_ATTRIBUTE *t, CK_ULONG n, object_t **out) {
  *out = NULL;
  if (n > 0 && t == NULL) return CKR_ARGUMENTS_BAD;
  for (CK_ULONG i = 0; i < n; i++) {
    if (!LISTED(t[i].type, CERTIFICATE)) return CKR_ATTRIBUTE_TYPE_INVALID;
    if (t[i].ulValueLen > 0 && t[i].pValue == NULL) return CKR_ATTRIBUTE_VALUE_INVALID;
  }
  CK_ULONG type = 0, category = 0;
  int has_type, has_category, token, priv;
  CK_RV rv = tmpl_ulong(t, n, CKA_CERTIFICATE_TYPE, &type, &has_type);
  if (rv == CKR_OK) rv = tmpl_ulong(t, n, CKA_CERTIFICATE_CATEGORY, &category, &has_category);
  const CK_ATTRIBUTE *value = tmpl_find(t, n, CKA_VALUE);
  if (rv == CKR_OK && (!has_type || value == NULL)) rv = CKR_TEMPLATE_INCOMPLETE;
  if (rv == CKR_OK && (type != CKC_X_509 || value->ulValueLen == 0 || category > 3))
    rv = CKR_ATTRIBUTE_VALUE_INVALID;
  if (rv == CKR_OK) rv = storage_flags(t, n, 0, &token, &priv);
  if (rv != CKR_OK) return rv;

  object_t *o = object_begin(CKO_CERTIFICATE, CK_UNAVAILABLE_INFORMATION, token, priv, &rv);
  if (o == NULL) return rv;
  rv = set_ulong(o, CKA_CERTIFICATE_TYPE, CKC_X_509);
  if (rv == CKR_OK) rv = set_ulong(o, CKA_CERTIFICATE_CATEGORY, category);
  if (rv == CKR_OK) rv = set_bool(o, CKA_TRUSTED, 0);
  static const bool_default common[] = {
      {CKA_MODIFIABLE, 1}, {CKA_COPYABLE, 1}, {CKA_DESTROYABLE, 1}};
  if (rv == CKR_OK) rv = copy_bools(o, t, n, common, 3);
  if (rv == CKR_OK) rv = copy_cert_bytes(o, t, n, CKA_VALUE, SVCMOD_CERT_MAX);
  static const CK_ATTRIBUTE_TYPE names[] = {CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER, CKA_LABEL,
                                            CKA_ID,      CKA_START_DATE, CKA_END_DATE};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && rv == CKR_OK; i++)
    rv = copy_cert_bytes(o, t, n, names[i], 4096);
  if (rv != CKR_OK) {
    object_free(o);
    return rv;
  }
  *out = o;
  return CKR_OK;
}

/* ---- curves ---------------------------------------------------------------------------------- */

static const uint8_t OID_P256[] = {0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07};
static const uint8_t OID_ED25519[] = {0x06, 0x03, 0x2b, 0x65, 0x70};
static const uint8_t NAME_ED25519[] = {0x13, 0x0c, 'e', 'd', 'w', 'a', 'r', 'd',
                                       's',  '2',  '5', '5', '1', '9'};

static int attr_is(const CK_ATTRIBUTE *a, const uint8_t *v, size_t n) {
  return a != NULL && a->ulValueLen == n && a->pValue != NULL && memcmp(a->pValue, v, n) == 0;
}

int tmpl_is_ed25519_params(const CK_ATTRIBUTE *a) {
  return attr_is(a, OID_ED25519, sizeof OID_ED25519) ||
         attr_is(a, NAME_ED25519, sizeof NAME_ED25519);
}

int tmpl_is_p256_params(const CK_ATTRIBUTE *a) { return attr_is(a, OID_P256, sizeof OID_P256); }
