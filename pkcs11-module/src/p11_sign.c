/* Signing and verifying functions: C_SignInit, C_Sign, C_SignUpdate, C_SignFinal, C_VerifyInit,
 * C_Verify, C_VerifyUpdate, C_VerifyFinal. Each entry point checks its arguments and delegates:
 * Init to operation.c, the rest to the shared course of calls (pkcs11_operation.c) over this
 * module's operation. */
#include "operation.h"
#include "pkcs11_functions.h"
#include "pkcs11_operation.h"
#include "session.h"

static CK_RV init(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey,
                  int signing) {
  /* An unknown session is reported before a missing mechanism. */
  IN_SESSION(hSession, s,
             pMechanism == NULL
                 ? CKR_ARGUMENTS_BAD
                 : operation_init(signing ? &s->sign : &s->verify, s->slot, pMechanism, hKey,
                                  signing));
}

CK_RV C_SignInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  return init(hSession, pMechanism, hKey, 1);
}

CK_RV C_Sign(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen, CK_BYTE *pSignature,
             CK_ULONG *pulSignatureLen) {
  if (pulSignatureLen == NULL || (pData == NULL && ulDataLen > 0)) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_sign(&operation_kind, &s->sign, pData, ulDataLen, pSignature, pulSignatureLen));
}

/* C_SignUpdate and C_VerifyUpdate. */
static CK_RV update(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen, int signing) {
  if (pPart == NULL && ulPartLen > 0) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_update(&operation_kind, signing ? &s->sign : &s->verify, pPart, ulPartLen));
}

CK_RV C_SignUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return update(hSession, pPart, ulPartLen, 1);
}

CK_RV C_SignFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG *pulSignatureLen) {
  if (pulSignatureLen == NULL) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_sign_final(&operation_kind, &s->sign, pSignature, pulSignatureLen));
}

CK_RV C_VerifyInit(CK_SESSION_HANDLE hSession, CK_MECHANISM *pMechanism, CK_OBJECT_HANDLE hKey) {
  return init(hSession, pMechanism, hKey, 0);
}

CK_RV C_Verify(CK_SESSION_HANDLE hSession, CK_BYTE *pData, CK_ULONG ulDataLen,
               CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  if ((pData == NULL && ulDataLen > 0) || pSignature == NULL) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_verify(&operation_kind, &s->verify, pData, ulDataLen, pSignature,
                           ulSignatureLen));
}

CK_RV C_VerifyUpdate(CK_SESSION_HANDLE hSession, CK_BYTE *pPart, CK_ULONG ulPartLen) {
  return update(hSession, pPart, ulPartLen, 0);
}

CK_RV C_VerifyFinal(CK_SESSION_HANDLE hSession, CK_BYTE *pSignature, CK_ULONG ulSignatureLen) {
  if (pSignature == NULL) return CKR_ARGUMENTS_BAD;
  IN_SESSION(hSession, s,
             pkcs11_verify_final(&operation_kind, &s->verify, pSignature, ulSignatureLen));
}
