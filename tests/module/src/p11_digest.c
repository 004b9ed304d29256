/* Message digesting: C_DigestInit, C_Digest, C_DigestUpdate, C_DigestFinal (SHA-256/384/512). */
#include <openssl/evp.h>

#include "pkcs11_functions.h"
#include "pkcs11_operation.h"
#include "svcmod.h"

CK_RV C_DigestInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism) {
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
  CK_RV rv;
  if (!pkcs11_output_fits(out, outlen, need, &rv)) return rv;
  int ok = (len == 0 || EVP_DigestUpdate(s->digest, data, len) == 1) &&
           EVP_DigestFinal_ex(s->digest, out, NULL) == 1;
  *outlen = need;
  digest_end(s);
  return ok ? CKR_OK : CKR_FUNCTION_FAILED;
}

CK_RV C_Digest(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
               CK_BYTE *pDigest, CK_ULONG *pulDigestLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = digest_out(s, pData, ulDataLen, pDigest, pulDigestLen);
  session_leave(s);
  return rv;
}

CK_RV C_DigestUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
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

CK_RV C_DigestFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pDigest, CK_ULONG *pulDigestLen) {
  session_t *s;
  CK_RV rv = session_enter(hSession, &s);
  if (rv != CKR_OK) return rv;
  rv = digest_out(s, NULL, 0, pDigest, pulDigestLen);
  session_leave(s);
  return rv;
}
