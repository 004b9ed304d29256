/* Key generation and random numbers: C_GenerateKeyPair (ML-DSA, the composite, Ed25519, P-256),
 * C_GenerateKey (generic secrets), C_SeedRandom, C_GenerateRandom. */
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "mldsa.h"
#include "pkcs11_functions.h"
#include "svcmod.h"

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
  if (rv == CKR_OK) rv = object_set_secret(*priv, seed, sizeof seed, sk, p->sk_bytes);
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
  if (rv == CKR_OK) rv = object_set_secret(*priv, secret, sizeof secret, sk, sizeof sk);
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
  if (rv == CKR_OK && !(kt == CKK_EC ? tmpl_is_p256_params(params) : tmpl_is_ed25519_params(params)))
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
  if (rv == CKR_OK) rv = object_set_secret(*priv, secret, privlen + publen, NULL, 0);
  OPENSSL_cleanse(secret, sizeof secret);
  return rv;
}

CK_RV C_GenerateKeyPair(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
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
    rv = object_register(s, objs, 2, h);
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

CK_RV C_GenerateKey(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
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
  if (rv == CKR_OK) rv = object_set_secret(o, key, len, NULL, 0);
  OPENSSL_cleanse(key, sizeof key);
  if (rv == CKR_OK) {
    pthread_mutex_lock(&g.lock);
    rv = object_register(s, &o, 1, phKey);
    pthread_mutex_unlock(&g.lock);
  }
  if (rv != CKR_OK && o) object_free(o);
  session_leave(s);
  return rv;
}

CK_RV C_SeedRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pSeed, CK_ULONG ulSeedLen) {
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

CK_RV C_GenerateRandom(CK_SESSION_HANDLE hSession, CK_BYTE *pRandomData,
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
