/* Signing and verifying: C_SignInit, C_Sign, C_SignUpdate, C_SignFinal, C_VerifyInit, C_Verify,
 * C_VerifyUpdate, C_VerifyFinal and the 3.2 C_VerifySignature* functions. Init checks the key and
 * copies what the operation needs into the session's reservation; the course of the other calls
 * is the shared one (pkcs11_operation.c) over this module's operation. */
#include <openssl/crypto.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"
#include "mldsa.h"
#include "pkcs11_functions.h"
#include "pkcs11_operation.h"
#include "svcmod.h"

static const uint8_t EMPTY[1];

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
  /* CKM_ML_DSA_EXTERNAL_MU is single-part: its input is mu, not a message to stream. */
  if (op->mech == CKM_ML_DSA_EXTERNAL_MU) return CKR_FUNCTION_NOT_SUPPORTED;
  CK_RV rv = pkcs11_buffer_append(&op->parts, part, len, OP_DATA_MAX);
  if (rv == CKR_OK) op->updated = 1;
  return rv;
}

/* ---- the operation as pkcs11_operation.h drives it ---------------------------------------------- */

/* C_Sign* and C_Verify*: an operation started by C_SignInit or C_VerifyInit. */
static int op_active(const op_t *op) { return op->active && !op->verify_signature; }

/* C_VerifySignature*: an operation started by C_VerifySignatureInit. */
static int op_verifies_signature(const op_t *op) { return op->active && op->verify_signature; }

static int op_updated(const op_t *op) { return op->updated; }

static CK_ULONG op_signature_length(const op_t *op) { return signature_bytes(op); }

static CK_RV op_sign(op_t *op, const CK_BYTE *data, CK_ULONG len, CK_BYTE *sig) {
  return do_sign(op, data, len, sig);
}

static CK_RV op_sign_final(op_t *op, CK_BYTE *sig) {
  return do_sign(op, op->parts.data, op->parts.len, sig);
}

static CK_RV op_verify(op_t *op, const CK_BYTE *data, CK_ULONG len, const CK_BYTE *sig,
                       CK_ULONG siglen) {
  return do_verify(op, data, len, sig, siglen);
}

static CK_RV op_verify_final(op_t *op, const CK_BYTE *sig, CK_ULONG siglen) {
  return do_verify(op, op->parts.data, op->parts.len, sig, siglen);
}

static const pkcs11_operation_kind SIGN_OR_VERIFY = {
    .active = op_active,
    .updated = op_updated,
    .signature_length = op_signature_length,
    .update = op_append,
    .sign = op_sign,
    .sign_final = op_sign_final,
    .verify = op_verify,
    .verify_final = op_verify_final,
    .end = op_end,
};

/* The same operation, with the signature given at Init. */
static const pkcs11_operation_kind VERIFY_SIGNATURE = {
    .active = op_verifies_signature,
    .updated = op_updated,
    .signature_length = op_signature_length,
    .update = op_append,
    .verify = op_verify,
    .verify_final = op_verify_final,
    .end = op_end,
};

/* ---- entry points ---------------------------------------------------------------------------------- */

CK_RV C_SignInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = fault_injected("C_SignInit");
  if (rv == CKR_OK) rv = op_start(&s->ops->sign, pMechanism, hKey, 1);
  session_leave(s);
  return rv;
}

CK_RV C_Sign(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen, CK_BYTE *pSignature,
             CK_ULONG *pulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->sign;
  CK_RV injected = fault_injected("C_Sign");
  if (injected != CKR_OK && op_active(op) && !op->updated) {
    op_end(op); /* a failed C_Sign ends the operation, as PKCS#11 says */
    rv = injected;
  } else {
    rv = pkcs11_sign(&SIGN_OR_VERIFY, op, pData, ulDataLen, pSignature, pulSignatureLen);
  }
  session_leave(s);
  return rv;
}

/* C_SignUpdate, C_VerifyUpdate and C_VerifySignatureUpdate. */
static CK_RV update(CK_SESSION_HANDLE hSession, const pkcs11_operation_kind *kind, int signing,
                    CK_BYTE *pPart, CK_ULONG ulPartLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_update(kind, signing ? &s->ops->sign : &s->ops->verify, pPart, ulPartLen);
  session_leave(s);
  return rv;
}

CK_RV C_SignUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return update(hSession, &SIGN_OR_VERIFY, 1, pPart, ulPartLen);
}

CK_RV C_SignFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG *pulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_sign_final(&SIGN_OR_VERIFY, &s->ops->sign, pSignature, pulSignatureLen);
  session_leave(s);
  return rv;
}

CK_RV C_VerifyInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = op_start(&s->ops->verify, pMechanism, hKey, 0);
  session_leave(s);
  return rv;
}

CK_RV C_Verify(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
               CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_verify(&SIGN_OR_VERIFY, &s->ops->verify, pData, ulDataLen, pSignature,
                     ulSignatureLen);
  session_leave(s);
  return rv;
}

CK_RV C_VerifyUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return update(hSession, &SIGN_OR_VERIFY, 0, pPart, ulPartLen);
}

CK_RV C_VerifyFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = pkcs11_verify_final(&SIGN_OR_VERIFY, &s->ops->verify, pSignature, ulSignatureLen);
  session_leave(s);
  return rv;
}

CK_RV C_VerifySignatureInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism,
                            CK_OBJECT_HANDLE hKey, CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
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

CK_RV C_VerifySignature(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  rv = pkcs11_verify(&VERIFY_SIGNATURE, op, pData, ulDataLen, op->sig, op->siglen);
  session_leave(s);
  return rv;
}

CK_RV C_VerifySignatureUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return update(hSession, &VERIFY_SIGNATURE, 0, pPart, ulPartLen);
}

CK_RV C_VerifySignatureFinal(CK_SESSION_HANDLE hSession) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  op_t *op = &s->ops->verify;
  rv = pkcs11_verify_final(&VERIFY_SIGNATURE, op, op->sig, op->siglen);
  session_leave(s);
  return rv;
}
